<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

/**
 * A PHP process of its own running tests/bin/worker.php: a fresh Laravel application, a
 * connection of its own, one command. It prints `ready` once connected and, when told to
 * wait, does its work only after `go` on stdin, so many start together.
 */
final class Worker
{
    /** Bound on one worker's run. */
    public const RUN_MAX_SECONDS = 30.0;

    /** @var resource */
    private $process;
    /** @var array<int, resource> */
    private array $pipes;

    public function __construct(public readonly string $command, array $args)
    {
        $spec = [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']];
        $argv = [PHP_BINARY, dirname(__DIR__) . '/bin/worker.php', $command, json_encode($args, JSON_THROW_ON_ERROR)];
        $process = proc_open($argv, $spec, $pipes);
        if (!is_resource($process)) {
            throw new \RuntimeException("cannot start the {$command} worker");
        }
        $this->process = $process;
        $this->pipes = $pipes;
    }

    /** Waits for its `ready` line. */
    public function awaitReady(): void
    {
        $line = $this->line();
        if (trim($line) !== 'ready') {
            throw new \RuntimeException("worker {$this->command}: expected `ready`, got " . json_encode($line) . '; stderr: ' . $this->stderr());
        }
    }

    public function go(): void
    {
        fwrite($this->pipes[0], "go\n");
        fflush($this->pipes[0]);
    }

    /**
     * Waits for the process to end: its last stdout line decoded as JSON, and how it ended.
     *
     * @return array{result: mixed, exit: int, signal: ?int, stderr: string}
     */
    public function finish(): array
    {
        $out = '';
        $deadline = microtime(true) + self::RUN_MAX_SECONDS;
        stream_set_blocking($this->pipes[1], false);
        while (!feof($this->pipes[1])) {
            if (microtime(true) > $deadline) {
                proc_terminate($this->process, 9);
                throw new \RuntimeException("worker {$this->command} ran longer than " . self::RUN_MAX_SECONDS . ' s');
            }
            $read = [$this->pipes[1]];
            $none = null;
            if (@stream_select($read, $none, $none, 0, 100_000) > 0) {
                $out .= (string) fread($this->pipes[1], 65536);
            }
        }
        $stderr = $this->stderr();
        foreach ($this->pipes as $pipe) {
            @fclose($pipe);
        }
        // proc_close's code is -1 after a signal on some builds: ask proc_get_status first.
        do {
            $status = proc_get_status($this->process);
        } while ($status['running'] && usleep(10_000) === null);
        proc_close($this->process);
        $lines = array_values(array_filter(array_map('trim', explode("\n", $out)), static fn ($l) => $l !== '' && $l !== 'ready'));
        $last = $lines === [] ? null : json_decode(end($lines), true);
        return [
            'result' => $last,
            'exit' => (int) $status['exitcode'],
            'signal' => $status['signaled'] ? (int) $status['termsig'] : null,
            'stderr' => $stderr,
        ];
    }

    /**
     * One worker run to its end; fails on a non-zero exit.
     */
    public static function run(string $command, array $args): mixed
    {
        $worker = new self($command, $args);
        $end = $worker->finish();
        if ($end['exit'] !== 0 || $end['signal'] !== null) {
            throw new \RuntimeException("worker {$command} failed (exit {$end['exit']}, signal " . ($end['signal'] ?? '-') . "): {$end['stderr']}");
        }
        return $end['result'];
    }

    private function line(): string
    {
        $read = [$this->pipes[1]];
        $none = null;
        if (@stream_select($read, $none, $none, (int) self::RUN_MAX_SECONDS) !== 1) {
            throw new \RuntimeException("worker {$this->command}: no output within " . self::RUN_MAX_SECONDS . ' s; stderr: ' . $this->stderr());
        }
        return (string) fgets($this->pipes[1]);
    }

    private function stderr(): string
    {
        stream_set_blocking($this->pipes[2], false);
        return (string) stream_get_contents($this->pipes[2]);
    }
}
