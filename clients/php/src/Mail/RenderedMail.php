<?php

declare(strict_types=1);

namespace Herald\Mail;

use Herald\Exception\InvalidSubmission;

/**
 * A message a mailer rendered (RFC 5322: header fields, an empty line, the body), as herald's
 * email channel takes it: `{"raw", "envelope": {"from", "to"}}`. Framework-neutral: the
 * SwiftMailer and Symfony Mailer transports both build one of these.
 *
 * Two renderings of the same mail differ in what mailers draw at the time: the Date and
 * Message-ID fields, the MIME boundaries and the generated Content-IDs. So that they are the
 * same request to herald (a retried closure or job claims the mail once, and a repeat is a
 * `duplicate`, never `reused`), the message is submitted without Date and Message-ID — herald
 * writes both when it sends: its own Message-ID, the Date of the attempt — and with boundaries
 * and Content-IDs renamed after the message's own hash. Nothing else changes, byte for byte:
 * headers, parts, encodings, attachments. A Bcc field is dropped (its addresses travel in the
 * envelope only, never in what every recipient reads).
 *
 * The operation key is the application's when it gives one (the `X-Herald-Key` header, which
 * `Herald\Laravel\Mail\SendsThroughHerald::herald()` sets; removed here), else derived from
 * the submitted message and its envelope. The consequence, on purpose: the same mail to the
 * same people twice within herald's retention is one delivery; give a mail that may
 * legitimately go again a key of its own (the event it reports).
 */
final class RenderedMail
{
    /** The header field that carries the application's own operation key. */
    public const KEY_HEADER = 'X-Herald-Key';

    /** herald's limit for the email channel's payload (EMAIL_PAYLOAD_BYTES_MAX). */
    public const PAYLOAD_BYTES_MAX = 4 * 1024 * 1024;

    /**
     * @param string $raw the rendered message
     * @param list<string> $recipients every envelope recipient (To, Cc and Bcc)
     */
    private function __construct(
        public readonly string $raw,
        public readonly ?string $sender,
        public readonly array $recipients,
        public readonly ?string $key,
    ) {
    }

    /**
     * Reads the key header, drops it, Bcc, Date and Message-ID from the head, and renames the
     * boundaries and Content-IDs.
     *
     * @param list<string> $recipients
     * @throws InvalidSubmission when there is no recipient
     */
    public static function of(string $raw, ?string $sender, array $recipients): self
    {
        $recipients = array_values(array_unique(array_map('strval', $recipients)));
        if ($recipients === []) {
            throw new InvalidSubmission('to', 'empty', 'the message has no recipient (To, Cc or Bcc)');
        }
        [$head, $rest] = self::split($raw);
        $key = null;
        $kept = [];
        foreach (self::fields($head) as $field) {
            $name = strtolower(rtrim(strstr($field, ':', true) ?: ''));
            if ($name === strtolower(self::KEY_HEADER)) {
                $key ??= trim((string) preg_replace('/\r?\n[ \t]/', ' ', substr($field, strpos($field, ':') + 1)));
                continue;
            }
            if (in_array($name, ['bcc', 'date', 'message-id'], true)) {
                continue;
            }
            $kept[] = $field;
        }
        return new self(self::renamed(implode('', $kept) . $rest), $sender, $recipients, $key === '' ? null : $key);
    }

    /** The application's key, or one derived from the message and its envelope. */
    public function operationKey(): string
    {
        return $this->key ?? 'mail-' . hash('sha256', json_encode(
            ['message' => hash('sha256', $this->raw), 'from' => $this->sender, 'to' => $this->recipients],
            JSON_THROW_ON_ERROR,
        ));
    }

    /** The email channel's payload: `{"raw", "envelope"}` (or `raw_base64` for bytes that are not UTF-8). */
    public function payload(): string
    {
        $envelope = ['to' => $this->recipients];
        if ($this->sender !== null && $this->sender !== '') {
            $envelope = ['from' => $this->sender] + $envelope;
        }
        $message = mb_check_encoding($this->raw, 'UTF-8') && !str_contains($this->raw, "\0")
            ? ['raw' => $this->raw]
            : ['raw_base64' => base64_encode($this->raw)];
        return json_encode(
            $message + ['envelope' => $envelope],
            JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE,
        );
    }

    /** The delivery's `to`: the first recipient (the others are in the envelope). */
    public function to(): string
    {
        return $this->recipients[0];
    }

    /**
     * The message with its boundaries and Content-IDs (drawn at random by the mailer) renamed
     * in order of appearance after a hash of the message without them, everywhere they occur
     * (a Content-ID also where the HTML refers to it as `cid:`).
     */
    private static function renamed(string $message): string
    {
        $tokens = [];
        if (preg_match_all('/boundary="?([^";\r\n]+)"?/i', $message, $m) > 0) {
            $tokens = array_merge($tokens, $m[1]);
        }
        if (preg_match_all('/^Content-ID:[ \t]*<([^>\r\n]+)>/mi', $message, $m) > 0) {
            $tokens = array_merge($tokens, $m[1]);
        }
        $tokens = array_values(array_unique($tokens));
        if ($tokens === []) {
            return $message;
        }
        $placeholders = [];
        foreach ($tokens as $i => $token) {
            $placeholders[$token] = "\u{1}{$i}\u{1}";
        }
        // strtr replaces the longest match first and never rescans what it wrote.
        $hash = substr(hash('sha256', strtr($message, $placeholders)), 0, 24);
        $names = [];
        foreach ($tokens as $i => $token) {
            $names[$token] = str_contains($token, '@') ? "part{$i}.{$hash}@herald" : "herald_{$i}_{$hash}";
        }
        return strtr($message, $names);
    }

    /** @return array{string, string} the header section (each field with its CRLF) and the rest (the empty line and the body) */
    private static function split(string $raw): array
    {
        if (preg_match('/\r?\n\r?\n/', $raw, $m, PREG_OFFSET_CAPTURE) !== 1) {
            return [$raw, ''];
        }
        $end = $m[0][1] + strlen($m[0][0]) - (str_ends_with($m[0][0], "\r\n") ? 2 : 1);
        return [substr($raw, 0, $end), substr($raw, $end)];
    }

    /** @return list<string> the header section's fields, each with its folded lines and line end */
    private static function fields(string $head): array
    {
        if ($head === '') {
            return [];
        }
        return preg_split('/(?<=\n)(?![ \t])/', $head, -1, PREG_SPLIT_NO_EMPTY) ?: [];
    }
}
