<?php

// herald from a Laravel application: an order is marked shipped and its webhook claimed in
// one DB::transaction, so both commit or neither does, and a retried closure never claims
// twice. Run from the repository root (see README.md here):
//
//     php examples/laravel/ship.php ORDER_ID [--fail]
//
// Settings are Laravel's own .env names (DB_CONNECTION, DB_HOST, DB_PORT, DB_DATABASE,
// DB_USERNAME, DB_PASSWORD) and herald's (HERALD_SCHEMA or HERALD_DATABASE, HERALD_TENANT).

declare(strict_types=1);

require __DIR__ . '/bootstrap.php';

use Herald\Laravel\Facades\Herald;
use Illuminate\Support\Facades\DB;

$order = (int) ($argv[1] ?? 0) ?: exit("usage: php examples/laravel/ship.php ORDER_ID [--fail]\n");
$fail = in_array('--fail', $argv, true);
DB::statement('CREATE TABLE IF NOT EXISTS example_orders (id INT PRIMARY KEY, status VARCHAR(20) NOT NULL)');
DB::table('example_orders')->insertOrIgnore(['id' => $order, 'status' => 'paid']);

try {
    // The three lines that matter: your change and herald's claim in one transaction,
    // which Laravel may run several times on a deadlock; every failed run's claim rolls
    // back with it, so there is one delivery, sent after the commit.
    $result = DB::transaction(function () use ($order, $fail) {
        DB::table('example_orders')->where('id', $order)->update(['status' => 'shipped']);
        $claim = Herald::submit(
            operationKey: "order-{$order}-shipped",
            channel: 'webhook',
            to: getenv('HOOK_URL') ?: 'https://example.com/hooks/orders',
            payload: ['order' => $order, 'status' => 'shipped'],
        );
        if ($fail) {
            throw new RuntimeException('the warehouse said no');
        }
        return $claim;
    }, attempts: 5);
} catch (RuntimeException $e) {
    $status = DB::table('example_orders')->where('id', $order)->value('status');
    echo "order {$order} rolled back ({$e->getMessage()}): still {$status}, and no delivery was claimed\n";
    exit(0);
}

$delivery = (new \Herald\Testing\HeraldInspector(app(\Herald\Herald::class)))->delivery((string) $result->deliveryId);
printf(
    "order %d shipped; herald: %s %s (%s)\n",
    $order,
    $result->status->value,
    $result->deliveryId ?? '-',
    $delivery['state'] ?? 'no delivery',
);
