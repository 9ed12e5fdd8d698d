<?php

declare(strict_types=1);

namespace Herald\Tests\Support\Shop;

use Herald\Laravel\Notifications\HeraldChannel;
use Herald\Laravel\Notifications\HeraldMessage;
use Illuminate\Notifications\Notification;

/** A notification through the herald channel: a webhook to the shop's partner. */
final class OrderShipped extends Notification
{
    public function __construct(public readonly int $order, public readonly string $marker, private readonly bool $byClass = false)
    {
    }

    /** @return list<string> */
    public function via(object $notifiable): array
    {
        return [$this->byClass ? HeraldChannel::class : 'herald'];
    }

    public function toHerald(object $notifiable): HeraldMessage
    {
        return HeraldMessage::webhook(['event' => 'order.shipped', 'order' => $this->order, 'marker' => $this->marker]);
    }
}
