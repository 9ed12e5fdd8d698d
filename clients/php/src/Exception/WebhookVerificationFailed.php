<?php

declare(strict_types=1);

namespace Herald\Exception;

/**
 * A received webhook's Standard Webhooks headers did not verify: answer it 401 (or 400),
 * never run its handler. `reason` is missing_header, bad_timestamp, stale_timestamp,
 * no_matching_signature or bad_secret.
 */
final class WebhookVerificationFailed extends HeraldException
{
    public function __construct(public readonly string $reason, string $message)
    {
        parent::__construct($message);
    }
}
