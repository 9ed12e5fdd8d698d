<?php

declare(strict_types=1);

namespace Herald\Webhook;

/** A webhook whose signature verified. `id` is herald's delivery id, the same on every attempt. */
final class WebhookMessage
{
    public function __construct(
        public readonly string $id,
        public readonly int $timestamp,
        public readonly string $body,
    ) {
    }

    /** The body decoded as JSON (objects as arrays). */
    public function json(): mixed
    {
        return json_decode($this->body, true, 512, JSON_THROW_ON_ERROR);
    }
}
