<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Fingerprint;
use Herald\Sql\Submission;

/**
 * When this client computes the fingerprint (the v2 routines) and when it leaves it to the
 * database (v1): `send_at` read to the millisecond as herald reads it, and anything it does
 * not read exactly so — a time herald might read otherwise, a payload herald refuses, the
 * shared max_attempts — left to the database, which answers in herald's order of checks.
 * Pure PHP, as FingerprintTest.
 */
final class SubmissionTest extends \PHPUnit\Framework\TestCase
{
    /** @return array<string, array{string, ?int}> the text and herald's instant (null: not read here) */
    public static function sendAts(): array
    {
        return [
            // The SQL APIs' own cases (crates/herald/tests/it/sql_api.rs, SEND_AT_*).
            'a leap second reads as :59' => ['2030-01-02T03:04:60Z', 1_893_553_499_000],
            'an offset with milliseconds' => ['2030-01-02T03:04:05.123+02:00', 1_893_546_245_123],
            'not a time' => ['next tuesday', null],
            'a date alone' => ['2030-01-02', null],
            'a lowercase t and z' => ['2030-01-02t01:04:05z', 1_893_546_245_000],
            'a space for the T' => ['2030-01-02 01:04:05Z', 1_893_546_245_000],
            'digits past the millisecond are cut' => ['2030-01-02T01:04:05.123999999Z', 1_893_546_245_123],
            'one digit of fraction' => ['2030-01-02T01:04:05.5-00:30', 1_893_548_045_500],
            'the 30th of February' => ['2030-02-30T00:00:00Z', null],
            'hour 24' => ['2030-01-02T24:00:00Z', null],
            'before 1970 (out of range)' => ['1969-12-31T23:59:59Z', null],
            'after herald\'s range' => ['9999-12-31T00:00:00.001Z', null],
            'an offset past 14 hours' => ['2030-01-02T01:04:05+15:00', null],
            'a trailing newline' => ["2030-01-02T01:04:05Z\n", null],
        ];
    }

    /** @dataProvider sendAts */
    public function testSendAtIsReadAsHeraldReadsIt(string $text, ?int $ms): void
    {
        $this->assertSame($ms, Submission::sendAtMs($text));
    }

    public function testTheFingerprintIsComputedHereWhenEverythingItNamesIsKnown(): void
    {
        $s = new Submission('t', 'k', 'webhook', 'https://x', '{"b": [1.50], "a": "é"}', cost: 2, sendAt: '2030-01-02T03:04:05.123999+02:00', maxAttempts: 5);
        $v2 = $s->withClientFingerprint();
        $this->assertSame('2030-01-02T01:04:05.123Z', $v2->sendAt, 'the instant the fingerprint names');
        $this->assertSame(
            Fingerprint::of('webhook', 'https://x', '{"a":"é","b":[1.5]}', 5, 'webhook', 2, 1_893_546_245_123),
            $v2->fingerprint,
        );
        $this->assertSame([$s->payload, 'webhook', null], [$v2->payload, $v2->channel, $v2->quotaKey], 'the rest as given');
    }

    public function testLeftToTheDatabaseWhenThisClientCannotVouchForIt(): void
    {
        $base = ['t', 'k', 'webhook', 'https://x'];
        foreach ([
            'the shared max_attempts' => new Submission(...$base, payload: '{}', maxAttempts: null),
            'a payload herald refuses' => new Submission(...$base, payload: '{"a":1,"a":2}', maxAttempts: 8),
            'a send_at not read here' => new Submission(...$base, payload: '{}', sendAt: 'tomorrow', maxAttempts: 8),
            'a channel that is not UTF-8' => new Submission('t', 'k', "web\xff", 'https://x', '{}', maxAttempts: 8),
        ] as $case => $s) {
            $this->assertSame($s, $s->withClientFingerprint(), $case);
        }
    }
}
