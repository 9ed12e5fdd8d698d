<?php

declare(strict_types=1);

namespace Herald\Testing;

use Herald\Herald;

/**
 * Reads herald's tables on the Herald's own connection — so inside a test's transaction
 * (Laravel's DatabaseTransactions / RefreshDatabase) it sees the claims that transaction
 * made, before and without any commit. It reads what the real submit wrote; nothing here
 * fakes a call. Needs SELECT on herald's tables (a test database's owner has it).
 */
final class HeraldInspector
{
    /** Bound on a wait for a running herald to finish a delivery. */
    public const WAIT_MAX_SECONDS = 30.0;

    public function __construct(private readonly Herald $herald)
    {
    }

    /**
     * The tenant's deliveries, oldest first; narrowed to one identity when given.
     *
     * @return list<array{id: string, operation_key: string, channel: string, recipient: string, state: string, attempts: int, quota_key: string, cost: int, payload: string}>
     */
    public function deliveries(?string $tenant = null, ?string $operationKey = null, ?string $channel = null): array
    {
        $calls = $this->herald->calls();
        $where = ["d.tenant_id = {$calls->uuidParam()}"];
        $bindings = [$this->tenant($tenant)];
        if ($operationKey !== null) {
            $where[] = 'd.operation_key = ?';
            $bindings[] = $operationKey;
        }
        if ($channel !== null) {
            $where[] = 'd.channel = ?';
            $bindings[] = $channel;
        }
        return $this->rows(
            sprintf(
                'SELECT %s AS id, d.operation_key, d.channel, d.recipient, d.state, d.attempts, d.quota_key, d.cost, p.payload, p.traceparent
                   FROM %s d JOIN %s p ON p.delivery_id = d.id WHERE %s ORDER BY d.id',
                $calls->uuidText('d.id'),
                $calls->table('deliveries'),
                $calls->table('delivery_payloads'),
                implode(' AND ', $where),
            ),
            $bindings,
        );
    }

    /** One delivery by id, or null. */
    public function delivery(string $id): ?array
    {
        $calls = $this->herald->calls();
        $rows = $this->rows(
            sprintf(
                'SELECT %s AS id, d.operation_key, d.channel, d.recipient, d.state, d.attempts, d.quota_key, d.cost, p.payload
                   FROM %s d JOIN %s p ON p.delivery_id = d.id WHERE d.id = %s',
                $calls->uuidText('d.id'),
                $calls->table('deliveries'),
                $calls->table('delivery_payloads'),
                $calls->uuidParam(),
            ),
            [$id],
        );
        return $rows[0] ?? null;
    }

    /**
     * The tenant's quota account, or null when it has none: the sum of its stripes (an
     * account is up to 64 rows, so that a tenant's transactions do not wait for each other).
     *
     * @return array{granted: int, available: int, reserved: int, spent: int}|null
     */
    public function account(string $quotaKey, ?string $tenant = null): ?array
    {
        $calls = $this->herald->calls();
        $rows = $this->rows(
            sprintf(
                'SELECT SUM(granted) AS granted, SUM(available) AS available, SUM(reserved) AS reserved,
                        SUM(spent) AS spent
                   FROM %s WHERE tenant_id = %s AND quota_key = ? GROUP BY tenant_id, quota_key',
                $calls->table('quota_accounts'),
                $calls->uuidParam(),
            ),
            [$this->tenant($tenant), $quotaKey],
        );
        return isset($rows[0]) ? array_map('intval', $rows[0]) : null;
    }

    /**
     * A delivery's ledger movements in order: e.g. `reserve`, then `commit` (sent) or
     * `release` (failed, cancelled).
     *
     * @return list<array{kind: string, amount: int, reservation_seq: int}>
     */
    public function journal(string $deliveryId): array
    {
        $calls = $this->herald->calls();
        return $this->rows(
            sprintf(
                'SELECT kind, amount, reservation_seq FROM %s WHERE delivery_id = %s ORDER BY id',
                $calls->table('quota_journal'),
                $calls->uuidParam(),
            ),
            [$deliveryId],
        );
    }

    public function receiptExists(string $scope, string $operationId): bool
    {
        $rows = $this->rows(
            sprintf('SELECT 1 AS found FROM %s WHERE scope = ? AND operation_id = ?', $this->herald->calls()->table('receipts')),
            [$scope, $operationId],
        );
        return $rows !== [];
    }

    /**
     * Waits for a running herald to bring the delivery to one of `$states` (read outside
     * any transaction, so call it after the commit), polling every 50 ms up to `$within`.
     *
     * @param list<string> $states
     */
    public function awaitState(string $deliveryId, array $states = ['sent'], float $within = 20.0): array
    {
        $within = min($within, self::WAIT_MAX_SECONDS);
        $deadline = microtime(true) + $within;
        do {
            $row = $this->delivery($deliveryId);
            if ($row !== null && in_array($row['state'], $states, true)) {
                return $row;
            }
            usleep(50_000);
        } while (microtime(true) < $deadline);
        throw new \RuntimeException(sprintf(
            'delivery %s is %s, not %s, after %.0f s: is `herald serve` running on this database?',
            $deliveryId,
            $row['state'] ?? 'missing',
            implode('|', $states),
            $within,
        ));
    }

    private function tenant(?string $tenant): string
    {
        return $tenant ?? $this->herald->defaultTenant()
            ?? throw new \InvalidArgumentException('no tenant: pass one or configure a default (herald.tenant)');
    }

    /** @return list<array<string, mixed>> */
    private function rows(string $sql, array $bindings): array
    {
        return array_map(self::typed(...), $this->herald->connection()->select($sql, $bindings));
    }

    private static function typed(array $row): array
    {
        foreach (['attempts', 'cost', 'amount', 'reservation_seq'] as $k) {
            if (array_key_exists($k, $row) && $row[$k] !== null) {
                $row[$k] = (int) $row[$k];
            }
        }
        return $row;
    }
}
