<?php

declare(strict_types=1);

namespace Herald\Exception;

/**
 * herald could not be reached, or answered `busy`, on every attempt: nothing was changed
 * (no request reached it, or it said so). Sending the same request later is safe.
 */
final class Unavailable extends HeraldException
{
    public function __construct(public readonly int $attempts, string $last)
    {
        parent::__construct(sprintf('herald is unavailable after %d attempts (last: %s); nothing was changed', $attempts, $last));
    }
}
