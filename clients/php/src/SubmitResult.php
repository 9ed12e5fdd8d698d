<?php

declare(strict_types=1);

namespace Herald;

use Herald\Exception\IdempotencyKeyReused;
use Herald\Exception\QuotaExhausted;

/**
 * The answer to a submit. `reused` and `quota_exhausted` are answers, not exceptions: the
 * call has returned, the transaction is usable, and whether the business change should
 * still commit without the delivery is the application's decision. `orFail()` turns them
 * into exceptions for code that wants a rollback instead.
 */
final class SubmitResult
{
    public function __construct(
        public readonly SubmitStatus $status,
        /** The delivery's id (a UUID): set for Created and Duplicate, null otherwise. */
        public readonly ?string $deliveryId,
        public readonly string $operationKey,
        public readonly string $quotaKey,
    ) {
    }

    /** Created or Duplicate: a delivery exists for this request. */
    public function accepted(): bool
    {
        return $this->status === SubmitStatus::Created || $this->status === SubmitStatus::Duplicate;
    }

    public function created(): bool
    {
        return $this->status === SubmitStatus::Created;
    }

    /**
     * This result if a delivery exists; else throws QuotaExhausted or IdempotencyKeyReused
     * (thrown inside `DB::transaction`, it rolls the transaction back).
     */
    public function orFail(): self
    {
        return match ($this->status) {
            SubmitStatus::Created, SubmitStatus::Duplicate => $this,
            SubmitStatus::QuotaExhausted => throw new QuotaExhausted($this->quotaKey),
            SubmitStatus::Reused => throw new IdempotencyKeyReused($this->operationKey),
        };
    }
}
