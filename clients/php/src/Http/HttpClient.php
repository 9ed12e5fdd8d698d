<?php

declare(strict_types=1);

namespace Herald\Http;

use Closure;
use DateTimeInterface;
use Herald\Exception\InvalidSubmission;
use Herald\Exception\OutcomeUnknown;
use Herald\Exception\Unavailable;
use Herald\Herald;
use Herald\SubmitResult;
use Herald\SubmitStatus;
use Herald\Text;

/**
 * A thin client of herald's HTTP API, for an application that does not share herald's
 * database. The claim is then NOT part of the application's transaction: submit after the
 * commit (a rollback cannot strand it), and a crash between the commit and this call loses
 * the delivery — that is what the SQL API on the application's own connection is for.
 *
 * A submit carries its operation key, so a resend is safe: an
 * answer that was lost (`outcome_unknown`, a connection error, a timeout) or a `busy` is
 * sent again with the same key up to `$sendsMax` times; a resend of a recorded request
 * answers Duplicate.
 */
final class HttpClient
{
    /** Bound on a Retry-After honoured between resends. */
    public const RETRY_AFTER_MAX_SECONDS = 5.0;

    private readonly string $baseUrl;
    /** @var Closure(float): void */
    private readonly Closure $sleep;

    /** @param (Closure(float): void)|null $sleep seconds; tests inject one */
    public function __construct(
        string $baseUrl,
        private readonly string $apiKey,
        private readonly int $sendsMax = 4,
        private readonly float $timeoutSeconds = 10.0,
        private readonly float $backoffSeconds = 0.2,
        ?Closure $sleep = null,
    ) {
        if (!preg_match('#^https?://#', $baseUrl)) {
            throw new \InvalidArgumentException('herald\'s URL must start with http:// or https://, got ' . json_encode($baseUrl));
        }
        if ($sendsMax < 1) {
            throw new \InvalidArgumentException('sendsMax must be at least 1');
        }
        $this->baseUrl = rtrim($baseUrl, '/');
        $this->sleep = $sleep ?? static function (float $seconds): void {
            usleep((int) ($seconds * 1_000_000));
        };
    }

    /**
     * POST /v1/deliveries. Created (201), Duplicate (200), QuotaExhausted (402) and Reused
     * (422 idempotency_key_reused) are answers; 400/413 throw InvalidSubmission, other
     * errors HttpError; unanswered after every send, OutcomeUnknown or Unavailable.
     *
     * `$traceparent`, the caller's W3C trace context, goes as the `traceparent` header: with
     * herald's traces on, the request and the delivery's attempts join the caller's trace
     * (as `Herald::submit(…, traceparent:)` does for an SQL submit); one that is not
     * printable ASCII is not sent (tracing never fails a submit).
     *
     * @param string|array<mixed>|object $payload JSON text (sent byte for byte) or a value to encode
     */
    public function submit(
        string $operationKey,
        string $channel,
        string $to,
        string|array|object $payload,
        ?string $quotaKey = null,
        ?int $cost = null,
        DateTimeInterface|string|null $sendAt = null,
        ?int $maxAttempts = null,
        ?string $traceparent = null,
    ): SubmitResult {
        Text::checkAll([
            'operation_key' => $operationKey,
            'channel' => $channel,
            'to' => $to,
            'quota_key' => $quotaKey,
            'payload' => is_string($payload) ? $payload : null,
        ]);
        // The key goes in the body: a header carries visible ASCII only, a key any UTF-8.
        $fields = ['operation_key' => $operationKey, 'channel' => $channel, 'to' => $to];
        $fields += array_filter(
            ['quota_key' => $quotaKey, 'cost' => $cost, 'send_at' => Herald::sendAtText($sendAt), 'max_attempts' => $maxAttempts],
            static fn ($v) => $v !== null,
        );
        // The payload's text goes in as it is, so numbers keep their digits and the request
        // has the fingerprint an SQL submit of the same text has.
        $body = substr(self::encode($fields), 0, -1) . ',"payload":' . Herald::payloadText($payload) . '}';
        // Also as the `Idempotency-Key` header where a header can carry it (visible ASCII),
        // for proxies and logs that key on it; the body's is the one herald reads.
        $headers = preg_match('/^[\x21-\x7e]+$/', $operationKey) === 1 ? ['Idempotency-Key' => $operationKey] : [];
        if (($traceparent = Herald::traceparentText($traceparent)) !== null) {
            $headers['traceparent'] = $traceparent;
        }
        $reply = $this->send('POST', '/v1/deliveries', $body, $headers, $operationKey);
        $json = $reply->json();
        $result = fn (SubmitStatus $status, ?string $id) => new SubmitResult($status, $id, $operationKey, $quotaKey ?? $channel);
        return match (true) {
            $reply->status === 201 => $result(SubmitStatus::Created, (string) $json['id']),
            $reply->status === 200 => $result(($json['duplicate'] ?? false) ? SubmitStatus::Duplicate : SubmitStatus::Created, (string) $json['id']),
            $reply->status === 402 => $result(SubmitStatus::QuotaExhausted, null),
            $reply->status === 422 && $reply->errorCode() === 'idempotency_key_reused' => $result(SubmitStatus::Reused, null),
            $reply->status === 400 => throw new InvalidSubmission(
                $reply->errorField(),
                $reply->errorReason() ?? $reply->errorCode(),
                'herald refused the request: ' . $reply->errorMessage(),
            ),
            $reply->status === 413 => throw new InvalidSubmission('payload', 'too_long', 'herald refused the request: ' . $reply->errorMessage()),
            default => throw $reply->error(),
        };
    }

