<?php

// The suite's autoloading: Composer's when the package was installed with it, else
// Debian's Laravel (php-laravel-framework, under /usr/share/php) and the package's own
// PSR-4 loader. Also loaded by the worker and receiver scripts the tests start.

declare(strict_types=1);

$vendor = dirname(__DIR__) . '/vendor/autoload.php';
if (is_file($vendor)) {
    require_once $vendor;
} else {
    set_include_path(get_include_path() . PATH_SEPARATOR . '/usr/share/php');
    if (stream_resolve_include_path('Illuminate/autoload.php') === false) {
        fwrite(STDERR, "Laravel is not installed: composer install, or apt-get install php-laravel-framework\n");
        exit(1);
    }
    require_once 'Illuminate/autoload.php';
    require_once dirname(__DIR__) . '/autoload.php';
}
