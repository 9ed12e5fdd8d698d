<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Tests\Support\Expect;
use Herald\Tests\Support\Worker;
use Illuminate\Support\Facades\DB;

/** Many PHP processes, a killed one, receipts across processes: what one process cannot show. */
final class ProcessesTest extends TestCase
{
    /** Seed 000's concurrency: processes submitting one (status, channel) at once. */
    private const PROCESSES = 16;

    public function testSixteenProcessesSubmittingOneStatusChangeMakeOneDeliveryAndOneReservation(): void
    {
        $key = $this->unique('ticket-17-status-ready');
        $workers = [];
        for ($i = 0; $i < self::PROCESSES; $i++) {
            $workers[] = new Worker('submit', [
                'wait_go' => true,
                'tenant' => $this->tenant->id,
                'operation_key' => $key,
                'to' => $this->receiver('seed-000'),
                'payload' => ['ticket' => 17, 'status' => 'ready'],
                'order' => "{$key}-{$i}",
            ]);
        }
        foreach ($workers as $w) {
            $w->awaitReady();
        }
        foreach ($workers as $w) {
            $w->go();
        }
        $statuses = [];
        $ids = [];
        foreach ($workers as $w) {
            $end = $w->finish();
            $this->assertSame([0, null], [$end['exit'], $end['signal']], $end['stderr']);
            $statuses[] = $end['result']['status'];
            $ids[] = $end['result']['delivery_id'];
        }
        sort($statuses);
        $this->assertSame(array_merge(['created'], array_fill(0, self::PROCESSES - 1, 'duplicate')), $statuses);
        $this->assertCount(1, array_unique($ids), 'every process got the one delivery');
        $delivery = $this->assertHeraldClaimed($key, 'webhook', $this->tenant->id);
        $this->assertSame($ids[0], $delivery['id']);
        // Each process's own change committed with its answer.
        $this->assertSame(self::PROCESSES, DB::table('orders')->where('id', 'like', "{$key}-%")->count());
        $account = $this->heraldInspector()->account('webhook', $this->tenant->id);
        $this->assertSame(99, $account['available'], 'one reservation: ' . json_encode($account));
        Expect::deliveredOnce($delivery['id'], 'seed-000-16-processes');
    }

    public function testAProcessSigkilledRightAfterItsCommitStillHasItsDeliverySent(): void
    {
        $key = $this->unique('killed-after-commit');
        $worker = new Worker('submit-then-sigkill', [
            'tenant' => $this->tenant->id,
            'operation_key' => $key,
            'to' => $this->receiver('sigkill'),
            'payload' => ['order' => $key],
            'order' => $key,
        ]);
        $end = $worker->finish();
        $this->assertSame(SIGKILL, $end['signal'], 'the worker must have died by SIGKILL: ' . json_encode($end));
        $this->assertSame('created', $end['result']['status']);
        $sent = $this->awaitHeraldDelivery($end['result']['delivery_id']);
        $this->assertSame(1, $sent['attempts']);
        $this->assertSame(1, DB::table('orders')->where('id', $key)->count());
        Expect::deliveredOnce($sent['id'], 'sigkill-after-commit');
    }

    public function testSeed001ThroughOnceAcrossProcessesAndAfterARestart(): void
    {
        $scope = $this->unique('invoice-events');
        $invoice = $this->unique('invoice-17');
        $events = [['evt-17', 10], ['evt-17', 10], ['evt-18', 5]];
        $applied = [];
        // One process per event: each a restart of the application, memory gone.
        foreach ($events as [$event, $units]) {
            $applied[] = Worker::run('once', ['scope' => $scope, 'event' => $event, 'invoice' => $invoice, 'units' => $units])['applied'];
        }
        $this->assertSame([true, false, true], $applied);
        $this->assertSame('15 2', Worker::run('ledger', ['scope' => $scope, 'invoices' => [$invoice]]));
        // The whole stream redelivered after the restart: nothing applies twice.
        foreach ($events as [$event, $units]) {
            $this->assertFalse(Worker::run('once', ['scope' => $scope, 'event' => $event, 'invoice' => $invoice, 'units' => $units])['applied']);
        }
        $this->assertSame('15 2', Worker::run('ledger', ['scope' => $scope, 'invoices' => [$invoice]]));
    }
}
