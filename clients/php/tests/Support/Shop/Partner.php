<?php

declare(strict_types=1);

namespace Herald\Tests\Support\Shop;

use Illuminate\Notifications\Notifiable;

/** A notifiable that is not a model: its webhook URL is its herald route. */
final class Partner
{
    use Notifiable;

    public function __construct(public readonly int $id, public readonly string $webhookUrl)
    {
    }

    public function getKey(): int
    {
        return $this->id;
    }

    public function routeNotificationForHerald(): string
    {
        return $this->webhookUrl;
    }
}
