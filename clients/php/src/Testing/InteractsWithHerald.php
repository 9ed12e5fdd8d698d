<?php

declare(strict_types=1);

namespace Herald\Testing;

use Herald\Herald;

/**
 * PHPUnit assertions on what herald's real calls wrote, read on the application's own
 * connection: inside a test wrapped in a transaction they see the claim the code under
 * test made in it, and the rollback at the end leaves nothing to be sent. Use in a
 * Laravel TestCase as is (it takes `Herald` from the container), or override `herald()`.
 *
 * @mixin \PHPUnit\Framework\TestCase
 */
trait InteractsWithHerald
{
    protected function herald(): Herald
    {
        return \Illuminate\Container\Container::getInstance()->make(Herald::class);
    }

    protected function heraldInspector(): HeraldInspector
    {
        return new HeraldInspector($this->herald());
    }

    /**
     * Exactly one delivery for the identity, with one reservation of its cost (none for
     * cost 0); returns it.
     */
    protected function assertHeraldClaimed(string $operationKey, string $channel, ?string $tenant = null): array
    {
        $inspector = $this->heraldInspector();
        $rows = $inspector->deliveries($tenant, $operationKey, $channel);
        $this->assertCount(1, $rows, "expected one herald delivery for ({$operationKey}, {$channel})");
        $delivery = $rows[0];
        $reserves = array_values(array_filter($inspector->journal($delivery['id']), static fn ($m) => $m['kind'] === 'reserve'));
        if ($delivery['cost'] > 0) {
            $this->assertSame(
                [['kind' => 'reserve', 'amount' => $delivery['cost'], 'reservation_seq' => 1]],
                array_map(static fn ($m) => ['kind' => $m['kind'], 'amount' => (int) $m['amount'], 'reservation_seq' => (int) $m['reservation_seq']], $reserves),
                "expected one reservation of the delivery's cost",
            );
        } else {
            $this->assertSame([], $reserves, 'a cost-0 delivery reserves nothing');
        }
        return $delivery;
    }

    protected function assertHeraldNotClaimed(string $operationKey, string $channel, ?string $tenant = null): void
    {
        $this->assertSame(
            [],
            $this->heraldInspector()->deliveries($tenant, $operationKey, $channel),
            "expected no herald delivery for ({$operationKey}, {$channel})",
        );
    }

    protected function assertHeraldReceipt(string $scope, string $operationId): void
    {
        $this->assertTrue($this->heraldInspector()->receiptExists($scope, $operationId), "expected a receipt for ({$scope}, {$operationId})");
    }

    protected function assertNoHeraldReceipt(string $scope, string $operationId): void
    {
        $this->assertFalse($this->heraldInspector()->receiptExists($scope, $operationId), "expected no receipt for ({$scope}, {$operationId})");
    }

    /**
     * Waits for a running `herald serve` to finish the delivery (after the commit).
     *
     * @param list<string> $states
     */
    protected function awaitHeraldDelivery(string $deliveryId, array $states = ['sent'], float $within = 20.0): array
    {
        return $this->heraldInspector()->awaitState($deliveryId, $states, $within);
    }
}
