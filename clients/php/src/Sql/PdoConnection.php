<?php

declare(strict_types=1);

namespace Herald\Sql;

use PDO;
use PDOException;
use Throwable;

/**
 * A PDO as herald's SqlConnection. Errors are PDO's own PDOException (ERRMODE_EXCEPTION is
 * set); `transaction` re-runs its function on the concurrency errors the database raises:
 * SQLSTATE 40001 (serialization failure), 40P01 (PostgreSQL deadlock), MySQL 1213
 * (deadlock) and 1205 (lock wait timeout, after an explicit rollback: MariaDB rolls back
 * only the statement).
 */
final class PdoConnection implements SqlConnection
{
    /** Most statements kept prepared: herald's calls are a handful of texts. */
    private const PREPARED_MAX = 32;

    private int $savepoints = 0;

    /**
     * herald's statements, each prepared once per connection: preparing again for every
     * call costs the server a parse and the driver round trips (PostgreSQL: Parse, then
     * DEALLOCATE), 0.3 of a submit's 0.9 ms measured serially (docs/perf.md).
     *
     * @var array<string, \PDOStatement>
     */
    private array $prepared = [];

    /** Whether the open transaction was begun by `transaction()` (its commit is known here). */
    private bool $own = false;

    /** @var list<callable> run after the own transaction commits */
    private array $afterCommit = [];

    public function __construct(private readonly PDO $pdo)
    {
        $pdo->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
    }

    public function pdo(): PDO
    {
        return $this->pdo;
    }

    public function driver(): string
    {
        return (string) $this->pdo->getAttribute(PDO::ATTR_DRIVER_NAME);
    }

    public function selectOne(string $sql, array $bindings = []): ?array
    {
        $statement = $this->run($sql, $bindings);
        $row = $statement->fetch(PDO::FETCH_ASSOC);
        $statement->closeCursor();
        return $row === false ? null : $row;
    }

    public function select(string $sql, array $bindings = []): array
    {
        $statement = $this->run($sql, $bindings);
        $rows = $statement->fetchAll(PDO::FETCH_ASSOC);
        $statement->closeCursor();
        return $rows;
    }

    public function statement(string $sql, array $bindings = []): void
    {
        $this->run($sql, $bindings)->closeCursor();
    }

    public function inTransaction(): bool
    {
        return $this->pdo->inTransaction();
    }

    public function transaction(callable $fn, int $attempts = 1): mixed
    {
        if ($attempts < 1) {
            throw new \InvalidArgumentException('attempts must be at least 1');
        }
        if ($this->pdo->inTransaction()) {
            return $this->savepoint($fn);
        }
        for ($attempt = 1; ; $attempt++) {
            $this->pdo->beginTransaction();
            $this->own = true;
            try {
                $result = $fn();
                $this->pdo->commit();
            } catch (Throwable $e) {
                $this->own = false;
                $this->afterCommit = [];
                $this->rollBackQuietly();
                if ($attempt < $attempts && self::isConcurrencyError($e)) {
                    continue;
                }
                throw $e;
            }
            $this->own = false;
            $this->runAfterCommit();
            return $result;
        }
    }

    public function afterCommit(callable $fn): bool
    {
        if (!$this->pdo->inTransaction()) {
            $fn();
            return true;
        }
        if (!$this->own) {
            return false;
        }
        $this->afterCommit[] = $fn;
        return true;
    }

    private function runAfterCommit(): void
    {
        [$callbacks, $this->afterCommit] = [$this->afterCommit, []];
        foreach ($callbacks as $callback) {
            $callback();
        }
    }

    /** A deadlock, a serialization failure or a lock wait timeout, by code (never by message). */
    public static function isConcurrencyError(Throwable $e): bool
    {
        for (; $e !== null; $e = $e->getPrevious()) {
            if (!$e instanceof PDOException) {
                continue;
            }
            $state = $e->errorInfo[0] ?? (is_string($e->getCode()) ? $e->getCode() : null);
            $driverCode = $e->errorInfo[1] ?? null;
            if ($state === '40001' || $state === '40P01') {
                return true;
            }
            // MySQL/MariaDB error numbers (PostgreSQL's errorInfo[1] is a small result status).
            if (in_array($driverCode, [1213, 1205], true)) {
                return true;
            }
        }
        return false;
    }

    private function savepoint(callable $fn): mixed
    {
        $name = 'herald_' . (++$this->savepoints);
        $this->pdo->exec("SAVEPOINT {$name}");
        try {
            $result = $fn();
        } catch (Throwable $e) {
            // A concurrency error has rolled back (or aborted) the whole transaction: it is
            // the outer loop's to retry, and there is no savepoint left to go back to.
            if (!self::isConcurrencyError($e)) {
                $this->pdo->exec("ROLLBACK TO SAVEPOINT {$name}");
            }
            throw $e;
        } finally {
            $this->savepoints--;
        }
        $this->pdo->exec("RELEASE SAVEPOINT {$name}");
        return $result;
    }

    private function rollBackQuietly(): void
    {
        try {
            if ($this->pdo->inTransaction()) {
                $this->pdo->rollBack();
            }
        } catch (PDOException) {
            // The server ended the transaction itself (a deadlock on MariaDB): nothing to undo.
        }
    }

    /** @param list<string|int|null> $bindings */
    private function run(string $sql, array $bindings): \PDOStatement
    {
        $statement = $this->prepared[$sql] ?? null;
        if ($statement === null) {
            if (count($this->prepared) >= self::PREPARED_MAX) {
                array_shift($this->prepared);
            }
            $statement = $this->prepared[$sql] = $this->pdo->prepare($sql);
        }
        foreach (array_values($bindings) as $i => $value) {
            $type = match (true) {
                $value === null => PDO::PARAM_NULL,
                is_int($value) => PDO::PARAM_INT,
                default => PDO::PARAM_STR,
            };
            $statement->bindValue($i + 1, $value, $type);
        }
        $statement->execute();
        return $statement;
    }
}
