<?php

declare(strict_types=1);

namespace Herald\Laravel\Mail;

use Herald\Mail\RenderedMail;

/**
 * For a Mailable: `->herald('order-17-confirmation')` names the delivery's operation key
 * (herald claims one delivery per key), instead of the key derived from the rendered message.
 * The key travels as the X-Herald-Key header, which the transport removes before submitting.
 */
trait SendsThroughHerald
{
    public function herald(string $operationKey): static
    {
        $add = static function ($message) use ($operationKey): void {
            $message->getHeaders()->addTextHeader(RenderedMail::KEY_HEADER, $operationKey);
        };
        // Laravel 9+ builds a Symfony message, Laravel 8 a SwiftMailer one.
        if (method_exists($this, 'withSymfonyMessage')) {
            $this->withSymfonyMessage($add);
        } else {
            $this->withSwiftMessage($add);
        }
        return $this;
    }
}