    /** GET /v1/deliveries/{id}: the delivery as herald returns it. */
    public function delivery(string $id): array
    {
        $reply = $this->send('GET', '/v1/deliveries/' . rawurlencode($id), null, [], null);
        return $reply->status === 200 ? $reply->json() : throw $reply->error();
    }

    /** POST /v1/deliveries/{id}/cancel: a pending delivery, cancelled (its credit released). */
    public function cancel(string $id): array
    {
        $reply = $this->send('POST', '/v1/deliveries/' . rawurlencode($id) . '/cancel', null, [], null);
        return $reply->status === 200 ? $reply->json() : throw $reply->error();
    }

    /** GET /v1/quotas: the tenant's accounts. */
    public function quotas(): array
    {
        $reply = $this->send('GET', '/v1/quotas', null, [], null);
        return $reply->status === 200 ? ($reply->json()['quotas'] ?? []) : throw $reply->error();
    }

    /** @param array<string, string> $headers */
    private function send(string $method, string $path, ?string $body, array $headers, ?string $operationKey): Reply
    {
        $possiblySent = false;
        $last = '';
        for ($send = 1; $send <= $this->sendsMax; $send++) {
            $reply = Reply::exchange($method, $this->baseUrl . $path, $this->apiKey, $body, $headers, $this->timeoutSeconds);
            $wait = $this->backoffSeconds * (2 ** ($send - 1));
            if ($reply->status === 0) {
                // No answer: refused before anything was sent, or lost after.
                $possiblySent = $possiblySent || !$reply->refused;
                $last = $reply->transportError;
            } elseif ($reply->status === 503 || $reply->status === 502 || $reply->status === 504 || $reply->status === 500) {
                $code = $reply->errorCode();
                $possiblySent = $possiblySent || $code !== 'busy';
                $last = "{$reply->status} {$code}";
                $wait = max($wait, min(self::RETRY_AFTER_MAX_SECONDS, (float) ($reply->retryAfter ?? 0)));
            } else {
                return $reply;
            }
            if ($send < $this->sendsMax) {
                ($this->sleep)($wait);
            }
        }
        if ($possiblySent && $operationKey !== null) {
            throw new OutcomeUnknown($operationKey, $this->sendsMax, $last);
        }
        throw new Unavailable($this->sendsMax, $last);
    }

    /** @param array<string, mixed> $value */
    private static function encode(array $value): string
    {
        return json_encode($value, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
    }
}
