<?php

declare(strict_types=1);

namespace Herald\Laravel\Mail;

use Herald\Mail\HeraldMailer;
use Herald\Mail\RenderedMail;
use Symfony\Component\Mailer\SentMessage;
use Symfony\Component\Mailer\Transport\AbstractTransport;

/**
 * `MAIL_MAILER=herald` on Laravel 9 and later (Symfony Mailer), and for any Symfony Mailer:
 * every message becomes an email delivery claimed in the current transaction of herald's
 * connection, sent by herald after commit. The envelope is Symfony's own (sender and every
 * recipient, Bcc included; Symfony already leaves Bcc out of the rendered message).
 */
final class SymfonyTransport extends AbstractTransport
{
    public function __construct(private readonly HeraldMailer $mailer)
    {
        parent::__construct();
    }

    protected function doSend(SentMessage $message): void
    {
        $envelope = $message->getEnvelope();
        $this->mailer->submit(RenderedMail::of(
            $message->toString(),
            $envelope->getSender()->getAddress(),
            array_map(static fn ($address) => $address->getAddress(), $envelope->getRecipients()),
        ));
    }

    public function __toString(): string
    {
        return 'herald://';
    }
}
