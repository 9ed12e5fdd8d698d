<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

use Herald\Laravel\HeraldServiceProvider;
use Illuminate\Config\Repository;
use Illuminate\Bus\BusServiceProvider;
use Illuminate\Database\DatabaseServiceProvider;
use Illuminate\Events\EventServiceProvider;
use Illuminate\Filesystem\FilesystemServiceProvider;
use Illuminate\Mail\MailServiceProvider;
use Illuminate\Notifications\NotificationServiceProvider;
use Illuminate\View\ViewServiceProvider;
use Illuminate\Foundation\Application;
use Illuminate\Support\Facades\Facade;

/**
 * A real Laravel application, as small as one gets: the framework's Application with its
 * events, views, database, bus, mail and notification providers and herald's registered
 * and booted, facades on, config from Env; mail goes through `MAIL_MAILER=herald`. The tests, the worker processes and the webhook receiver all boot this.
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
            // The one line: MAIL_MAILER=herald (config/mail.php's default); herald's provider
            // adds the `herald` mailer itself.
            'mail' => [
                'default' => 'herald',
                'mailers' => ['smtp' => ['transport' => 'smtp', 'host' => '127.0.0.1', 'port' => 1]],
                'from' => ['address' => 'shop@shop.example', 'name' => 'The Shop'],
            ],
            'view' => [
                'paths' => [dirname(__DIR__) . '/views'],
                'compiled' => self::compiledViews(),
            ],
        ]));
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
        $app->register(EventServiceProvider::class);
        $app->register(FilesystemServiceProvider::class);
        $app->register(ViewServiceProvider::class);
        $app->register(DatabaseServiceProvider::class);
        $app->register(BusServiceProvider::class);
        $app->register(MailServiceProvider::class);
        $app->register(NotificationServiceProvider::class);
        $app->register(HeraldServiceProvider::class);
        $app->boot();
        return $app;
    }

    private static function compiledViews(): string
    {
        $dir = Env::workDir() . '/views-compiled-' . getmypid();
        if (!is_dir($dir)) {
            @mkdir($dir, 0o700, true);
        }
        return $dir;
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
