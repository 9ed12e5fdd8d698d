<?php

declare(strict_types=1);

namespace Herald\Laravel\Mail;

use Herald\Mail\HeraldMailer;
use Herald\Mail\RenderedMail;
use Illuminate\Mail\Transport\Transport;
use Swift_Mime_SimpleMessage;

/**
 * `MAIL_MAILER=herald` on Laravel 8 (SwiftMailer): every message Laravel renders becomes an
 * email delivery claimed in the current transaction of herald's connection, sent by herald
 * after commit. Laravel 9 and later use SymfonyTransport.
 */
final class SwiftTransport extends Transport
{
    public function __construct(private readonly HeraldMailer $mailer)
    {
    }

    /**
     * @param string[] $failedRecipients
     * @return int the recipients the delivery will reach
     */
    public function send(Swift_Mime_SimpleMessage $message, &$failedRecipients = null)
    {
        $this->beforeSendPerformed($message);
        $recipients = array_keys(array_merge(
            (array) $message->getTo(),
            (array) $message->getCc(),
            (array) $message->getBcc(),
        ));
        $sender = array_key_first((array) $message->getSender())
            ?? $message->getReturnPath()
            ?? array_key_first((array) $message->getFrom());
        $rendered = RenderedMail::of($message->toString(), $sender, $recipients);
        $this->mailer->submit($rendered);
        $this->sendPerformed($message);
        return count($rendered->recipients);
    }
}
