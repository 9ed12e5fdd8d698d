<?php

declare(strict_types=1);

namespace Herald;

use Closure;
use DateTimeImmutable;
use DateTimeInterface;
use DateTimeZone;
use Herald\Exception\InvalidSubmission;
use Herald\Sql\Calls;
use Herald\Sql\LaravelConnection;
use Herald\Sql\MariaDbCalls;
use Herald\Sql\PdoConnection;
use Herald\Sql\PostgresCalls;
use Herald\Sql\SqlConnection;
use Herald\Sql\Submission;
use Illuminate\Database\ConnectionInterface;
use JsonException;
use PDO;

/**
 * herald on the application's own connection: `submit` claims a delivery and `once`
 * records a receipt, both inside the caller's transaction, so they commit or roll back
 * with its business change. Neither raises inside the transaction except the database's
 * concurrency errors (for the caller's retry loop, e.g. `DB::transaction($fn, 5)`); an
 * invalid request is thrown as InvalidSubmission after the call returned.
 */
final class Herald
{
    private ?Calls $calls = null;

    public function __construct(
        private readonly SqlConnection $db,
        /** herald's schema inside the application's PostgreSQL database. */
        private readonly string $schema = 'herald',
        /** herald's own database on the application's MariaDB server. */
        private readonly string $database = 'herald',
        /** The tenant of a submit that names none. */
        private readonly ?string $tenant = null,
        /**
         * The attempts of a submit that says none (herald's default, 8; `HERALD_MAX_ATTEMPTS`
         * in Laravel). With it known here, the fingerprint is computed here and the payload is
         * not walked in SQL (the v2 routines). null: herald's shared setting, which only the
         * database knows, so the v1 routines compute the fingerprint there (slower for
         * large payloads).
         */
        private readonly ?int $maxAttempts = self::MAX_ATTEMPTS_DEFAULT,
        /**
         * The caller's current W3C traceparent, asked for by a submit that passes none (the
         * mail transports', the notification channel's): `herald.traceparent` in Laravel.
         * What it throws or returns that is not a traceparent is ignored.
         *
         * @var (Closure(): ?string)|null
         */
        private readonly ?Closure $currentTrace = null,
    ) {
    }

    /** The configured current trace's traceparent; nothing when asking for it fails. */
    private function currentTrace(): ?string
    {
        if ($this->currentTrace === null) {
            return null;
        }
        try {
            $traceparent = ($this->currentTrace)();
        } catch (\Throwable) {
            return null;
        }
        return is_string($traceparent) ? $traceparent : null;
    }

    /** herald's own default for `max_attempts` (its build's, and a new database's). */
    public const MAX_ATTEMPTS_DEFAULT = 8;

    public static function pdo(
        PDO $pdo,
        string $schema = 'herald',
        string $database = 'herald',
        ?string $tenant = null,
        ?int $maxAttempts = self::MAX_ATTEMPTS_DEFAULT,
        ?Closure $currentTrace = null,
    ): self {
        return new self(new PdoConnection($pdo), $schema, $database, $tenant, $maxAttempts, $currentTrace);
    }

    /**
     * @param ConnectionInterface|Closure(): ConnectionInterface $connection
     * @param (Closure(): ?string)|null $currentTrace
     */
    public static function laravel(
        ConnectionInterface|Closure $connection,
        string $schema = 'herald',
        string $database = 'herald',
        ?string $tenant = null,
        ?int $maxAttempts = self::MAX_ATTEMPTS_DEFAULT,
        ?Closure $currentTrace = null,
    ): self {
        return new self(new LaravelConnection($connection), $schema, $database, $tenant, $maxAttempts, $currentTrace);
    }

    /**
     * Claims the delivery (tenant, operationKey, channel) in the caller's transaction and
     * reserves its cost there (without an open transaction, in one of its own). The payload is
     * JSON text kept byte for byte, or an array/object encoded once here. `$traceparent`, the
     * caller's W3C Trace Context, makes each attempt's span a child of the caller's when
     * herald's traces are on (none given: the configured current trace's, if any); one that
     * does not read as a traceparent is ignored.
     *
     * @param string|array<mixed>|object $payload
     * @throws InvalidSubmission when herald refuses the request (nothing was written): a
     *         text that is not UTF-8 or holds NUL before any call, the rest as the database answers
     */
    public function submit(
        string $operationKey,
        string $channel,
        string $to,
        string|array|object $payload,
        ?string $tenant = null,
        ?string $quotaKey = null,
        ?int $cost = null,
        DateTimeInterface|string|null $sendAt = null,
        ?int $maxAttempts = null,
        ?string $traceparent = null,
    ): SubmitResult {
        $traceparent ??= $this->currentTrace();
        $submission = new Submission(
            tenant: $tenant ?? $this->tenant
                ?? throw new \InvalidArgumentException('no tenant: pass tenant: or configure a default one (herald.tenant)'),
            operationKey: $operationKey,
            channel: $channel,
            recipient: $to,
            payload: self::payloadText($payload),
            quotaKey: $quotaKey,
            cost: $cost,
            sendAt: self::sendAtText($sendAt),
            maxAttempts: $maxAttempts ?? $this->maxAttempts,
            traceparent: self::traceparentText($traceparent),
        );
        // Before the call, so no driver cuts a key at NUL and no database raises on bytes
        // that are not UTF-8 inside the caller's transaction.
        Text::checkAll([
            'tenant' => $submission->tenant,
            'operation_key' => $submission->operationKey,
            'channel' => $submission->channel,
            'to' => $submission->recipient,
            'payload' => $submission->payload,
            'quota_key' => $submission->quotaKey,
            'send_at' => $submission->sendAt,
        ]);
        // Outside a transaction the call is its own: a PostgreSQL function is one
        // statement, and MariaDB's procedure opens and commits a transaction when none is open.
        $row = $this->calls()->submit($this->db, $submission->withClientFingerprint());
        $status = $row['status'];
        if ($status === 'invalid') {
            throw new InvalidSubmission($row['field'], $row['code'] ?? 'invalid');
        }
        if ($status === 'created') {
            // After the commit (now, outside a transaction): a worker in another process
            // starts it at once. Within a transaction begun on the PDO handle itself, the
            // caller calls wake() after its commit.
            $this->db->afterCommit(fn () => $this->wake());
        }
        return new SubmitResult(
            status: SubmitStatus::tryFrom($status)
                ?? throw new \UnexpectedValueException("herald's submit answered an unknown status " . json_encode($status)),
            deliveryId: $row['delivery_id'],
            operationKey: $operationKey,
            quotaKey: $quotaKey ?? $channel,
        );
    }

