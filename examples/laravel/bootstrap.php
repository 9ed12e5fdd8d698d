<?php

// A Laravel application as small as one gets, for the example: the framework's
// Application with its database provider and herald's, configured from the environment
// the way config/database.php and config/herald.php read a .env. In an application made
// with `laravel new`, `composer require herald/herald` does all of this.

declare(strict_types=1);

$root = dirname(__DIR__, 2);
if (is_file("{$root}/clients/php/vendor/autoload.php")) {
    require "{$root}/clients/php/vendor/autoload.php";
} else {
    // Debian's php-laravel-framework, and the package in place.
    set_include_path(get_include_path() . PATH_SEPARATOR . '/usr/share/php');
    require 'Illuminate/autoload.php';
    require "{$root}/clients/php/autoload.php";
}

use Illuminate\Config\Repository;
use Illuminate\Database\DatabaseServiceProvider;
use Illuminate\Foundation\Application;
use Illuminate\Support\Facades\Facade;

$env = static fn (string $name, ?string $default = null): ?string => ($v = getenv($name)) === false || $v === '' ? $default : $v;
$driver = $env('DB_CONNECTION', 'pgsql');
$app = new Application(sys_get_temp_dir());
$app->instance('config', new Repository([
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
]));
Facade::setFacadeApplication($app);
$app->register(DatabaseServiceProvider::class);
$app->register(Herald\Laravel\HeraldServiceProvider::class); // reads HERALD_* through config/herald.php
$app->boot();
if ($env('HERALD_TENANT') === null) {
    fwrite(STDERR, "HERALD_TENANT is not set: the id `herald tenant create` printed\n");
    exit(1);
}
