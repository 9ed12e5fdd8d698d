<?php

declare(strict_types=1);

namespace Herald\Laravel\Notifications;

/**
 * What a notification's `toHerald($notifiable)` returns: one herald delivery. A webhook
 * (`HeraldMessage::webhook($payload)`), an email herald writes (`HeraldMessage::email($subject,
 * $text, $html)`), or any channel herald serves (`new HeraldMessage($channel, $payload)`).
 * `to` defaults to the notifiable's `routeNotificationForHerald($notification)`; the operation
 * key to one derived from the notification's class, the notifiable and the request, so the
 * same notification to the same notifiable is one delivery (name the event with `->key()`
 * when it may legitimately go again).
 */
final class HeraldMessage
{
    public ?string $to = null;
    public ?string $key = null;
    public ?string $tenant = null;
    public ?string $quotaKey = null;
    public ?int $cost = null;
    public \DateTimeInterface|string|null $sendAt = null;
    public ?int $maxAttempts = null;

    /** @param string|array<mixed>|object $payload JSON text kept byte for byte, or a value encoded once */
    public function __construct(
        public readonly string $channel,
        public readonly string|array|object $payload,
    ) {
    }

    /** @param string|array<mixed>|object $payload */
    public static function webhook(string|array|object $payload): self
    {
        return new self('webhook', $payload);
    }

    public static function email(string $subject, string $text, ?string $html = null): self
    {
        return new self('email', array_filter(
            ['subject' => $subject, 'text' => $text, 'html' => $html],
            static fn ($v) => $v !== null,
        ));
    }

    public function to(string $to): self
    {
        $this->to = $to;
        return $this;
    }

    public function key(string $operationKey): self
    {
        $this->key = $operationKey;
        return $this;
    }

    public function tenant(string $tenant): self
    {
        $this->tenant = $tenant;
        return $this;
    }

    public function quota(string $quotaKey, int $cost = 1): self
    {
        $this->quotaKey = $quotaKey;
        $this->cost = $cost;
        return $this;
    }

    public function sendAt(\DateTimeInterface|string $at): self
    {
        $this->sendAt = $at;
        return $this;
    }

    public function maxAttempts(int $attempts): self
    {
        $this->maxAttempts = $attempts;
        return $this;
    }
}
