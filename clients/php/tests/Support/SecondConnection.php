<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

/**
 * Another session on the application's database, through the drivers' native extensions
 * (pgsql, mysqli) because they can send a query without waiting for it: the second half
 * of a real deadlock with the Laravel connection, which PDO alone cannot be.
 */
final class SecondConnection
{
    /** @var \PgSql\Connection|\mysqli */
    private $conn;
    private bool $pending = false;

    public function __construct()
    {
        $c = Env::connection();
        if (Env::postgres()) {
            $dsn = sprintf('host=%s port=%s dbname=%s user=%s', $c['host'], $c['port'], $c['database'], $c['username']);
            if ($c['password'] !== '') {
                $dsn .= ' password=' . $c['password'];
            }
            $conn = pg_connect($dsn, PGSQL_CONNECT_FORCE_NEW);
            if ($conn === false) {
                throw new \RuntimeException('the second connection failed');
            }
            $this->conn = $conn;
            $this->exec('SET search_path TO "' . str_replace('"', '""', $c['schema']) . '"');
        } else {
            mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
            $this->conn = new \mysqli($c['host'], $c['username'], $c['password'], $c['database'], (int) $c['port']);
        }
    }

    /**
     * Makes the application's running transaction, which holds inventory row 1, deadlock
     * on its next write of row 2: this session takes row 2, then asks for row 1 without
     * waiting for the answer. The application's transaction is made the victim: on
     * MariaDB this session has written more rows (InnoDB rolls back the lighter
     * transaction); on PostgreSQL it starts waiting later, within the deadlock_timeout
     * (the first waiter's check runs first, and the session that runs it is cancelled).
     */
    public function deadlockTheOtherSide(): void
    {
        $this->begin();
        if (!Env::postgres()) {
            $this->weighDown(200);
        }
        $this->update(2);
        $this->updateAsync(1, Env::postgres() ? 0.3 * $this->deadlockTimeoutSeconds() : 0.0);
    }

    public function begin(): void
    {
        $this->exec(Env::postgres() ? 'BEGIN' : 'START TRANSACTION');
    }

    /**
     * Writes rows that make this transaction the heavier one: InnoDB's deadlock detector
     * rolls back the transaction that changed fewer rows, and the test wants that to be
     * the application's (PostgreSQL picks whoever's deadlock_timeout expires first).
     */
    public function weighDown(int $rows): void
    {
        $this->exec('INSERT INTO scratch (n) VALUES ' . implode(', ', array_map(static fn ($i) => "({$i})", range(1, $rows))));
    }

    public function update(int $id): void
    {
        $this->exec("UPDATE inventory SET stock = stock - 1 WHERE id = {$id}");
    }

    /** Sends the update without waiting for it, after `$delaySeconds` (PostgreSQL only). */
    public function updateAsync(int $id, float $delaySeconds = 0.0): void
    {
        $sql = "UPDATE inventory SET stock = stock - 1 WHERE id = {$id}";
        if (Env::postgres()) {
            $sql = ($delaySeconds > 0 ? sprintf('SELECT pg_sleep(%.3F); ', $delaySeconds) : '') . $sql;
            if (!pg_send_query($this->conn, $sql)) {
                throw new \RuntimeException('pg_send_query failed: ' . pg_last_error($this->conn));
            }
        } else {
            $this->conn->query($sql, MYSQLI_ASYNC);
        }
        $this->pending = true;
    }

    /**
     * Waits for the sent update (it ran once the other side's locks were gone, or lost the
     * deadlock itself: both are fine here), then rolls back. Returns the update's error, if any.
     */
    public function finish(): ?string
    {
        $error = null;
        if ($this->pending) {
            $this->pending = false;
            if (Env::postgres()) {
                while (($result = pg_get_result($this->conn)) !== false) {
                    $error ??= pg_result_error($result) ?: null;
                }
            } else {
                try {
                    $this->conn->reap_async_query();
                } catch (\mysqli_sql_exception $e) {
                    $error = $e->getMessage();
                }
            }
        }
        $this->exec('ROLLBACK');
        return $error;
    }

    /** PostgreSQL's deadlock_timeout: how long a waiter waits before looking for a cycle. */
    private function deadlockTimeoutSeconds(): float
    {
        $result = pg_query($this->conn, "SELECT setting::int FROM pg_settings WHERE name = 'deadlock_timeout'");
        return ((int) pg_fetch_result($result, 0, 0)) / 1000;
    }

    public function close(): void
    {
        Env::postgres() ? pg_close($this->conn) : $this->conn->close();
    }

    private function exec(string $sql): void
    {
        if (Env::postgres()) {
            if (@pg_query($this->conn, $sql) === false) {
                throw new \RuntimeException("{$sql}: " . pg_last_error($this->conn));
            }
        } else {
            $this->conn->query($sql);
        }
    }
}
