<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Exception\InvalidSubmission;
use Herald\Herald;
use Herald\SubmitStatus;
use Herald\Tests\Support\Env;
use Herald\Tests\Support\Expect;
use Herald\Tests\Support\SecondConnection;
use PDO;

/** The same calls on a plain PDO, for applications without Laravel. */
final class PdoTest extends TestCase
{
    private PDO $pdo;
    private Herald $plain;

    protected function setUp(): void
    {
        parent::setUp();
        $c = Env::connection();
        $dsn = Env::postgres()
            ? "pgsql:host={$c['host']};port={$c['port']};dbname={$c['database']}"
            : "mysql:host={$c['host']};port={$c['port']};dbname={$c['database']};charset=utf8mb4";
        $this->pdo = new PDO($dsn, $c['username'], $c['password'] === '' ? null : $c['password']);
        if (Env::postgres()) {
            $this->pdo->exec('SET search_path TO "' . $c['schema'] . '"');
        }
        $this->plain = Herald::pdo($this->pdo, schema: Env::heraldNamespace(), database: Env::heraldNamespace(), tenant: $this->tenant->id);
    }

    protected function herald(): Herald
    {
        return $this->plain;
    }

    public function testASubmitCommitsOrRollsBackWithThePdoTransaction(): void
    {
        $key = $this->unique('pdo');
        $marker = $this->unique('never');
        $this->pdo->beginTransaction();
        $rolledBack = $this->plain->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('pdo'), payload: ['marker' => $marker]);
        $this->assertSame(SubmitStatus::Created, $rolledBack->status);
        $this->assertHeraldClaimed($key, 'webhook');
        $this->pdo->rollBack();
        $this->assertHeraldNotClaimed($key, 'webhook');
        Expect::neverDelivered($marker, 'pdo-rollback');

        // Outside any transaction (autocommit) the call is its own, on both backends.
        $committed = $this->plain->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('pdo'), payload: '{"n":1}');
        $this->assertSame(SubmitStatus::Created, $committed->status);
        $this->assertNotSame($rolledBack->deliveryId, $committed->deliveryId);
        $this->assertFalse($this->pdo->inTransaction());
        $this->assertHeraldClaimed($key, 'webhook');
        Expect::deliveredOnce($committed->deliveryId, 'pdo-autocommit');
    }

    /**
     * What reaches the SQL API without the package's check (another language's driver): on
     * MariaDB, bytes that are not UTF-8 in a string parameter are answered invalid/not_utf8
     * and the transaction goes on. (PostgreSQL refuses such text while binding the
     * parameter, before any function runs: there only the client's check can help.)
     */
    public function testBytesThatAreNotUtf8NeverPoisonThePdoTransaction(): void
    {
        $order = $this->unique('raw');
        $this->pdo->beginTransaction();
        $this->pdo->exec("INSERT INTO orders (id, status) VALUES ('{$order}', 'before')");
        try {
            $this->plain->submit(operationKey: "{$order}\xE2\x82", channel: 'webhook', to: $this->receiver('pdo'), payload: '{}');
            $this->fail('expected InvalidSubmission');
        } catch (InvalidSubmission $e) {
            $this->assertSame(['operation_key', 'not_utf8'], [$e->field, $e->errorCode]);
        }
        if (Env::postgres()) {
            // PostgreSQL would refuse the bytes while binding them (22021), aborting the
            // transaction: the package's check is what keeps it usable.
            $this->pdo->exec("UPDATE orders SET status = 'after' WHERE id = '{$order}'");
            $this->pdo->commit();
            $this->assertSame('after', $this->pdo->query("SELECT status FROM orders WHERE id = '{$order}'")->fetchColumn());
            return;
        }
        $db = '`' . str_replace('`', '``', Env::heraldNamespace()) . '`';
        $call = $this->pdo->prepare("CALL {$db}.submit_v1(?, ?, 'webhook', ?, '{}', NULL, NULL, NULL, NULL, @status, @id, @field, @code)");
        $call->execute([$this->tenant->id, "{$order}\xE2\x82", $this->receiver('pdo')]);
        $call->closeCursor();
        $answer = $this->pdo->query('SELECT @status, @field, @code')->fetch(PDO::FETCH_NUM);
        $this->assertSame(['invalid', 'operation_key', 'not_utf8'], $answer);
        $receipt = $this->pdo->prepare("CALL {$db}.receipt_v1('invoices', ?, @status, @field, @code)");
        $receipt->execute(["evt-\xED\xA0\x80"]);
        $receipt->closeCursor();
        $answer = $this->pdo->query('SELECT @status, @field, @code')->fetch(PDO::FETCH_NUM);
        $this->assertSame(['invalid', 'operation_id', 'not_utf8'], $answer);
        $this->pdo->exec("UPDATE orders SET status = 'after' WHERE id = '{$order}'");
        $this->pdo->commit();
        $this->assertSame('after', $this->pdo->query("SELECT status FROM orders WHERE id = '{$order}'")->fetchColumn());
    }

    public function testOnceInsideAnOpenTransactionIsASavepoint(): void
    {
        $scope = $this->unique('pdo-once');
        $order = $this->unique('half');
        $this->pdo->beginTransaction();
        try {
            $this->plain->once($scope, 'evt-1', function () use ($order): void {
                $this->pdo->exec("INSERT INTO orders (id, status) VALUES ('{$order}', 'half')");
                throw new \RuntimeException('the operation failed half way');
            });
            $this->fail('once should rethrow');
        } catch (\RuntimeException) {
        }
        // The caller carries on and commits: the savepoint took the receipt and the half-write away.
        $this->pdo->commit();
        $this->assertNoHeraldReceipt($scope, 'evt-1');
        $this->assertSame(0, (int) $this->pdo->query("SELECT count(*) FROM orders WHERE id = '{$order}'")->fetchColumn());
        $this->assertTrue($this->plain->once($scope, 'evt-1', fn () => true)->applied);
        $this->assertFalse($this->plain->once($scope, 'evt-1', fn () => true)->applied);
        $this->assertHeraldReceipt($scope, 'evt-1');
    }

    public function testPdoTransactionsRetryARealDeadlock(): void
    {
        $this->pdo->exec('DELETE FROM inventory WHERE id IN (1, 2)');
        $this->pdo->exec('INSERT INTO inventory (id, stock) VALUES (1, 100), (2, 100)');
        $key = $this->unique('pdo-deadlock');
        $second = new SecondConnection();
        $runs = 0;
        try {
            $result = $this->plain->connection()->transaction(function () use (&$runs, $second, $key) {
                $runs++;
                if ($runs > 1) {
                    $second->finish();
                }
                $this->pdo->exec('UPDATE inventory SET stock = stock - 1 WHERE id = 1');
                $submitted = $this->plain->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('pdo'), payload: '{}');
                if ($runs === 1) {
                    $second->deadlockTheOtherSide();
                }
                $this->pdo->exec('UPDATE inventory SET stock = stock - 1 WHERE id = 2');
                return $submitted;
            }, 5);
        } finally {
            $second->close();
        }
        $this->assertSame(2, $runs);
        $this->assertSame(SubmitStatus::Created, $result->status);
        $this->assertHeraldClaimed($key, 'webhook');
        Expect::deliveredOnce($result->deliveryId, 'pdo-deadlock');
    }
}
