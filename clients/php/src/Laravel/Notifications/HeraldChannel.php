<?php

declare(strict_types=1);

namespace Herald\Laravel\Notifications;

use Herald\Exception\InvalidSubmission;
use Herald\Herald;
use Herald\SubmitResult;
use Illuminate\Notifications\Notification;

/**
 * The notification channel `herald` (`via()` returns `'herald'` or this class): the
 * notification's `toHerald($notifiable)` becomes a delivery claimed in the current
 * transaction of herald's connection (or one of its own), sent by herald after commit.
 */
final class HeraldChannel
{
    public function __construct(private readonly Herald $herald)
    {
    }

    /**
     * @throws \Herald\Exception\QuotaExhausted when the tenant's account cannot pay for it
     * @throws \Herald\Exception\IdempotencyKeyReused when the key was given to another request
     * @throws InvalidSubmission when herald refuses it, or there is no recipient
     */
    public function send(object $notifiable, Notification $notification): ?SubmitResult
    {
        if (!method_exists($notification, 'toHerald')) {
            throw new \BadMethodCallException(get_class($notification) . ' has no toHerald($notifiable) method for the herald channel');
        }
        $message = $notification->toHerald($notifiable);
        if ($message === null) {
            return null;
        }
        if (!$message instanceof HeraldMessage) {
            throw new \UnexpectedValueException(get_class($notification) . '::toHerald() must return a ' . HeraldMessage::class);
        }
        $to = $message->to;
        if ($to === null && method_exists($notifiable, 'routeNotificationFor')) {
            $to = $notifiable->routeNotificationFor('herald', $notification);
        }
        if (!is_string($to) || $to === '') {
            throw new InvalidSubmission('to', 'empty', 'no recipient: set ->to() on the HeraldMessage or define routeNotificationForHerald() on ' . get_class($notifiable));
        }
        $payload = Herald::payloadText($message->payload);
        return $this->herald->submit(
            operationKey: $message->key ?? self::derivedKey($notifiable, $notification, $message, $to, $payload),
            channel: $message->channel,
            to: $to,
            payload: $payload,
            tenant: $message->tenant,
            quotaKey: $message->quotaKey,
            cost: $message->cost,
            sendAt: $message->sendAt,
            maxAttempts: $message->maxAttempts,
        )->orFail();
    }

    /** The notification's class, the notifiable's identity and the request, hashed. */
    private static function derivedKey(object $notifiable, Notification $notification, HeraldMessage $message, string $to, string $payload): string
    {
        $identity = method_exists($notifiable, 'getKey')
            ? [get_class($notifiable), (string) $notifiable->getKey()]
            : [get_class($notifiable)];
        return 'notification-' . hash('sha256', json_encode(
            [get_class($notification), $identity, $message->channel, $to, $payload],
            JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE,
        ));
    }
}
