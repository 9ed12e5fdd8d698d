<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Exception\IdempotencyKeyReused;
use Herald\Exception\InvalidSubmission;
use Herald\Exception\QuotaExhausted;
use Herald\Laravel\Facades\Herald;
use Herald\SubmitStatus;
use Herald\Tests\Support\Expect;
use Illuminate\Support\Facades\DB;

/** `Herald::submit` inside `DB::transaction`: answers, never a poisoned transaction. */
final class SubmitTest extends TestCase
{
    protected function quotas(): array
    {
        return ['webhook' => 100, 'tight' => 1];
    }

    public function testACommittedSubmitIsClaimedOnceWithItsPayloadKeptByteForByte(): void
    {
        $key = $this->unique('order-shipped');
        // Key order, spacing and the number's digits are the sender's: kept as written.
        $payload = '{"order": 17,  "total": 10.50, "tags": ["a"]}';
        $result = DB::transaction(fn () => Herald::submit(
            tenant: $this->tenant->id,
            operationKey: $key,
            channel: 'webhook',
            to: $this->receiver('submit'),
            payload: $payload,
        ));
        $this->assertSame(SubmitStatus::Created, $result->status);
        $this->assertMatchesRegularExpression('/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/', $result->deliveryId);
        $delivery = $this->assertHeraldClaimed($key, 'webhook', $this->tenant->id);
        $this->assertSame($result->deliveryId, $delivery['id']);
        $this->assertSame($payload, $delivery['payload']);
        // One unit taken at the commit: reserved, or already spent if herald's worker has
        // sent it by now (it is woken by the commit, so that race is its to win).
        $account = $this->heraldInspector()->account('webhook', $this->tenant->id);
        $this->assertSame([100, 99], [$account['granted'], $account['available']], json_encode($account));
        $this->assertSame(1, $account['reserved'] + $account['spent'], json_encode($account));
        Expect::deliveredOnce($result->deliveryId, 'submit');

        // The same request again, an array this time (encoded once, same meaning): the same delivery.
        $again = Herald::submit(
            tenant: $this->tenant->id,
            operationKey: $key,
            channel: 'webhook',
            to: $this->receiver('submit'),
            payload: ['tags' => ['a'], 'total' => 10.5, 'order' => 17],
        );
        $this->assertSame([SubmitStatus::Duplicate, $result->deliveryId], [$again->status, $again->deliveryId]);
        // Another request under the key: refused, nothing changed.
        $reused = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('submit'), payload: ['order' => 18]);
        $this->assertSame([SubmitStatus::Reused, null], [$reused->status, $reused->deliveryId]);
        $this->expectException(IdempotencyKeyReused::class);
        $reused->orFail();
    }

    public function testACallersTraceparentIsKeptForTheAttemptsAndOnlyForItsOwnSubmit(): void
    {
        $traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
        $keys = ['traced' => $this->unique('traced'), 'after' => $this->unique('after'), 'bad' => $this->unique('bad')];
        $results = DB::transaction(function () use ($traceparent, $keys): array {
            $submit = fn (string $key, ?string $tp) => Herald::submit(
                tenant: $this->tenant->id,
                operationKey: $key,
                channel: 'webhook',
                to: $this->receiver('traced'),
                payload: ['key' => $key],
                traceparent: $tp,
            );
            return [
                'traced' => $submit($keys['traced'], $traceparent),
                // The next submit in the same transaction, without one, does not inherit it.
                'after' => $submit($keys['after'], null),
                // Not a traceparent (not even text): ignored, the submit goes on.
                'bad' => $submit($keys['bad'], "00-\xff\x00"),
            ];
        });
        $expected = ['traced' => $traceparent, 'after' => null, 'bad' => null];
        foreach ($results as $case => $result) {
            $this->assertSame(SubmitStatus::Created, $result->status, $case);
            $claimed = $this->assertHeraldClaimed($keys[$case], 'webhook', $this->tenant->id);
            $this->assertSame($expected[$case], $claimed['traceparent'], $case);
            Expect::deliveredOnce($result->deliveryId, "traceparent-{$case}");
        }
    }

    public function testARolledBackSubmitLeavesNoClaimAndIsNeverSent(): void
    {
        $key = $this->unique('rolled-back');
        $marker = $this->unique('never');
        try {
            DB::transaction(function () use ($key, $marker): void {
                DB::table('orders')->insert(['id' => $key, 'status' => 'shipped']);
                $r = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('rollback'), payload: ['marker' => $marker]);
                $this->assertSame(SubmitStatus::Created, $r->status);
                // Inside the transaction the claim is there (the test helper reads it on the same connection)...
                $this->assertHeraldClaimed($key, 'webhook', $this->tenant->id);
                throw new \DomainException('the business change failed');
            });
            $this->fail('the transaction should have thrown');
        } catch (\DomainException) {
        }
        // ...and the rollback took it away with the order.
        $this->assertHeraldNotClaimed($key, 'webhook', $this->tenant->id);
        $this->assertSame(0, DB::table('orders')->where('id', $key)->count());
        $this->assertSame(100, $this->heraldInspector()->account('webhook', $this->tenant->id)['available']);
        Expect::neverDelivered($marker, 'rollback');
    }

    public function testADuplicateAndAnInvalidSubmitLeaveTheTransactionUsable(): void
    {
        $key = $this->unique('usable');
        $first = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('usable'), payload: '{"n":1}');
        Expect::deliveredOnce($first->deliveryId, 'usable');
        $caught = [];
        DB::transaction(function () use ($key, &$caught): void {
            DB::table('orders')->insert(['id' => "{$key}-a", 'status' => 'before']);
            $dup = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('usable'), payload: '{"n":1}');
            $caught[] = $dup->status;
            foreach ([
                ['payload' => '{"n":', 'field' => 'payload', 'code' => 'syntax'],
                ['payload' => '{"a":1,"a":2}', 'field' => 'payload', 'code' => 'duplicate_key'],
                ['payload' => '{}', 'sendAt' => 'next tuesday', 'field' => 'send_at', 'code' => 'not_a_time'],
                ['payload' => '{}', 'cost' => -1, 'field' => 'cost', 'code' => 'out_of_range'],
                ['payload' => '{}', 'tenant' => 'not-a-uuid', 'field' => 'tenant', 'code' => 'not_a_uuid'],
                ['payload' => '{}', 'tenant' => '00000000-0000-7000-8000-000000000000', 'field' => 'tenant', 'code' => 'unknown_tenant'],
            ] as $case) {
                try {
                    Herald::submit(
                        tenant: $case['tenant'] ?? $this->tenant->id,
                        operationKey: $this->unique('bad'),
                        channel: 'webhook',
                        to: $this->receiver('usable'),
                        payload: $case['payload'],
                        cost: $case['cost'] ?? null,
                        sendAt: $case['sendAt'] ?? null,
                    );
                    $this->fail('expected InvalidSubmission for ' . json_encode($case));
                } catch (InvalidSubmission $e) {
                    $caught[] = "{$e->field}:{$e->errorCode}";
                }
            }
            // The transaction is still usable: this write and the one before it commit.
            DB::table('orders')->insert(['id' => "{$key}-b", 'status' => 'after']);
        });
        $this->assertSame(
            [SubmitStatus::Duplicate, 'payload:syntax', 'payload:duplicate_key', 'send_at:not_a_time', 'cost:out_of_range', 'tenant:not_a_uuid', 'tenant:unknown_tenant'],
            $caught,
        );
        $this->assertSame(2, DB::table('orders')->whereIn('id', ["{$key}-a", "{$key}-b"])->count());
        $this->assertCount(1, $this->heraldInspector()->deliveries($this->tenant->id));
    }

    /**
     * Issue 32: PDO's PostgreSQL driver cut "order-7\0-a" at NUL, so "order-7\0-b" answered
     * Duplicate of it; bytes that are not UTF-8 raised 22021 (PostgreSQL, aborting the
     * transaction) or 1366 (MariaDB). Every text field is checked before the call: NUL and
     * bytes that are not UTF-8 are InvalidSubmission, nothing is claimed, the caller's
     * transaction goes on and commits.
     */
    public function testNulAndBytesThatAreNotUtf8AreRefusedBeforeTheCall(): void
    {
        $key = $this->unique('bytes');
        $to = $this->receiver('bytes');
        $caught = [];
        DB::transaction(function () use ($key, $to, &$caught): void {
            DB::table('orders')->insert(['id' => "{$key}-a", 'status' => 'before']);
            foreach ([
                ['operationKey' => "{$key}\0-a"],
                ['operationKey' => "{$key}\0-b"],
                ['operationKey' => "{$key}\xE2\x82"],
                ['operationKey' => "{$key}\xED\xA0\x80"],
                ['operationKey' => "{$key}\u{202E}gpj.exe"],
                ['channel' => "webhook\0"],
                ['to' => "{$to}\0"],
                ['to' => "{$to}\xC0\x80"],
                ['quotaKey' => "webhook\0x"],
                ['payload' => "{\"a\":\"\xE2\x82\"}"],
                ['payload' => "{\"a\":\"\xED\xA0\x80\"}"],
                ['payload' => "{}\0{\"b\":1}"],
                ['tenant' => "\xFF"],
            ] as $case) {
                try {
                    Herald::submit(
                        tenant: $case['tenant'] ?? $this->tenant->id,
                        operationKey: $case['operationKey'] ?? "{$key}-ok",
                        channel: $case['channel'] ?? 'webhook',
                        to: $case['to'] ?? $to,
                        payload: $case['payload'] ?? '{}',
                        quotaKey: $case['quotaKey'] ?? null,
                    );
                    $this->fail('expected InvalidSubmission for ' . bin2hex(json_encode(array_keys($case))));
                } catch (InvalidSubmission $e) {
                    $caught[] = "{$e->field}:{$e->errorCode}";
                }
            }
            foreach ([["invoices", "evt\0-1"], ["invoices", "evt\0-2"], ["inv\xE2\x82", "evt-1"]] as [$scope, $id]) {
                try {
                    Herald::once($scope, $id, fn () => $this->fail('applied'));
                    $this->fail('expected InvalidSubmission');
                } catch (InvalidSubmission $e) {
                    $caught[] = "{$e->field}:{$e->errorCode}";
                }
            }
            DB::table('orders')->insert(['id' => "{$key}-b", 'status' => 'after']);
        });
        $this->assertSame([
            'operation_key:control_character', 'operation_key:control_character',
            'operation_key:not_utf8', 'operation_key:not_utf8', 'operation_key:control_character',
            'channel:control_character', 'to:control_character', 'to:not_utf8',
            'quota_key:control_character',
            'payload:not_utf8', 'payload:not_utf8', 'payload:control_character',
            'tenant:not_utf8',
            'operation_id:control_character', 'operation_id:control_character', 'scope:not_utf8',
        ], $caught);
        $this->assertSame(2, DB::table('orders')->whereIn('id', ["{$key}-a", "{$key}-b"])->count(), "the app's writes committed");
        $this->assertCount(0, $this->heraldInspector()->deliveries($this->tenant->id), 'nothing claimed');
        // A key with any UTF-8 is a key like another.
        $ok = Herald::submit(tenant: $this->tenant->id, operationKey: "{$key}-é-😀", channel: 'webhook', to: $to, payload: '{}');
        $this->assertSame(SubmitStatus::Created, $ok->status);
        Expect::deliveredOnce($ok->deliveryId, 'bytes');
    }

    public function testOutOfCreditThereIsNoClaimAndTheAppChoosesToCommitOrRollBack(): void
    {
        $paid = Herald::submit(tenant: $this->tenant->id, operationKey: $this->unique('paid'), channel: 'webhook', to: $this->receiver('quota'), payload: '{}', quotaKey: 'tight');
        $this->assertSame(SubmitStatus::Created, $paid->status);
        Expect::deliveredOnce($paid->deliveryId, 'quota-paid');

        // The app carries on without the email and commits its change.
        $key = $this->unique('unpaid-commit');
        $result = DB::transaction(function () use ($key) {
            DB::table('orders')->insert(['id' => $key, 'status' => 'ready']);
            return Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('quota'), payload: '{}', quotaKey: 'tight');
        });
        $this->assertSame([SubmitStatus::QuotaExhausted, null], [$result->status, $result->deliveryId]);
        $this->assertSame(1, DB::table('orders')->where('id', $key)->count(), "the app's change committed");
        $this->assertHeraldNotClaimed($key, 'webhook', $this->tenant->id);

        // The app prefers no change without the email: orFail() throws, the transaction rolls back.
        $key = $this->unique('unpaid-rollback');
        try {
            DB::transaction(function () use ($key): void {
                DB::table('orders')->insert(['id' => $key, 'status' => 'ready']);
                Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('quota'), payload: '{}', quotaKey: 'tight')->orFail();
            });
            $this->fail('orFail() should have thrown');
        } catch (QuotaExhausted $e) {
            $this->assertSame('tight', $e->quotaKey);
        }
        $this->assertSame(0, DB::table('orders')->where('id', $key)->count(), "the app's change rolled back");
        $this->assertHeraldNotClaimed($key, 'webhook', $this->tenant->id);
        $account = $this->heraldInspector()->account('tight', $this->tenant->id);
        $this->assertSame(1, $account['granted']);
        $this->assertSame(1, $account['reserved'] + $account['spent'], 'only the paid delivery holds credit');
    }

    public function testSendAtTakesADateTimeAndTheDeliveryWaitsForIt(): void
    {
        $key = $this->unique('later');
        $at = new \DateTimeImmutable('+1 day', new \DateTimeZone('Europe/Paris'));
        $result = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('later'), payload: '{}', sendAt: $at, maxAttempts: 3);
        $this->assertSame(SubmitStatus::Created, $result->status);
        // The same instant written as RFC 3339 text in UTC is the same request.
        $again = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('later'), payload: '{}', sendAt: \Herald\Herald::sendAtText($at), maxAttempts: 3);
        $this->assertSame(SubmitStatus::Duplicate, $again->status);
        $delivery = $this->heraldInspector()->delivery($result->deliveryId);
        $this->assertSame('pending', $delivery['state']);
        // Not left for the driver's drain: cancelled through the HTTP API (releases its credit).
        $client = new \Herald\Http\HttpClient(\Herald\Tests\Support\Env::heraldUrl(), $this->tenant->apiKey);
        $this->assertSame('cancelled', $client->cancel($result->deliveryId)['state']);
    }

    public function testTheFingerprintComputedHereIsTheOneHeraldChecksBeforeTheSend(): void
    {
        $key = $this->unique('client-print');
        // A nested payload of about 4 KiB and a send_at with an offset and microseconds: the
        // request herald's worker recomputes before the send.
        $payload = ['order' => 17, 'lines' => array_map(
            static fn (int $i): array => ['sku' => "sku-{$i}", 'qty' => $i, 'price' => 1.5 + $i, 'note' => str_repeat('é', 20)],
            range(1, 40),
        )];
        $sendAt = (new \DateTimeImmutable('-1 second'))->setTimezone(new \DateTimeZone('+02:00'))->format('Y-m-d\TH:i:s.uP');
        $result = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('client-print'), payload: $payload, sendAt: $sendAt);
        $this->assertSame(SubmitStatus::Created, $result->status);
        $this->assertSame(3, $this->fingerprintVersion($result->deliveryId), 'computed here, compared by v2');
        Expect::deliveredOnce($result->deliveryId, 'client-print');

        // The same request over HTTP (the shared max_attempts, 8 here) is the same delivery.
        $http = (new \Herald\Http\HttpClient(\Herald\Tests\Support\Env::heraldUrl(), $this->tenant->apiKey))
            ->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('client-print'), payload: $payload, sendAt: $sendAt);
        $this->assertSame([SubmitStatus::Duplicate, $result->deliveryId], [$http->status, $http->deliveryId]);

        // With max_attempts left to herald's shared setting, the database computes it (v1),
        // and the two are one request.
        $shared = \Herald\Herald::laravel(
            fn () => $this->db(),
            schema: (string) config('herald.schema'),
            database: (string) config('herald.database'),
            maxAttempts: null,
        );
        $again = $shared->submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('client-print'), payload: $payload, sendAt: $sendAt);
        $this->assertSame([SubmitStatus::Duplicate, $result->deliveryId], [$again->status, $again->deliveryId]);
        $other = $shared->submit(tenant: $this->tenant->id, operationKey: $this->unique('shared'), channel: 'webhook', to: $this->receiver('client-print'), payload: '{}');
        $this->assertNotSame(3, $this->fingerprintVersion($other->deliveryId), 'computed in SQL');
        Expect::deliveredOnce($other->deliveryId, 'client-print');
    }

    private function fingerprintVersion(string $deliveryId): int
    {
        $calls = $this->herald()->calls();
        $row = $this->db()->selectOne(
            sprintf('SELECT fingerprint_version AS v FROM %s WHERE id = %s', $calls->table('deliveries'), $calls->uuidParam()),
            [$deliveryId],
        );
        return (int) $row->v;
    }
}
