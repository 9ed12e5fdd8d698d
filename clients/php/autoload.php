<?php

// The package's PSR-4 mapping (`Herald\` → src/) without Composer, for a checkout used in
// place (the tests, examples/laravel-shop): `require 'clients/php/autoload.php';`.
// With Composer, its own autoloader does the same from composer.json.

declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    $prefix = 'Herald\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $relative = substr($class, strlen($prefix));
    if (str_starts_with($relative, 'Tests\\')) {
        $file = __DIR__ . '/tests/' . str_replace('\\', '/', substr($relative, 6)) . '.php';
    } else {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', $relative) . '.php';
    }
    if (is_file($file)) {
        require $file;
    }
});
