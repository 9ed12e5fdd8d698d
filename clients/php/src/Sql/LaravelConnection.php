<?php

declare(strict_types=1);

namespace Herald\Sql;

use Closure;
use Illuminate\Database\ConnectionInterface;

/**
 * A Laravel database connection as herald's SqlConnection, through the connection's own
 * query methods: a failed call is Laravel's QueryException (so `DB::transaction($fn,
 * $attempts)` sees a deadlock and re-runs the closure), queries are logged and listened
 * to like the application's, and `transaction` is Laravel's (a savepoint when nested).
 *
 * Given a closure, it asks it for the connection on every call, so a purged or reconnected
 * connection (`DB::purge`, Octane) is never held on to.
 */
final class LaravelConnection implements SqlConnection
{
    /** @var ConnectionInterface|Closure(): ConnectionInterface */
    private ConnectionInterface|Closure $connection;

    /** @param ConnectionInterface|Closure(): ConnectionInterface $connection */
    public function __construct(ConnectionInterface|Closure $connection)
    {
        $this->connection = $connection;
    }

    public function connection(): ConnectionInterface
    {
        $c = $this->connection;
        return $c instanceof Closure ? $c() : $c;
    }

    public function driver(): string
    {
        $connection = $this->connection();
        return method_exists($connection, 'getDriverName') ? (string) $connection->getDriverName() : '';
    }

    public function selectOne(string $sql, array $bindings = []): ?array
    {
        // useReadPdo: false — a submit writes, so it must never go to a read replica.
        $row = $this->connection()->selectOne($sql, $bindings, false);
        return $row === null ? null : (array) $row;
    }

    public function select(string $sql, array $bindings = []): array
    {
        return array_map(static fn ($row): array => (array) $row, $this->connection()->select($sql, $bindings, false));
    }

    public function statement(string $sql, array $bindings = []): void
    {
        $this->connection()->statement($sql, $bindings);
    }

    public function transaction(callable $fn, int $attempts = 1): mixed
    {
        return $this->connection()->transaction(Closure::fromCallable($fn), $attempts);
    }

    public function inTransaction(): bool
    {
        return $this->connection()->transactionLevel() > 0;
    }

    public function afterCommit(callable $fn): bool
    {
        $connection = $this->connection();
        if ($connection->transactionLevel() === 0) {
            $fn();
            return true;
        }
        // Laravel's transactions manager (8.18+) runs it after the outermost commit and
        // forgets it on a rollback, so a retried closure's failed attempt wakes nobody.
        if (!method_exists($connection, 'afterCommit')) {
            return false;
        }
        try {
            $connection->afterCommit(Closure::fromCallable($fn));
            return true;
        } catch (\RuntimeException) {
            return false; // "Transactions Manager has not been set": a connection outside an app
        }
    }
}
