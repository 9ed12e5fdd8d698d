<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Laravel\Facades\Herald;
use Herald\SubmitStatus;
use Herald\Tests\Support\Env;
use Herald\Tests\Support\Expect;
use Herald\Tests\Support\SecondConnection;
use Illuminate\Database\QueryException;
use Illuminate\Support\Facades\DB;

/**
 * Seed 004: `DB::transaction($fn, attempts: 5)` re-runs the whole closure on a deadlock.
 * A direct effect in it fires once per run; `Herald::submit` in it leaves one delivery,
 * sent once, because every run's claim rolled back with that run.
 */
final class DeadlockTest extends TestCase
{
    protected function setUp(): void
    {
        parent::setUp();
        DB::table('inventory')->whereIn('id', [1, 2])->delete();
        DB::table('inventory')->insert([['id' => 1, 'stock' => 100], ['id' => 2, 'stock' => 100]]);
    }

    public function testARetriedClosureSubmitsOnceWhileADirectEffectFiresOncePerRun(): void
    {
        $key = $this->unique('order-17-confirmation');
        $effects = Env::workDir() . '/' . $this->unique('effects') . '.log';
        $second = new SecondConnection();
        $runs = 0;
        $errors = [];
        try {
            $result = DB::transaction(function () use (&$runs, &$errors, $second, $key, $effects) {
                $runs++;
                // The control: an effect outside the database, like Mail::send in the seed.
                file_put_contents($effects, "confirmation email for {$key}\n", FILE_APPEND);
                if ($runs > 1) {
                    // The second session got its lock when this run rolled back: end it.
                    $errors[] = $second->finish();
                }
                DB::table('inventory')->where('id', 1)->decrement('stock');
                $submitted = Herald::submit(
                    tenant: $this->tenant->id,
                    operationKey: $key,
                    channel: 'webhook',
                    to: $this->receiver('seed-004'),
                    payload: ['order' => 17, 'run' => 'any'],
                );
                if ($runs === 1) {
                    $second->deadlockTheOtherSide();
                }
                DB::table('inventory')->where('id', 2)->decrement('stock');
                return $submitted;
            }, 5);
        } catch (QueryException $e) {
            $second->finish();
            $this->fail("the deadlock was not retried (closure ran {$runs} times): " . $e->getMessage());
        } finally {
            $second->close();
        }

        $this->assertSame(2, $runs, 'one deadlocked run, then one that committed');
        $this->assertSame([null], $errors, "the second session's update went through once this run let go");
        $this->assertSame($runs, count(file($effects)), 'the direct effect fired once per run');
        $this->assertSame(SubmitStatus::Created, $result->status, 'the first run\'s claim rolled back, so the second run created it');
        $delivery = $this->assertHeraldClaimed($key, 'webhook', $this->tenant->id);
        $this->assertSame($result->deliveryId, $delivery['id']);
        $this->assertSame(99, $this->heraldInspector()->account('webhook', $this->tenant->id)['available'], 'one reservation');
        $this->assertSame([99, 99], DB::table('inventory')->orderBy('id')->pluck('stock')->map(fn ($s) => (int) $s)->all());
        $this->awaitHeraldDelivery($result->deliveryId);
        Expect::deliveredOnce($result->deliveryId, 'seed-004-deadlock');
    }

    /**
     * A retry inside another transaction is no retry (seed 004): Laravel 8 rethrows the
     * nested deadlock as QueryException (no DeadlockException before Laravel 9) after one
     * run, and only the outermost `attempts` re-runs anything — the whole, claim included.
     */
    public function testANestedRetryIsDroppedAndTheOuterTransactionRetriesTheWhole(): void
    {
        $key = $this->unique('nested');
        $second = new SecondConnection();
        [$outer, $inner, $caught] = [0, 0, []];
        try {
            $result = DB::transaction(function () use (&$outer, &$inner, &$caught, $second, $key) {
                $outer++;
                if ($outer > 1) {
                    $second->finish();
                }
                try {
                    return DB::transaction(function () use (&$inner, $outer, $second, $key) {
                        $inner++;
                        DB::table('inventory')->where('id', 1)->decrement('stock');
                        $submitted = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('nested'), payload: '{}');
                        if ($outer === 1) {
                            $second->deadlockTheOtherSide();
                        }
                        DB::table('inventory')->where('id', 2)->decrement('stock');
                        return $submitted;
                    }, 5);
                } catch (\Throwable $e) {
                    $caught[] = get_class($e);
                    throw $e;
                }
            }, 3);
        } finally {
            $second->close();
        }
        $this->assertSame([2, 2], [$outer, $inner], "the inner closure's 5 attempts ran it once per outer run");
        $this->assertSame([QueryException::class], $caught);
        $this->assertSame(SubmitStatus::Created, $result->status);
        $this->assertHeraldClaimed($key, 'webhook', $this->tenant->id);
        Expect::deliveredOnce($result->deliveryId, 'seed-004-nested');
    }
}
