<?php

declare(strict_types=1);

namespace Herald;

/** What `once` did: applied the operation now (and what it returned), or skipped a repeat. */
final class OnceResult
{
    public function __construct(
        /** True when this call recorded the receipt and ran the operation. */
        public readonly bool $applied,
        /** The operation's return value when applied, null when skipped. */
        public readonly mixed $value = null,
    ) {
    }
}
