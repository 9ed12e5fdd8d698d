<?php

declare(strict_types=1);

namespace Herald\Tests\Support\Shop;

use Herald\Laravel\Mail\SendsThroughHerald;
use Illuminate\Mail\Mailable;

/** Seed 004's mail, as an application writes it: a Blade view and an attached invoice. */
final class OrderConfirmation extends Mailable
{
    use SendsThroughHerald;

    public function __construct(
        public readonly int $order,
        public readonly string $customer,
        public readonly string $marker,
        public readonly string $invoice,
    ) {
    }

    public function build(): self
    {
        return $this->subject("Order #{$this->order} confirmed — merci")
            ->view('emails.order', ['order' => $this->order, 'customer' => $this->customer, 'marker' => $this->marker])
            ->attachData($this->invoice, "invoice-{$this->order}.pdf", ['mime' => 'application/pdf']);
    }
}
