<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Herald as Client;
use Herald\Laravel\Facades\Herald;
use Herald\SubmitStatus;
use Herald\Tests\Support\Env;
use Herald\Tests\Support\Expect;
use Herald\Wake;
use Illuminate\Support\Facades\DB;

/**
 * Wake-ups after the commit (MariaDB: one UDP datagram per running worker, read from
 * `wake_targets_v1` with the application's own rights). A UDP socket of the test's own,
 * written into herald's wake targets like a worker's, is the worker: it hears exactly what
 * a worker would. On PostgreSQL the commit's NOTIFY wakes the workers, and nothing is sent.
 */
final class WakeTest extends TestCase
{
    /** @var resource */
    private $socket;

    private string $worker;

    private string $token;

    protected function setUp(): void
    {
        parent::setUp();
        $socket = stream_socket_server('udp://127.0.0.1:0', $errno, $error, STREAM_SERVER_BIND);
        $this->assertNotFalse($socket, "a UDP socket: {$error}");
        stream_set_blocking($socket, false);
        $this->socket = $socket;
        $this->worker = $this->unique('php-test-worker');
        $this->token = bin2hex(random_bytes(16));
        $now = Env::postgres()
            ? '(extract(epoch FROM clock_timestamp()) * 1000)::bigint'
            : 'CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)';
        $this->herald()->connection()->statement(
            sprintf(
                'INSERT INTO %s (worker, address, token, seen_at) VALUES (?, ?, ?, %s)',
                $this->herald()->calls()->table('herald_wake_targets'),
                $now,
            ),
            [$this->worker, stream_socket_get_name($socket, false), $this->token],
        );
        Wake::forget(); // read the targets again, with this one
    }

    protected function tearDown(): void
    {
        $this->herald()->connection()->statement(
            sprintf('DELETE FROM %s WHERE worker = ?', $this->herald()->calls()->table('herald_wake_targets')),
            [$this->worker],
        );
        fclose($this->socket);
    }

    public function testACommittedSubmitWakesTheWorkersAfterTheCommitOnly(): void
    {
        $key = $this->unique('order-shipped');
        $before = DB::transaction(function () use ($key): array {
            $result = $this->submit($key);
            $this->assertSame(SubmitStatus::Created, $result->status);
            Expect::deliveredOnce($result->deliveryId, 'wake-after-commit');
            return $this->heard(0.2);
        });
        $this->assertSame([], $before, 'nothing is sent before the commit');
        if (Env::postgres()) {
            $this->assertSame([], $this->heard(0.3), "PostgreSQL's NOTIFY wakes the workers");
            return;
        }
        $this->assertSame([Wake::DATAGRAM_PREFIX . $this->token], $this->heard(5.0, stopAtFirst: true));
    }

    public function testARolledBackOrDuplicateSubmitWakesNobody(): void
    {
        $key = $this->unique('order-shipped');
        try {
            DB::transaction(function () use ($key): void {
                $this->submit($key);
                throw new \DomainException('the business change failed');
            });
        } catch (\DomainException) {
        }
        $this->assertSame([], $this->heard(0.3), 'a rolled-back submit wakes nobody');
        $result = $this->submit($key);
        $this->assertSame(SubmitStatus::Created, $result->status);
        Expect::deliveredOnce($result->deliveryId, 'wake-outside-a-transaction');
        $this->assertSame(Env::postgres() ? [] : [Wake::DATAGRAM_PREFIX . $this->token], $this->heard(Env::postgres() ? 0.3 : 5.0, stopAtFirst: true));
        Wake::forget();
        $this->assertSame(SubmitStatus::Duplicate, $this->submit($key)->status);
        $this->assertSame([], $this->heard(0.3), 'a duplicate wakes nobody');
    }

    public function testInsideThePackagesOwnTransactionOnPdoTheWakeComesAfterItsCommit(): void
    {
        $client = Client::pdo($this->db()->getPdo(), schema: Env::heraldNamespace(), database: Env::heraldNamespace());
        $key = $this->unique('invoice-sent');
        $before = $client->connection()->transaction(function () use ($client, $key): array {
            $result = $client->submit($key, 'webhook', $this->receiver('wake'), ['invoice' => 17], tenant: $this->tenant->id);
            Expect::deliveredOnce($result->deliveryId, 'wake-pdo-transaction');
            return $this->heard(0.2);
        });
        $this->assertSame([], $before, 'nothing is sent before the commit');
        $expected = Env::postgres() ? [] : [Wake::DATAGRAM_PREFIX . $this->token];
        $this->assertSame($expected, $this->heard(Env::postgres() ? 0.3 : 5.0, stopAtFirst: true));
    }

    private function submit(string $key): \Herald\SubmitResult
    {
        return Herald::submit(
            tenant: $this->tenant->id,
            operationKey: $key,
            channel: 'webhook',
            to: $this->receiver('wake'),
            payload: ['order' => $key],
        );
    }

    /** @return list<string> the datagrams heard within `$within` seconds */
    private function heard(float $within, bool $stopAtFirst = false): array
    {
        $heard = [];
        $until = microtime(true) + $within;
        while (($left = $until - microtime(true)) > 0) {
            $read = [$this->socket];
            $none = null;
            if (stream_select($read, $none, $none, 0, (int) ($left * 1e6)) === 0) {
                break;
            }
            $datagram = stream_socket_recvfrom($this->socket, 1024);
            if ($datagram !== false && $datagram !== '') {
                $heard[] = $datagram;
                if ($stopAtFirst) {
                    break;
                }
            }
        }
        return $heard;
    }
}
