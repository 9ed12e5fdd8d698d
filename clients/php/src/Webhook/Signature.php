<?php

declare(strict_types=1);

namespace Herald\Webhook;

use Herald\Exception\WebhookVerificationFailed;

/**
 * Standard Webhooks signatures: `webhook-signature` holds `v1,<base64 HMAC-SHA256 of
 * "{webhook-id}.{webhook-timestamp}.{body}">` entries, space separated (several during a
 * secret rotation), keyed with the base64 after `whsec_`. herald signs every attempt with
 * the attempt's own timestamp.
 */
final class Signature
{
    /** How far a timestamp may be from now, either way (the specification's 5 minutes). */
    public const TOLERANCE_SECONDS = 300;

    /** `v1,<signature>` of one message with one secret (what herald sends). */
    public static function sign(string $secret, string $id, int $timestamp, string $body): string
    {
        return 'v1,' . base64_encode(hash_hmac('sha256', "{$id}.{$timestamp}.{$body}", self::key($secret), true));
    }

    /**
     * Checks one received message against any of `$secrets` (the current one and, during a
     * rotation, the previous one).
     *
     * @param list<string> $secrets
     * @throws WebhookVerificationFailed
     */
    public static function verify(
        array $secrets,
        string $id,
        string $timestamp,
        string $signatures,
        string $body,
        int $nowSeconds,
        int $toleranceSeconds = self::TOLERANCE_SECONDS,
    ): int {
        if ($secrets === []) {
            throw new WebhookVerificationFailed('bad_secret', 'no webhook secret is configured');
        }
        if (preg_match('/^[0-9]{1,12}$/', trim($timestamp)) !== 1) {
            throw new WebhookVerificationFailed('bad_timestamp', 'the webhook-timestamp is not a number of seconds');
        }
        $ts = (int) trim($timestamp);
        if (abs($nowSeconds - $ts) > $toleranceSeconds) {
            throw new WebhookVerificationFailed(
                'stale_timestamp',
                sprintf('the webhook-timestamp is %d s away from now, more than %d s', $nowSeconds - $ts, $toleranceSeconds),
            );
        }
        $given = [];
        foreach (preg_split('/\s+/', trim($signatures)) ?: [] as $entry) {
            if (str_starts_with($entry, 'v1,')) {
                $decoded = base64_decode(substr($entry, 3), true);
                if ($decoded !== false) {
                    $given[] = $decoded;
                }
            }
        }
        foreach ($secrets as $secret) {
            $expected = hash_hmac('sha256', "{$id}.{$ts}.{$body}", self::key($secret), true);
            foreach ($given as $signature) {
                if (hash_equals($expected, $signature)) {
                    return $ts;
                }
            }
        }
        throw new WebhookVerificationFailed('no_matching_signature', 'no webhook-signature matches the secret');
    }

    private static function key(string $secret): string
    {
        $encoded = str_starts_with($secret, 'whsec_') ? substr($secret, 6) : $secret;
        $key = base64_decode($encoded, true);
        if ($key === false || $key === '') {
            throw new WebhookVerificationFailed('bad_secret', 'the webhook secret is not whsec_ followed by base64');
        }
        return $key;
    }
}
