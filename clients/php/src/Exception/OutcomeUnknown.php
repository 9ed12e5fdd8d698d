<?php

declare(strict_types=1);

namespace Herald\Exception;

/**
 * After every attempt, whether herald recorded the request is unknown (`outcome_unknown`,
 * a lost answer). Send the same request again (same operation key) to learn it: a
 * recorded one answers Duplicate.
 */
final class OutcomeUnknown extends HeraldException
{
    public function __construct(public readonly string $operationKey, public readonly int $attempts, string $last)
    {
        parent::__construct(sprintf(
            'the outcome of submitting %s is unknown after %d attempts (last: %s); send it again with the same key to learn it',
            json_encode($operationKey),
            $attempts,
            $last,
        ));
    }
}
