<?php

// The shop's Laravel application, as small as one gets: the framework's Application with
// its events, views, database, bus, mail and notification providers and herald's, configured
// from the environment the way config/*.php read a .env. In an application made with
// `laravel new`, `composer require herald/herald` and `MAIL_MAILER=herald` do all of this.

declare(strict_types=1);

$root = dirname(__DIR__, 2);
if (is_file("{$root}/clients/php/vendor/autoload.php")) {
    require_once "{$root}/clients/php/vendor/autoload.php";
} else {
    // Debian's php-laravel-framework, and the package in place.
    set_include_path(get_include_path() . PATH_SEPARATOR . '/usr/share/php');
    require_once 'Illuminate/autoload.php';
    require_once "{$root}/clients/php/autoload.php";
}
spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'Shop\\')) {
        require __DIR__ . '/app/' . str_replace('\\', '/', substr($class, 5)) . '.php';
    }
});

use Illuminate\Config\Repository;
use Illuminate\Foundation\Application;
use Illuminate\Support\Facades\Facade;

$env = static fn (string $name, ?string $default = null): ?string => ($v = getenv($name)) === false || $v === '' ? $default : $v;
$driver = $env('DB_CONNECTION', 'pgsql');
$compiled = sys_get_temp_dir() . '/laravel-shop-views-' . getmypid();
@mkdir($compiled, 0o700, true);
$app = new Application(__DIR__);
$app->instance('config', new Repository([
    'app' => ['name' => 'The Shop', 'env' => 'local', 'debug' => true],
    'database' => [
        'default' => $driver,
        'connections' => [$driver => [
            'driver' => $driver,
            'host' => $env('DB_HOST', '127.0.0.1'),
            'port' => $env('DB_PORT', $driver === 'pgsql' ? '5432' : '3306'),
            'database' => $env('DB_DATABASE', 'test'),
            'username' => $env('DB_USERNAME', $driver === 'pgsql' ? 'postgres' : 'root'),
            'password' => $env('DB_PASSWORD', ''),
            'charset' => $driver === 'pgsql' ? 'utf8' : 'utf8mb4',
            'prefix' => '',
            'schema' => $env('DB_SCHEMA', 'public'),
        ]],
    ],
    // config/mail.php as `laravel new` writes it; the shop's .env says MAIL_MAILER=herald.
    'mail' => [
        'default' => $env('MAIL_MAILER', 'smtp'),
        'mailers' => ['smtp' => ['transport' => 'smtp', 'host' => $env('MAIL_HOST', '127.0.0.1'), 'port' => (int) $env('MAIL_PORT', '25')]],
        'from' => ['address' => $env('MAIL_FROM_ADDRESS', 'orders@shop.example'), 'name' => 'The Shop'],
    ],
    'view' => ['paths' => [__DIR__ . '/resources/views'], 'compiled' => $compiled],
]));
Facade::setFacadeApplication($app);
foreach ([
    Illuminate\Events\EventServiceProvider::class,
    Illuminate\Filesystem\FilesystemServiceProvider::class,
    Illuminate\View\ViewServiceProvider::class,
    Illuminate\Database\DatabaseServiceProvider::class,
    Illuminate\Bus\BusServiceProvider::class,
    Illuminate\Mail\MailServiceProvider::class,
    Illuminate\Notifications\NotificationServiceProvider::class,
    Herald\Laravel\HeraldServiceProvider::class, // reads HERALD_* through config/herald.php
] as $provider) {
    $app->register($provider);
}
$app->boot();
