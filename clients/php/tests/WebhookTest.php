<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Exception\WebhookVerificationFailed;
use Herald\Laravel\Facades\Herald;
use Herald\Tests\Support\PhpServer;
use Herald\Webhook\Signature;
use Herald\Webhook\WebhookMessage;
use Herald\Webhook\WebhookReceiver;
use Illuminate\Support\Facades\DB;

/** The receiving half: signatures verified, a handler run once per webhook-id. */
final class WebhookTest extends TestCase
{
    protected function quotas(): array
    {
        return ['webhook' => 100, 'terminal' => 1];
    }

    public function testTheStandardWebhooksExampleVerifiesAndTamperingDoesNot(): void
    {
        // The example published with the Standard Webhooks specification.
        $secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
        $id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
        $ts = 1614265330;
        $body = '{"test": 2432232314}';
        $this->assertSame('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=', Signature::sign($secret, $id, $ts, $body));
        $headers = ['Webhook-Id' => $id, 'webhook-timestamp' => (string) $ts, 'WEBHOOK-SIGNATURE' => 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='];
        $receiver = fn (array|string $secrets, int $now) => new WebhookReceiver($this->herald(), $secrets, clock: fn () => $now);
        $message = $receiver($secret, $ts)->verify($headers, $body);
        $this->assertSame([$id, $ts, $body], [$message->id, $message->timestamp, $message->body]);
        // Also from PHP's $_SERVER, and with the signature second of several (a rotation).
        $server = ['HTTP_WEBHOOK_ID' => $id, 'HTTP_WEBHOOK_TIMESTAMP' => (string) $ts, 'HTTP_WEBHOOK_SIGNATURE' => 'v1,AAAA v2,x ' . $headers['WEBHOOK-SIGNATURE']];
        $this->assertSame($id, $receiver($secret, $ts + 300)->verify($server, $body)->id);
        // The receiver's previous secret still verifies during its rotation.
        $this->assertSame($id, $receiver(['whsec_c2Vjb25kIHNlY3JldCBrZXkgMTIzNA==', $secret], $ts)->verify($headers, $body)->id);

        $refusals = [
            'no_matching_signature' => fn () => $receiver($secret, $ts)->verify($headers, '{"test": 2432232315}'),
            'stale_timestamp' => fn () => $receiver($secret, $ts + 301)->verify($headers, $body),
            'missing_header' => fn () => $receiver($secret, $ts)->verify(['webhook-id' => $id], $body),
            'bad_timestamp' => fn () => $receiver($secret, $ts)->verify(['webhook-timestamp' => 'soon'] + $headers, $body),
            'bad_secret' => fn () => $receiver('whsec_!!', $ts)->verify($headers, $body),
        ];
        foreach ($refusals as $reason => $verify) {
            try {
                $verify();
                $this->fail("expected {$reason}");
            } catch (WebhookVerificationFailed $e) {
                $this->assertSame($reason, $e->reason, $e->getMessage());
            }
        }
    }

    public function testTheSameWebhookGivenTwiceRunsItsHandlerOnceAndAFailedHandlerRunsAgain(): void
    {
        $receiver = new WebhookReceiver($this->herald(), $this->tenant->secret, scope: $this->unique('hooks'));
        $id = $this->unique('msg');
        $body = '{"invoice": 17, "units": 10}';
        $headers = ['webhook-id' => $id, 'webhook-timestamp' => (string) time(), 'webhook-signature' => Signature::sign($this->tenant->secret, $id, time(), $body)];
        $handler = function (WebhookMessage $m): string {
            DB::table('receiver_effects')->insert(['webhook_id' => $m->id, 'body' => $m->body]);
            return 'applied ' . $m->json()['units'];
        };

        // The first delivery's handler throws: its writes and the receipt roll back together...
        try {
            $receiver->handle($headers, $body, function (WebhookMessage $m) use ($handler): void {
                $handler($m);
                throw new \RuntimeException('the handler failed half way');
            });
            $this->fail('the handler should have thrown');
        } catch (\RuntimeException) {
        }
        $this->assertSame(0, DB::table('receiver_effects')->where('webhook_id', $id)->count());
        // ...so the resend applies it, and every resend after that is skipped.
        $first = $receiver->handle($headers, $body, $handler);
        $second = $receiver->handle($headers, $body, $handler);
        $this->assertSame([true, 'applied 10'], [$first->applied, $first->value]);
        $this->assertSame([false, null], [$second->applied, $second->value]);
        $this->assertSame(1, DB::table('receiver_effects')->where('webhook_id', $id)->count());
    }

    public function testHeraldResendsALostAnswerWithTheSameIdAndTheReceiverAppliesItOnce(): void
    {
        $result = Herald::submit(
            tenant: $this->tenant->id,
            operationKey: $this->unique('invoice-paid'),
            channel: 'webhook',
            to: PhpServer::url() . "/receive/{$this->tenant->id}/lost-ack",
            payload: ['invoice' => 17, 'units' => 10],
        );
        $sent = $this->awaitHeraldDelivery($result->deliveryId);
        $this->assertSame(2, $sent['attempts'], 'the first answer was lost, the second attempt was answered');
        $requests = DB::table('receiver_requests')->where('webhook_id', $result->deliveryId)->count();
        $this->assertSame(2, $requests, 'the receiver was given the same webhook twice');
        $effects = DB::table('receiver_effects')->where('webhook_id', $result->deliveryId)->pluck('body')->all();
        $this->assertSame(['{"invoice":17,"units":10}'], $effects, 'and ran its handler once');
    }

    public function testATerminalRefusalFailsTheDeliveryAndGivesTheCreditBack(): void
    {
        $result = Herald::submit(
            tenant: $this->tenant->id,
            operationKey: $this->unique('refused'),
            channel: 'webhook',
            to: PhpServer::url() . "/receive/{$this->tenant->id}/terminal",
            payload: '{}',
            quotaKey: 'terminal',
        );
        // Reserved at the commit, or already given back if herald's worker was that quick.
        $account = $this->heraldInspector()->account('terminal', $this->tenant->id);
        $this->assertSame([1, 0, 1], [$account['granted'], $account['spent'], $account['available'] + $account['reserved']], json_encode($account));
        $failed = $this->awaitHeraldDelivery($result->deliveryId, ['failed', 'sent']);
        $this->assertSame(['failed', 1], [$failed['state'], $failed['attempts']], 'a 422 is terminal: one attempt, no retry');
        $this->assertSame(['granted' => 1, 'available' => 1, 'reserved' => 0, 'spent' => 0], $this->heraldInspector()->account('terminal', $this->tenant->id));
        $this->assertSame(['reserve', 'release'], array_column($this->heraldInspector()->journal($result->deliveryId), 'kind'));
    }
}