    /**
     * Runs `$apply` once per (scope, operationId) within herald's retention (receipts
     * older than `HERALD_RETENTION`, 30 days by default, are pruned): the receipt is recorded in a
     * transaction together with what `$apply` writes — a savepoint inside the caller's
     * open transaction, or a new transaction (re-run up to `$attempts` times on a
     * concurrency error) — so the receipt and the effect commit or roll back together.
     * A repeat (another process, a retried job, a redelivered webhook, after a restart)
     * skips `$apply` and returns `applied: false`.
     *
     * `$apply` should write to the database only: an effect outside it (mail, HTTP) is
     * not rolled back with the receipt — submit it as a delivery instead.
     *
     * @throws InvalidSubmission for an empty, overlong or control-character scope or id, or
     *         one whose bytes are not UTF-8
     */
    public function once(string $scope, string $operationId, callable $apply, int $attempts = 1): OnceResult
    {
        Text::checkAll(['scope' => $scope, 'operation_id' => $operationId]);
        $calls = $this->calls();
        return $this->db->transaction(function () use ($calls, $scope, $operationId, $apply): OnceResult {
            $row = $calls->receipt($this->db, $scope, $operationId);
            return match ($row['status']) {
                'applied' => new OnceResult(true, $apply()),
                'duplicate' => new OnceResult(false),
                'invalid' => throw new InvalidSubmission($row['field'], $row['code'] ?? 'invalid'),
                default => throw new \UnexpectedValueException(
                    "herald's receipt answered an unknown status " . json_encode($row['status']),
                ),
            };
        }, $attempts);
    }

    /**
     * Tells herald's workers in other processes that work was committed: one UDP datagram
     * to each running worker, on MariaDB (on PostgreSQL the commit's NOTIFY does it). A
     * created `submit` does this by itself after the commit — through Laravel's
     * connection, inside this package's `transaction()`, or at once outside a transaction;
     * call it after your commit when you began the transaction on the PDO handle yourself.
     * Never throws and never waits; a datagram lost leaves the delivery to herald's poll
     * (`HERALD_POLL_INTERVAL`, 1 s).
     */
    public function wake(): void
    {
        try {
            Wake::send($this->calls(), $this->db, $this->database);
        } catch (\Throwable) {
            // Never fails the application.
        }
    }

    public function connection(): SqlConnection
    {
        return $this->db;
    }

    /** The SQL API of the connection's database (PostgreSQL or MariaDB). */
    public function calls(): Calls
    {
        return $this->calls ??= match ($driver = $this->db->driver()) {
            'pgsql' => new PostgresCalls($this->schema),
            'mysql', 'mariadb' => new MariaDbCalls($this->database),
            default => throw new \InvalidArgumentException(
                "herald's SQL API needs PostgreSQL or MariaDB; this connection's driver is " . json_encode($driver),
            ),
        };
    }

    public function defaultTenant(): ?string
    {
        return $this->tenant;
    }

    /** @param string|array<mixed>|object $payload */
    public static function payloadText(string|array|object $payload): string
    {
        if (is_string($payload)) {
            return $payload;
        }
        try {
            return json_encode(
                $payload,
                JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION,
            );
        } catch (JsonException $e) {
            throw new InvalidSubmission('payload', 'not_encodable', 'the payload cannot be encoded as JSON: ' . $e->getMessage());
        }
    }

    /**
     * A traceparent as herald is given it, or null: ignored unless printable ASCII (a
     * traceparent is), since tracing never fails a submit — bytes that are not UTF-8 would
     * abort a PostgreSQL transaction, and a header cannot carry them.
     */
    public static function traceparentText(?string $traceparent): ?string
    {
        return $traceparent !== null && preg_match('/^[\x20-\x7e]{1,512}$/D', $traceparent) === 1
            ? $traceparent : null;
    }

    /** RFC 3339 in UTC with milliseconds (herald keeps send_at to the millisecond). */
    public static function sendAtText(DateTimeInterface|string|null $sendAt): ?string
    {
        if (!$sendAt instanceof DateTimeInterface) {
            return $sendAt;
        }
        return DateTimeImmutable::createFromInterface($sendAt)
            ->setTimezone(new DateTimeZone('UTC'))
            ->format('Y-m-d\TH:i:s.v\Z');
    }
}
