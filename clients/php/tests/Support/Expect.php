<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

/**
 * What the driver checks at its webhook receiver and its SMTP relay once the suite passed:
 * deliveries that must arrive exactly once, and markers no request or mail may ever carry
 * (a rolled-back submit's).
 * One JSON object a line, appended (the worker processes write too).
 */
final class Expect
{
    public static function deliveredOnce(string $deliveryId, string $case): void
    {
        self::append('expect-once.jsonl', ['id' => $deliveryId, 'case' => $case]);
    }

    /** A mail (an email delivery) the driver must find at its SMTP relay exactly once. */
    public static function mailedOnce(string $deliveryId, string $case): void
    {
        self::append('expect-mail.jsonl', ['id' => $deliveryId, 'case' => $case]);
    }

    public static function neverDelivered(string $marker, string $case): void
    {
        self::append('expect-never.jsonl', ['marker' => $marker, 'case' => $case]);
    }

    private static function append(string $file, array $line): void
    {
        file_put_contents(Env::workDir() . '/' . $file, json_encode($line) . "\n", FILE_APPEND | LOCK_EX);
    }
}
