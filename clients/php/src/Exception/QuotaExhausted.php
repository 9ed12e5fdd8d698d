<?php

declare(strict_types=1);

namespace Herald\Exception;

/** The tenant's account for `quotaKey` cannot cover the cost; no claim was made. */
final class QuotaExhausted extends HeraldException
{
    public function __construct(public readonly string $quotaKey)
    {
        parent::__construct(sprintf('not enough quota on %s: no delivery was claimed', json_encode($quotaKey)));
    }
}
