<?php

declare(strict_types=1);

namespace Herald\Sql;

/**
 * One submit's arguments as the SQL API takes them: text, the payload already JSON text
 * (kept byte for byte), null for "herald's default".
 */
final class Submission
{
    public function __construct(
        public readonly string $tenant,
        public readonly string $operationKey,
        public readonly string $channel,
        public readonly string $recipient,
        public readonly string $payload,
        public readonly ?string $quotaKey = null,
        public readonly ?int $cost = null,
        /** RFC 3339 text. */
        public readonly ?string $sendAt = null,
        public readonly ?int $maxAttempts = null,
    ) {
    }
}
