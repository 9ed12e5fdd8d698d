<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

/**
 * The driver's SMTP relay (aiosmtpd, herald's `HERALD_SMTP_URL` in the suite): every message
 * it accepted is one JSON line in HERALD_TEST_SMTP_MESSAGES (envelope, Message-ID, the raw
 * bytes in base64).
 */
final class SmtpRelay
{
    /** herald's Message-ID for a delivery: `<id@the domain of HERALD_SMTP_FROM>`. */
    public static function messageId(string $deliveryId): string
    {
        $from = Env::get('HERALD_TEST_MAIL_FROM');
        return '<' . $deliveryId . '@' . substr($from, strpos($from, '@') + 1) . '>';
    }

    /** @return list<array<string, mixed>> every accepted message with this Message-ID, raw decoded */
    public static function messages(string $messageId): array
    {
        $file = Env::get('HERALD_TEST_SMTP_MESSAGES');
        $found = [];
        foreach (is_file($file) ? file($file, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) : [] as $line) {
            $m = json_decode($line, true, 512, JSON_THROW_ON_ERROR);
            if ($m['message_id'] === $messageId) {
                $m['raw'] = base64_decode($m['raw'], true);
                $found[] = $m;
            }
        }
        return $found;
    }

    /** @return array<string, mixed> the one message of this delivery, once it arrived */
    public static function await(string $deliveryId, float $within = 20.0): array
    {
        $messageId = self::messageId($deliveryId);
        $deadline = microtime(true) + $within;
        while (($found = self::messages($messageId)) === []) {
            if (microtime(true) > $deadline) {
                throw new \RuntimeException("no mail with Message-ID {$messageId} reached the relay within {$within}s");
            }
            usleep(50_000);
        }
        return $found[0];
    }
}
