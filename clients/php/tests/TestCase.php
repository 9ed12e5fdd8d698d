<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Herald;
use Herald\Testing\InteractsWithHerald;
use Herald\Tests\Support\App;
use Herald\Tests\Support\Tenant;
use Illuminate\Database\Connection;
use Illuminate\Foundation\Application;

/**
 * The suite's base: one booted Laravel application per PHPUnit process (its tables made
 * once), and a fresh herald tenant per test, so tests share nothing but the servers.
 */
abstract class TestCase extends \PHPUnit\Framework\TestCase
{
    use InteractsWithHerald;

    protected static ?Application $app = null;
    protected Tenant $tenant;

    public static function setUpBeforeClass(): void
    {
        if (self::$app === null) {
            self::$app = App::boot();
            App::createTables(self::$app);
        }
    }

    protected function setUp(): void
    {
        $this->tenant = Tenant::create($this->quotas());
    }

    /** @return array<string, int> the new tenant's quota accounts */
    protected function quotas(): array
    {
        return ['webhook' => 100];
    }

    protected function herald(): Herald
    {
        return self::$app->make(Herald::class);
    }

    protected function db(): Connection
    {
        return self::$app['db']->connection();
    }

    /** A unique name for this test's rows and keys. */
    protected function unique(string $what): string
    {
        return $what . '-' . bin2hex(random_bytes(5));
    }

    /** The driver's webhook receiver (answers 200 and records every request). */
    protected function receiver(string $name): string
    {
        return rtrim(\Herald\Tests\Support\Env::receiverUrl(), '/') . '/' . $name;
    }
}
