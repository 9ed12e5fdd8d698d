<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

use Herald\Laravel\HeraldServiceProvider;
use Illuminate\Config\Repository;
use Illuminate\Database\DatabaseServiceProvider;
use Illuminate\Foundation\Application;
use Illuminate\Support\Facades\Facade;

/**
 * A real Laravel application, as small as one gets: the framework's Application with its
 * database provider and herald's provider registered and booted, facades on, config
 * from Env. The tests, the worker processes and the webhook receiver all boot this.
 */
final class App
{
    public static function boot(): Application
    {
        $app = new Application(Env::workDir());
        $app->instance('config', new Repository([
            'app' => ['name' => 'herald-php-tests', 'env' => 'testing', 'debug' => true],
            'database' => [
                'default' => 'app',
                'connections' => ['app' => Env::connection()],
            ],
            'herald' => [
                'connection' => 'app',
                'schema' => Env::heraldNamespace(),
                'database' => Env::heraldNamespace(),
                'url' => Env::heraldUrl(),
            ],
        ]));
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
        $app->register(DatabaseServiceProvider::class);
        $app->register(HeraldServiceProvider::class);
        $app->boot();
        return $app;
    }

    /** The application's own tables (none of herald's: those are `herald migrate`'s). */
    public static function createTables(Application $app): void
    {
        $db = $app['db']->connection();
        $text = Env::postgres() ? 'text' : 'TEXT';
        foreach ([
            'CREATE TABLE IF NOT EXISTS orders (id VARCHAR(100) PRIMARY KEY, status VARCHAR(50) NOT NULL)',
            'CREATE TABLE IF NOT EXISTS inventory (id INT PRIMARY KEY, stock INT NOT NULL)',
            'CREATE TABLE IF NOT EXISTS ledger (invoice VARCHAR(100) PRIMARY KEY, total INT NOT NULL)',
            "CREATE TABLE IF NOT EXISTS receiver_requests (webhook_id VARCHAR(100) NOT NULL, mode VARCHAR(20) NOT NULL, body {$text} NOT NULL)",
            "CREATE TABLE IF NOT EXISTS receiver_effects (webhook_id VARCHAR(100) NOT NULL, body {$text} NOT NULL)",
            'CREATE TABLE IF NOT EXISTS scratch (n INT NOT NULL)',
        ] as $sql) {
            $db->statement($sql);
        }
    }
}
