<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Herald as HeraldClient;
use Herald\Http\HttpClient;
use Herald\Laravel\Facades\Herald;
use Herald\Webhook\Signature;
use Herald\Webhook\WebhookReceiver;

/** The service provider's bindings, from config/herald.php merged with the application's. */
final class ProviderTest extends TestCase
{
    protected function tearDown(): void
    {
        foreach ([HttpClient::class, WebhookReceiver::class] as $binding) {
            self::$app->forgetInstance($binding);
        }
        self::$app['config']->set('herald.key', null);
        self::$app['config']->set('herald.webhook_secret', null);
    }

    public function testTheFacadeIsTheHeraldOnTheConfiguredConnection(): void
    {
        $this->assertSame(self::$app->make(HeraldClient::class), Herald::getFacadeRoot());
        $this->assertSame(self::$app->make('herald'), Herald::getFacadeRoot());
        $this->assertSame('app', self::$app['config']['herald.connection']);
        // The package's defaults fill what the application's config leaves out.
        $this->assertSame('herald-webhook', self::$app['config']['herald.webhook_scope']);
        $this->assertSame(300, self::$app['config']['herald.webhook_tolerance']);
    }

    public function testACurrentTraceSettingThatIsNoCallableIsAClearError(): void
    {
        self::$app['config']->set('herald.traceparent', 'App\\NoSuchTracing');
        self::$app->forgetInstance(HeraldClient::class);
        try {
            self::$app->make(HeraldClient::class);
            $this->fail('expected a refusal of herald.traceparent');
        } catch (\InvalidArgumentException $e) {
            $this->assertStringContainsString('herald.traceparent must name an invokable class or a static callable', $e->getMessage());
        } finally {
            self::$app['config']->set('herald.traceparent', null);
            self::$app->forgetInstance(HeraldClient::class);
            Herald::clearResolvedInstance('herald');
        }
    }

    public function testTheHttpClientComesFromTheUrlAndKeyInConfig(): void
    {
        try {
            self::$app->make(HttpClient::class);
            $this->fail('expected a refusal without herald.key');
        } catch (\InvalidArgumentException $e) {
            $this->assertStringContainsString('HERALD_KEY', $e->getMessage());
        }
        self::$app['config']->set('herald.key', $this->tenant->apiKey);
        $quotas = self::$app->make(HttpClient::class)->quotas();
        $this->assertSame([['quota_key' => 'webhook', 'granted' => 100, 'available' => 100, 'reserved' => 0, 'spent' => 0]], $quotas);
    }

    public function testTheWebhookReceiverTakesEverySecretOfARotation(): void
    {
        $previous = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
        self::$app['config']->set('herald.webhook_secret', "{$this->tenant->secret}, {$previous}");
        $receiver = self::$app->make(WebhookReceiver::class);
        $now = time();
        foreach ([$this->tenant->secret, $previous] as $secret) {
            $headers = ['webhook-id' => 'msg_1', 'webhook-timestamp' => (string) $now, 'webhook-signature' => Signature::sign($secret, 'msg_1', $now, '{}')];
            $this->assertSame('msg_1', $receiver->verify($headers, '{}')->id);
        }
    }
}
