<?php

// One process of `herald bench`'s PHP phase (crates/herald-cli/src/bench/php.rs): submits
// through the package as an application's request does, one autocommitted call each, on
// its own PDO connection. It connects, says `ready`, waits for a line on stdin (the
// bench's clock starts when every process is ready), submits the keys `PREFIX-i` for
// every i < N with i % PROCESSES = PROCESS, and says `done COUNT`.
//
//   php submit.php PROCESS PROCESSES N PREFIX PAYLOAD_FILE v1|v2
//
// Or, for the commit-to-start phase, one submit per line of stdin (`KEY TENANT`), each
// answered `ok DELIVERY_ID` once committed (autocommitted: the package wakes herald's
// workers on MariaDB right after), with the payload `{"event": "bench"}`:
//
//   php submit.php latency
//
// The connection and herald's place come from the environment: HERALD_BENCH_DSN,
// HERALD_BENCH_USER, HERALD_BENCH_PASSWORD, HERALD_BENCH_NAMESPACE (herald's schema on
// PostgreSQL, its database on MariaDB), HERALD_BENCH_TENANTS (comma separated). `v2`: the
// fingerprint computed here (max_attempts 8 known); `v1`: left to the database (the shared
// setting).

declare(strict_types=1);

require dirname(__DIR__) . '/autoload.php';

use Herald\Herald;
use Herald\SubmitStatus;

if ($argc === 2 && $argv[1] === 'latency') {
    $env = static fn (string $name): string => getenv($name) !== false ? (string) getenv($name)
        : throw new RuntimeException("{$name} is not set");
    $pdo = new PDO($env('HERALD_BENCH_DSN'), $env('HERALD_BENCH_USER'), getenv('HERALD_BENCH_PASSWORD') ?: null, [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
    ]);
    $namespace = $env('HERALD_BENCH_NAMESPACE');
    $herald = Herald::pdo($pdo, schema: $namespace, database: $namespace);
    fwrite(STDOUT, "ready\n");
    fflush(STDOUT);
    while (($line = fgets(STDIN)) !== false) {
        [$key, $tenant] = explode(' ', trim($line)) + ['', ''];
        $result = $herald->submit($key, 'webhook', 'https://example.com/h', '{"event": "bench"}', tenant: $tenant);
        if ($result->status !== SubmitStatus::Created) {
            fwrite(STDERR, "submit {$key} answered {$result->status->value}\n");
            exit(1);
        }
        fwrite(STDOUT, "ok {$result->deliveryId}\n");
        fflush(STDOUT);
    }
    exit(0);
}
if ($argc !== 7) {
    fwrite(STDERR, "usage: php submit.php PROCESS PROCESSES N PREFIX PAYLOAD_FILE v1|v2\n");
    exit(2);
}
[, $process, $processes, $n, $prefix, $payloadFile, $version] = $argv;
[$process, $processes, $n] = [(int) $process, (int) $processes, (int) $n];
$env = static fn (string $name): string => getenv($name) !== false ? (string) getenv($name)
    : throw new RuntimeException("{$name} is not set");

$pdo = new PDO($env('HERALD_BENCH_DSN'), $env('HERALD_BENCH_USER'), getenv('HERALD_BENCH_PASSWORD') ?: null, [
    PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
]);
$namespace = $env('HERALD_BENCH_NAMESPACE');
$herald = Herald::pdo($pdo, schema: $namespace, database: $namespace, maxAttempts: $version === 'v1' ? null : 8);
$tenants = explode(',', $env('HERALD_BENCH_TENANTS'));
$payload = (string) file_get_contents($payloadFile);

fwrite(STDOUT, "ready\n");
fflush(STDOUT);
fgets(STDIN);
$count = 0;
for ($i = $process; $i < $n; $i += $processes) {
    $result = $herald->submit(
        operationKey: "{$prefix}-{$i}",
        channel: 'webhook',
        to: 'https://example.com/h',
        payload: $payload,
        tenant: $tenants[$i % count($tenants)],
    );
    if ($result->status !== SubmitStatus::Created) {
        fwrite(STDERR, "submit {$prefix}-{$i} answered {$result->status->value}\n");
        exit(1);
    }
    $count++;
}
fwrite(STDOUT, "done {$count}\n");
