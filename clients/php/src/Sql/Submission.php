<?php

declare(strict_types=1);

namespace Herald\Sql;

use DateTimeImmutable;
use DateTimeZone;
use Herald\Exception\InvalidSubmission;
use Herald\Fingerprint;

/**
 * One submit's arguments as the SQL API takes them: text, the payload already JSON text
 * (kept byte for byte), null for "herald's default"; and the request's fingerprint when
 * this client computed it (the v2 routines), null to leave it to the database (v1).
 */
final class Submission
{
    /** RFC 3339, as herald reads `send_at` (PostgreSQL's routine has the same pattern). */
    private const RFC3339 = '/^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})'
        . '(?:\.([0-9]{1,9}))?(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))$/D';

    /** The latest `send_at` herald takes, in Unix milliseconds. */
    private const SEND_AT_MS_MAX = 253402128000000;

    public function __construct(
        public readonly string $tenant,
        public readonly string $operationKey,
        public readonly string $channel,
        public readonly string $recipient,
        public readonly string $payload,
        public readonly ?string $quotaKey = null,
        public readonly ?int $cost = null,
        /** RFC 3339 text. */
        public readonly ?string $sendAt = null,
        public readonly ?int $maxAttempts = null,
        /** The fingerprint's 32 raw bytes (Herald\Fingerprint), computed by this client. */
        public readonly ?string $fingerprint = null,
        /**
         * The caller's W3C traceparent: with herald's traces on, every attempt's span is a
         * child of it. One that does not read as a traceparent is ignored by herald.
         */
        public readonly ?string $traceparent = null,
    ) {
    }

    /**
     * This submission with its fingerprint computed here, so that the database compares it
     * instead of walking the payload; `send_at` then goes as whole milliseconds in UTC, the
     * instant the fingerprint names. Unchanged (left to the database, which answers in
     * herald's order of checks) when max_attempts is the shared setting, when `send_at` is
     * not a time this client reads exactly as herald does, or when herald's rules refuse
     * the payload or a field.
     */
    public function withClientFingerprint(): self
    {
        if ($this->maxAttempts === null) {
            return $this;
        }
        $sendAtMs = null;
        if ($this->sendAt !== null) {
            $sendAtMs = self::sendAtMs($this->sendAt);
            if ($sendAtMs === null) {
                return $this;
            }
        }
        try {
            $print = Fingerprint::of(
                $this->channel,
                $this->recipient,
                $this->payload,
                $this->maxAttempts,
                $this->quotaKey,
                $this->cost,
                $sendAtMs,
            );
        } catch (InvalidSubmission) {
            return $this;
        }
        return new self(
            $this->tenant,
            $this->operationKey,
            $this->channel,
            $this->recipient,
            $this->payload,
            $this->quotaKey,
            $this->cost,
            $sendAtMs === null ? null : self::msText($sendAtMs),
            $this->maxAttempts,
            $print,
            $this->traceparent,
        );
    }

    /**
     * `send_at` in Unix milliseconds as herald reads the text (a leap second as :59, digits
     * past the millisecond cut off), or null when it is not an RFC 3339 time within
     * herald's range: the database then says why.
     */
    public static function sendAtMs(string $text): ?int
    {
        if (preg_match(self::RFC3339, $text, $m) !== 1) {
            return null;
        }
        [$year, $month, $day, $hour, $minute, $second] = array_map('intval', array_slice($m, 1, 6));
        $second = $second === 60 ? 59 : $second;
        $offsetHours = isset($m[9]) ? (int) $m[9] : 0;
        $offsetMinutes = isset($m[10]) ? (int) $m[10] : 0;
        if (!checkdate($month, $day, $year) || $hour > 23 || $minute > 59 || $second > 59
            || $offsetHours > 14 || $offsetMinutes > 59) {
            return null;
        }
        $utc = new DateTimeZone('UTC');
        $at = DateTimeImmutable::createFromFormat('!Y-m-d H:i:s', sprintf('%04d-%02d-%02d %02d:%02d:%02d', $year, $month, $day, $hour, $minute, $second), $utc);
        if ($at === false) {
            return null;
        }
        $offset = (($m[8] ?? '') === '-' ? -1 : 1) * ($offsetHours * 60 + $offsetMinutes) * 60_000;
        $ms = $at->getTimestamp() * 1000 + (int) substr(($m[7] ?? '') . '000', 0, 3) - $offset;
        return $ms >= 0 && $ms <= self::SEND_AT_MS_MAX ? $ms : null;
    }

    private static function msText(int $ms): string
    {
        return gmdate('Y-m-d\TH:i:s', intdiv($ms, 1000)) . sprintf('.%03dZ', $ms % 1000);
    }
}
