<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Exception\HttpError;
use Herald\Exception\InvalidSubmission;
use Herald\Exception\Unavailable;
use Herald\Http\HttpClient;
use Herald\Laravel\Facades\Herald;
use Herald\SubmitStatus;
use Herald\Tests\Support\Env;
use Herald\Tests\Support\Expect;
use Herald\Tests\Support\PhpServer;

/** The HTTP client against the running `herald serve`: one request identity with the SQL API. */
final class HttpClientTest extends TestCase
{
    private function client(?string $url = null, ?\Closure $sleep = null): HttpClient
    {
        return new HttpClient($url ?? Env::heraldUrl(), $this->tenant->apiKey, sleep: $sleep ?? static function (float $s): void {
        });
    }

    public function testARequestSubmittedThroughSqlAndAgainOverHttpIsOneDelivery(): void
    {
        $key = $this->unique('sql-then-http');
        $payload = '{"order": 17, "amount": 1.10}';
        $sql = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('http'), payload: $payload);
        $this->assertSame(SubmitStatus::Created, $sql->status);
        Expect::deliveredOnce($sql->deliveryId, 'sql-then-http');

        $http = $this->client()->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('http'), payload: $payload);
        $this->assertSame([SubmitStatus::Duplicate, $sql->deliveryId], [$http->status, $http->deliveryId]);
        $changed = $this->client()->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('http'), payload: '{"order": 18}');
        $this->assertSame([SubmitStatus::Reused, null], [$changed->status, $changed->deliveryId]);

        // And the other way round.
        $key = $this->unique('http-then-sql');
        $http = $this->client()->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('http'), payload: ['order' => 19]);
        $this->assertSame(SubmitStatus::Created, $http->status);
        Expect::deliveredOnce($http->deliveryId, 'http-then-sql');
        $sql = Herald::submit(tenant: $this->tenant->id, operationKey: $key, channel: 'webhook', to: $this->receiver('http'), payload: '{"order":19}');
        $this->assertSame([SubmitStatus::Duplicate, $http->deliveryId], [$sql->status, $sql->deliveryId]);
        $this->assertSame($http->deliveryId, $this->client()->delivery($http->deliveryId)['id']);
    }

    public function testHerald_sErrorsAreTypedAnswersOrExceptions(): void
    {
        $exhausted = $this->client()->submit(operationKey: $this->unique('no-account'), channel: 'webhook', to: $this->receiver('http'), payload: '{}', quotaKey: 'no-such-account');
        $this->assertSame([SubmitStatus::QuotaExhausted, false], [$exhausted->status, $exhausted->accepted()]);
        try {
            $this->client()->submit(operationKey: $this->unique('bad'), channel: 'webhook', to: $this->receiver('http'), payload: '{"a":');
            $this->fail('expected InvalidSubmission');
        } catch (InvalidSubmission $e) {
            // The field and the reason, as the SQL API names them.
            // Text that is not JSON makes the whole body malformed: no one field to name.
            $this->assertSame([null, 'invalid_request'], [$e->field, $e->errorCode]);
        }
        try {
            $this->client()->submit(operationKey: $this->unique('bad'), channel: 'webhook', to: $this->receiver('http'), payload: '{"a":1,"a":2}');
            $this->fail('expected InvalidSubmission');
        } catch (InvalidSubmission $e) {
            $this->assertSame(['payload', 'duplicate_key'], [$e->field, $e->errorCode]);
        }
        try {
            $this->client()->submit(operationKey: $this->unique('bad'), channel: 'webhook', to: $this->receiver('http'), payload: '{}', maxAttempts: 0);
            $this->fail('expected InvalidSubmission');
        } catch (InvalidSubmission $e) {
            $this->assertSame(['max_attempts', 'out_of_range'], [$e->field, $e->errorCode]);
        }
        // NUL and bytes that are not UTF-8 never leave PHP.
        foreach (["k\0-a" => 'control_character', "k\xE2\x82" => 'not_utf8'] as $key => $code) {
            try {
                $this->client()->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('http'), payload: '{}');
                $this->fail('expected InvalidSubmission');
            } catch (InvalidSubmission $e) {
                $this->assertSame(['operation_key', $code], [$e->field, $e->errorCode]);
            }
        }
        // A key beyond ASCII goes in the body (a header holds visible ASCII only).
        $utf8 = $this->client()->submit(operationKey: $this->unique('clé-😀'), channel: 'webhook', to: $this->receiver('http'), payload: '{}');
        $this->assertSame(SubmitStatus::Created, $utf8->status);
        Expect::deliveredOnce($utf8->deliveryId, 'http');
        try {
            (new HttpClient(Env::heraldUrl(), 'hk_not_a_key'))->submit(operationKey: 'k', channel: 'webhook', to: $this->receiver('http'), payload: '{}');
            $this->fail('expected HttpError 401');
        } catch (HttpError $e) {
            $this->assertSame(401, $e->status);
        }
        try {
            $this->client()->delivery('01a232f6-73d6-7c93-b75e-70f30b775515');
            $this->fail('expected HttpError 404');
        } catch (HttpError $e) {
            $this->assertSame([404, 'not_found'], [$e->status, $e->errorCode]);
        }
    }

    public function testATraceparentThatIsNotOneNeverFailsTheSubmit(): void
    {
        // Sent as a header only when printable (a header cannot carry the rest); herald
        // ignores one it cannot read. The header itself: crates/herald-cli/tests/it/traces.rs.
        foreach (['not-printable' => "00-\xff\x00", 'not-a-traceparent' => 'hello'] as $case => $tp) {
            $key = $this->unique("http-{$case}");
            $result = $this->client()->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('http'), payload: ['case' => $case], traceparent: $tp);
            $this->assertSame(SubmitStatus::Created, $result->status, $case);
            Expect::deliveredOnce($result->deliveryId, "http-traceparent-{$case}");
        }
    }

    public function testALostAnswerIsResentWithTheSameKeyAndFindsTheDeliveryItMade(): void
    {
        $key = $this->unique('lost-answer');
        $waits = [];
        // A proxy that forwards to herald and loses the first answer: herald committed it.
        $client = $this->client(PhpServer::url() . '/proxy-lossy', function (float $s) use (&$waits): void {
            $waits[] = $s;
        });
        $result = $client->submit(operationKey: $key, channel: 'webhook', to: $this->receiver('http'), payload: '{"n":1}');
        $this->assertSame(SubmitStatus::Duplicate, $result->status, 'the resend learns that the first send was recorded');
        $this->assertCount(1, $waits, 'one resend, after a pause');
        $delivery = $this->assertHeraldClaimed($key, 'webhook', $this->tenant->id);
        $this->assertSame($delivery['id'], $result->deliveryId);
        Expect::deliveredOnce($result->deliveryId, 'http-outcome-unknown');
    }

    public function testNoServerIsUnavailableAfterABoundedNumberOfSends(): void
    {
        $probe = stream_socket_server('tcp://127.0.0.1:0');
        $address = stream_socket_get_name($probe, false);
        fclose($probe); // nothing listens there now
        $waits = [];
        $client = new HttpClient("http://{$address}", $this->tenant->apiKey, sendsMax: 3, backoffSeconds: 0.1, sleep: function (float $s) use (&$waits): void {
            $waits[] = $s;
        });
        try {
            $client->submit(operationKey: 'k', channel: 'webhook', to: $this->receiver('http'), payload: '{}');
            $this->fail('expected Unavailable');
        } catch (Unavailable $e) {
            $this->assertSame(3, $e->attempts);
        }
        $this->assertSame([0.1, 0.2], $waits, 'exponential pauses between the sends');
    }
}
