<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

/**
 * tests/bin/receiver.php under PHP's built-in web server, on a free port, for the whole
 * PHPUnit process (stopped at its end).
 */
final class PhpServer
{
    /** Bound on the server's start. */
    public const START_MAX_SECONDS = 10.0;

    private static ?self $running = null;

    /** @var resource */
    private $process;

    private function __construct(public readonly string $url)
    {
    }

    public static function url(): string
    {
        return (self::$running ??= self::start())->url;
    }

    private static function start(): self
    {
        $probe = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
        if ($probe === false) {
            throw new \RuntimeException("no free port: {$error}");
        }
        $address = (string) stream_socket_get_name($probe, false);
        fclose($probe);
        $log = Env::workDir() . '/php-server.log';
        $process = proc_open(
            [PHP_BINARY, '-S', $address, dirname(__DIR__) . '/bin/receiver.php'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']],
            $pipes,
        );
        if (!is_resource($process)) {
            throw new \RuntimeException('cannot start php -S');
        }
        $server = new self("http://{$address}");
        $server->process = $process;
        register_shutdown_function(static function () use ($process): void {
            proc_terminate($process);
            proc_close($process);
        });
        $deadline = microtime(true) + self::START_MAX_SECONDS;
        while (($socket = @stream_socket_client("tcp://{$address}", $errno, $error, 0.2)) === false) {
            if (microtime(true) > $deadline || !proc_get_status($process)['running']) {
                throw new \RuntimeException("php -S on {$address} did not start: " . @file_get_contents($log));
            }
            usleep(20_000);
        }
        fclose($socket);
        return $server;
    }
}
