<?php

declare(strict_types=1);

namespace Shop\Notifications;

use Herald\Laravel\Notifications\HeraldMessage;
use Illuminate\Notifications\Notification;

/** Tells the fulfilment partner about a new order: a signed webhook through herald. */
final class OrderPlaced extends Notification
{
    public function __construct(public readonly int $order, public readonly int $total)
    {
    }

    /** @return list<string> */
    public function via(object $notifiable): array
    {
        return ['herald'];
    }

    public function toHerald(object $notifiable): HeraldMessage
    {
        return HeraldMessage::webhook(['event' => 'order.placed', 'order' => $this->order, 'total' => $this->total])
            ->key("order-{$this->order}-placed");
    }
}
