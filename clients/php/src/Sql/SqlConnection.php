<?php

declare(strict_types=1);

namespace Herald\Sql;

/**
 * The application's own database connection, as herald's calls need it: a statement, a
 * one-row select, and the application's transactions. Two implementations: a PDO
 * (PdoConnection) and a Laravel connection (LaravelConnection), whose errors stay
 * Laravel's (QueryException), so `DB::transaction($fn, $attempts)` retries a deadlock.
 */
interface SqlConnection
{
    /** PDO's driver name: `pgsql` or `mysql` (MariaDB). */
    public function driver(): string;

    /**
     * The first row of `$sql` as an array keyed by column name, null when there is none.
     * Runs on the connection that writes (never a read replica).
     *
     * @param list<string|int|null> $bindings
     * @return array<string, mixed>|null
     */
    public function selectOne(string $sql, array $bindings = []): ?array;

    /**
     * Every row of `$sql`, on the connection that writes.
     *
     * @param list<string|int|null> $bindings
     * @return list<array<string, mixed>>
     */
    public function select(string $sql, array $bindings = []): array;

    /** @param list<string|int|null> $bindings */
    public function statement(string $sql, array $bindings = []): void;

    /**
     * Runs `$fn` in a transaction: a new one (re-run up to `$attempts` times on a
     * concurrency error: deadlock, serialization failure, lock wait timeout), or a
     * savepoint inside the one that is open (no attempts of its own: the outer
     * transaction's loop retries the whole).
     */
    public function transaction(callable $fn, int $attempts = 1): mixed;

    /** A transaction is open on this connection. */
    public function inTransaction(): bool;

    /**
     * Runs `$fn` once the current transaction commits (never if it rolls back), or now
     * when none is open; false when it cannot know of the commit (a transaction begun on
     * the PDO handle directly, not through this connection): the caller then does it after
     * its own commit.
     */
    public function afterCommit(callable $fn): bool;
}
