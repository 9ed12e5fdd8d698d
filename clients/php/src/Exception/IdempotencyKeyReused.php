<?php

declare(strict_types=1);

namespace Herald\Exception;

/** The operation key was used before with a different request; nothing changed. */
final class IdempotencyKeyReused extends HeraldException
{
    public function __construct(public readonly string $operationKey)
    {
        parent::__construct(sprintf(
            'the operation key %s was already used with a different request; nothing changed',
            json_encode($operationKey),
        ));
    }
}
