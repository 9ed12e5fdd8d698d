<?php

declare(strict_types=1);

namespace Herald\Mail;

use Herald\Herald;
use Herald\SubmitResult;

/**
 * Claims rendered mail as herald email deliveries on the application's connection: inside
 * its open transaction, when there is one (the claim commits or rolls back with it), else in
 * one of its own. herald sends each after commit. What the Laravel mail transports call.
 */
final class HeraldMailer
{
    public function __construct(
        private readonly Herald $herald,
        /** null: Herald's default tenant (herald.tenant). */
        private readonly ?string $tenant = null,
        /** null: the channel, `email`. */
        private readonly ?string $quotaKey = null,
        /** The email channel's name in herald. */
        private readonly string $channel = 'email',
    ) {
    }

    /**
     * @throws \Herald\Exception\QuotaExhausted when the tenant's account cannot pay for it
     * @throws \Herald\Exception\IdempotencyKeyReused when the key was given to another message
     * @throws \Herald\Exception\InvalidSubmission when herald refuses it (nothing written)
     */
    public function submit(RenderedMail $mail): SubmitResult
    {
        return $this->herald->submit(
            operationKey: $mail->operationKey(),
            channel: $this->channel,
            to: $mail->to(),
            payload: $mail->payload(),
            tenant: $this->tenant,
            quotaKey: $this->quotaKey,
        )->orFail();
    }
}
