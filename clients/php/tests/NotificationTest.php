<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Laravel\Notifications\HeraldMessage;
use Herald\Tests\Support\CurrentTrace;
use Herald\Tests\Support\Expect;
use Herald\Tests\Support\Shop\OrderShipped;
use Herald\Tests\Support\Shop\Partner;
use Illuminate\Notifications\Notification;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Notification as Notifications;

/**
 * The notification channel `herald` (issue 35, point 2): `via()` returning `'herald'` or the
 * channel's class, `toHerald($notifiable)` a HeraldMessage; claimed in the current
 * transaction, sent by herald after commit, once.
 */
final class NotificationTest extends TestCase
{
    protected function setUp(): void
    {
        parent::setUp();
        self::$app['config']->set('herald.tenant', $this->tenant->id);
        self::$app->forgetInstance(\Herald\Herald::class);
        self::$app->forgetInstance(\Illuminate\Notifications\ChannelManager::class);
        Notifications::clearResolvedInstance(\Illuminate\Notifications\ChannelManager::class);
    }

    protected function tearDown(): void
    {
        self::$app['config']->set('herald.traceparent', null);
        [CurrentTrace::$traceparent, CurrentTrace::$fails] = [null, false];
        self::$app->forgetInstance(\Herald\Herald::class);
        parent::tearDown();
    }

    public function testTheConfiguredCurrentTraceGoesWithTheNotificationsClaim(): void
    {
        self::$app['config']->set('herald.traceparent', CurrentTrace::class);
        self::$app->forgetInstance(\Herald\Herald::class);
        self::$app->forgetInstance(\Illuminate\Notifications\ChannelManager::class);
        Notifications::clearResolvedInstance(\Illuminate\Notifications\ChannelManager::class);
        $cases = [
            'traced' => ['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', false, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'],
            // Asking fails, or answers what is not a traceparent: the claim goes on, untraced.
            'failing' => ['00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', true, null],
            'not-one' => ["00-\xff", false, null],
        ];
        foreach ($cases as $case => [$current, $fails, $expected]) {
            [CurrentTrace::$traceparent, CurrentTrace::$fails] = [$current, $fails];
            $marker = $this->unique("traced-{$case}");
            DB::transaction(function () use ($marker, $case) {
                Notifications::route('herald', $this->receiver("notification-{$case}"))->notify(new OrderShipped(23, $marker));
            });
            $found = array_values(array_filter(
                $this->heraldInspector()->deliveries(channel: 'webhook'),
                fn (array $d) => $this->heraldInspector()->delivery($d['id'])['recipient'] === $this->receiver("notification-{$case}"),
            ));
            $this->assertCount(1, $found, $case);
            $claimed = $this->assertHeraldClaimed($found[0]['operation_key'], 'webhook', $this->tenant->id);
            $this->assertSame($expected, $claimed['traceparent'], $case);
            Expect::deliveredOnce($found[0]['id'], "notification-traced-{$case}");
        }
    }

    public function testAnOnDemandNotificationIsClaimedInTheTransactionAndSentOnce(): void
    {
        $marker = $this->unique('shipped');
        DB::transaction(function () use ($marker) {
            DB::table('orders')->insert(['id' => $marker, 'status' => 'shipped']);
            Notifications::route('herald', $this->receiver('notification'))->notify(new OrderShipped(21, $marker));
        });
        [$delivery] = $this->heraldInspector()->deliveries(channel: 'webhook');
        $this->assertStringStartsWith('notification-', $delivery['operation_key']);
        $this->awaitHeraldDelivery($delivery['id']);
        Expect::deliveredOnce($delivery['id'], 'notification-on-demand');
    }

    public function testANotifiableRetriedByItsClosureIsOneDeliveryAndTheChannelClassWorksToo(): void
    {
        $marker = $this->unique('partner');
        $partner = new Partner(7, $this->receiver('partner'));
        $runs = 0;
        DB::transaction(function () use (&$runs, $partner, $marker) {
            $runs++;
            $partner->notify(new OrderShipped(22, $marker, byClass: true));
            // The same notification again (a retried job after commit, a double click).
            $partner->notify(new OrderShipped(22, $marker, byClass: true));
        });
        $deliveries = $this->heraldInspector()->deliveries(channel: 'webhook');
        $this->assertCount(1, $deliveries, 'one delivery for the same notification to the same notifiable');
        $this->assertSame($this->receiver('partner'), $this->heraldInspector()->delivery($deliveries[0]['id'])['recipient']);
        $this->awaitHeraldDelivery($deliveries[0]['id']);
        Expect::deliveredOnce($deliveries[0]['id'], 'notification-notifiable');
    }

    public function testARolledBackNotificationIsNeverSentAndAnExplicitKeyIsKept(): void
    {
        $marker = $this->unique('rolledbacknotification');
        try {
            DB::transaction(function () use ($marker) {
                Notifications::route('herald', $this->receiver('rolled-back'))->notify(new OrderShipped(23, $marker));
                throw new \DomainException('the carrier refused');
            });
        } catch (\DomainException) {
        }
        $this->assertSame([], $this->heraldInspector()->deliveries(channel: 'webhook'));
        Expect::neverDelivered($marker, 'rolled-back-notification');

        $key = $this->unique('order-24-shipped');
        $keyed = new class ($key, $this->receiver('keyed')) extends Notification {
            public function __construct(private string $key, private string $url)
            {
            }

            public function via($notifiable): array
            {
                return ['herald'];
            }

            public function toHerald($notifiable): HeraldMessage
            {
                return HeraldMessage::webhook('{"event":"order.shipped","order":24}')->to($this->url)->key($this->key);
            }
        };
        Notifications::route('herald', 'ignored')->notify($keyed);
        $delivery = $this->assertHeraldClaimed($key, 'webhook');
        $this->assertSame($this->receiver('keyed'), $this->heraldInspector()->delivery($delivery['id'])['recipient'], "the message's own `to` wins");
        $this->awaitHeraldDelivery($delivery['id']);
        Expect::deliveredOnce($delivery['id'], 'notification-keyed');
    }
}
