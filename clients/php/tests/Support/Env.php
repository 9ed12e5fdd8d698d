<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

/**
 * The suite's settings, from the environment the driver (crates/herald-cli/tests/it/php.rs)
 * sets; run by hand, export them yourself (clients/php/README.md, "Tests").
 */
final class Env
{
    public static function get(string $name, ?string $default = null): string
    {
        $value = getenv($name);
        if ($value === false || $value === '') {
            if ($default !== null) {
                return $default;
            }
            throw new \RuntimeException("{$name} is not set: the PHP suite needs a database and a running `herald serve` (see clients/php/README.md, Tests)");
        }
        return $value;
    }

    /** `pgsql` or `mysql`. */
    public static function driver(): string
    {
        $driver = self::get('HERALD_TEST_DB_DRIVER');
        if (!in_array($driver, ['pgsql', 'mysql'], true)) {
            throw new \RuntimeException("HERALD_TEST_DB_DRIVER must be pgsql or mysql, got {$driver}");
        }
        return $driver;
    }

    public static function postgres(): bool
    {
        return self::driver() === 'pgsql';
    }

    /** The application's connection, as config/database.php would hold it. */
    public static function connection(): array
    {
        $common = [
            'host' => self::get('HERALD_TEST_DB_HOST', '127.0.0.1'),
            'port' => self::get('HERALD_TEST_DB_PORT', self::postgres() ? '5432' : '3306'),
            'database' => self::get('HERALD_TEST_DB_NAME'),
            'username' => self::get('HERALD_TEST_DB_USER'),
            'password' => (string) getenv('HERALD_TEST_DB_PASSWORD'),
            'prefix' => '',
        ];
        return self::postgres()
            ? ['driver' => 'pgsql', 'charset' => 'utf8', 'schema' => self::appNamespace(), 'sslmode' => 'disable'] + $common
            : ['driver' => 'mysql', 'charset' => 'utf8mb4', 'collation' => 'utf8mb4_unicode_ci', 'strict' => true, 'engine' => null] + $common;
    }

    /** The application's own tables: a schema (PostgreSQL); on MariaDB the connection's database. */
    public static function appNamespace(): string
    {
        return self::postgres() ? self::get('HERALD_TEST_APP_SCHEMA') : self::get('HERALD_TEST_DB_NAME');
    }

    /** herald's schema (PostgreSQL) or database (MariaDB). */
    public static function heraldNamespace(): string
    {
        return self::get('HERALD_TEST_HERALD_NAMESPACE');
    }

    public static function heraldUrl(): string
    {
        return rtrim(self::get('HERALD_TEST_URL'), '/');
    }

    public static function adminKey(): string
    {
        return self::get('HERALD_TEST_ADMIN_KEY');
    }

    /** The driver's webhook receiver: a name appended to it is one hook. */
    public static function receiverUrl(): string
    {
        return self::get('HERALD_TEST_RECEIVER_URL');
    }

    /** A directory for files the tests, their processes and the driver share. */
    public static function workDir(): string
    {
        $dir = self::get('HERALD_TEST_WORK_DIR', sys_get_temp_dir() . '/herald-php-tests');
        if (!is_dir($dir) && !mkdir($dir, 0o700, true) && !is_dir($dir)) {
            throw new \RuntimeException("cannot create {$dir}");
        }
        return $dir;
    }
}
