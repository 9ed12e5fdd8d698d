<?php

declare(strict_types=1);

namespace Herald\Exception;

/** herald's HTTP API answered with an error that is not a submit's answer (401, 404, 409, ...). */
class HttpError extends HeraldException
{
    public function __construct(
        public readonly int $status,
        public readonly string $errorCode,
        string $message,
    ) {
        parent::__construct(sprintf('herald answered %d %s: %s', $status, $errorCode, $message));
    }
}
