<?php

// One command in a PHP process of its own, on a fresh Laravel application (tests/Support/
// Worker.php starts it): `php worker.php COMMAND JSON`. Prints `ready` once connected,
// waits for `go` on stdin when asked to, and prints its result as one JSON line.

declare(strict_types=1);

require __DIR__ . '/../bootstrap.php';

use Herald\Laravel\Facades\Herald;
use Herald\Tests\Support\App;
use Illuminate\Support\Facades\DB;

[$command, $args] = [$argv[1] ?? '', json_decode($argv[2] ?? '{}', true, 16, JSON_THROW_ON_ERROR)];
App::boot();
DB::select('SELECT 1');
echo "ready\n";
if ($args['wait_go'] ?? false) {
    if (trim((string) fgets(STDIN)) !== 'go') {
        fwrite(STDERR, "expected `go` on stdin\n");
        exit(2);
    }
}

$submit = static fn () => Herald::submit(
    tenant: $args['tenant'],
    operationKey: $args['operation_key'],
    channel: 'webhook',
    to: $args['to'],
    payload: $args['payload'],
);

switch ($command) {
    // Seed 000: one (status, channel) submitted from many processes at once.
    case 'submit':
        $result = DB::transaction(static function () use ($submit, $args) {
            DB::table('orders')->insert(['id' => $args['order'], 'status' => 'ready']);
            return $submit();
        }, 5);
        echo json_encode(['status' => $result->status->value, 'delivery_id' => $result->deliveryId]), "\n";
        break;

    // Commit, then die at once with SIGKILL: nothing of the process's memory survives.
    case 'submit-then-sigkill':
        $result = DB::transaction(static function () use ($submit, $args) {
            DB::table('orders')->insert(['id' => $args['order'], 'status' => 'ready']);
            return $submit();
        });
        echo json_encode(['status' => $result->status->value, 'delivery_id' => $result->deliveryId]), "\n";
        fflush(STDOUT);
        posix_kill(getmypid(), SIGKILL);
        exit(3); // not reached

    // Seed 001: one invoice event applied through Herald::once.
    case 'once':
        $result = Herald::once($args['scope'], $args['event'], static function () use ($args): void {
            $updated = DB::table('ledger')->where('invoice', $args['invoice'])->increment('total', $args['units']);
            if ($updated === 0) {
                DB::table('ledger')->insert(['invoice' => $args['invoice'], 'total' => $args['units']]);
            }
        });
        echo json_encode(['applied' => $result->applied]), "\n";
        break;

    // Seed 001's output line: the invoices' total and the number of accepted identities.
    case 'ledger':
        $total = (int) DB::table('ledger')->whereIn('invoice', $args['invoices'])->sum('total');
        $herald = app(\Herald\Herald::class);
        $accepted = count($herald->connection()->select(
            'SELECT operation_id FROM ' . $herald->calls()->table('receipts') . ' WHERE scope = ?',
            [$args['scope']],
        ));
        echo json_encode("{$total} {$accepted}"), "\n";
        break;

    default:
        fwrite(STDERR, "unknown command {$command}\n");
        exit(2);
}
