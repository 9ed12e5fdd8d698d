<?php

// The shop (run it through ./run, which sets the stage; see README.md):
//
//     php shop.php setup                          its tables
//     php shop.php place ORDER EMAIL [--decline]  place an order
//     php shop.php check MESSAGES_FILE ORDER…     wait for what herald sends, and check it
//
// `place` is seed 004's code, unchanged: the order and its confirmation mail in one
// `DB::transaction(fn, 5)`, and a webhook notification to the fulfilment partner. With
// MAIL_MAILER=herald the mail and the webhook are claimed in that transaction and sent by
// herald after commit: a retried closure claims them once, a declined payment none.

declare(strict_types=1);

require __DIR__ . '/bootstrap.php';

use Herald\Testing\HeraldInspector;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Mail;
use Illuminate\Support\Facades\Notification;
use Shop\Mail\OrderConfirmation;
use Shop\Notifications\OrderPlaced;

$usage = "usage: php shop.php setup | place ORDER EMAIL [--decline] | check MESSAGES_FILE ORDER…\n";
$command = $argv[1] ?? exit($usage);

if ($command === 'setup') {
    DB::statement('CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY, customer VARCHAR(200) NOT NULL, total INT NOT NULL)');
    // The partner's side (receiver.php): what its webhook handler applied, once per webhook-id.
    DB::statement('CREATE TABLE IF NOT EXISTS partner_orders (webhook_id VARCHAR(100) PRIMARY KEY, order_id INT NOT NULL)');
    echo "tables ready\n";
    exit(0);
}

if ($command === 'place') {
    $order = (int) ($argv[2] ?? 0) ?: exit($usage);
    $email = $argv[3] ?? exit($usage);
    $decline = in_array('--decline', $argv, true);
    $total = 4200 + $order;
    try {
        DB::transaction(function () use ($order, $email, $total, $decline) {
            DB::table('orders')->insert(['id' => $order, 'customer' => $email, 'total' => $total]);
            Mail::to($email)->send(new OrderConfirmation($order, $email, $total));
            Notification::route('herald', getenv('PARTNER_WEBHOOK_URL'))->notify(new OrderPlaced($order, $total));
            if ($decline) {
                throw new RuntimeException('the payment was declined');
            }
        }, 5);
    } catch (RuntimeException $e) {
        echo "order {$order}: {$e->getMessage()}; rolled back, nothing claimed\n";
        exit(0);
    }
    echo "order {$order} placed: its confirmation mail and partner webhook are claimed, herald sends them\n";
    exit(0);
}

if ($command === 'check') {
    $messages = $argv[2] ?? exit($usage);
    $orders = array_map('intval', array_slice($argv, 3));
    $inspector = new HeraldInspector(app(Herald\Herald::class));
    $deadline = microtime(true) + 30;
    do {
        $pending = array_filter($inspector->deliveries(), static fn ($d) => in_array($d['state'], ['pending', 'sending'], true));
        $mails = is_file($messages) ? array_map(static fn ($l) => json_decode($l, true), file($messages, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES)) : [];
        $applied = DB::table('partner_orders')->count();
        $done = $pending === [] && count($mails) >= count($orders) && $applied >= count($orders);
    } while (!$done && microtime(true) < $deadline && usleep(100_000) === null);
    $problems = [];
    foreach ($orders as $order) {
        $mine = array_values(array_filter($mails, static fn ($m) => str_contains((string) $m['subject'], "#{$order} ")));
        $raw = count($mine) === 1 ? (string) base64_decode($mine[0]['raw']) : '';
        if (count($mine) !== 1) {
            $problems[] = "order {$order}: " . count($mine) . ' confirmation mails reached the mail server, not 1';
        } elseif (!preg_match('/filename=invoice-' . $order . '\.pdf\r\n\r\n([A-Za-z0-9+\/=\r\n]+?)\r\n\r?\n?--/', $raw, $pdf)
            || base64_decode($pdf[1]) !== OrderConfirmation::invoice($order, 4200 + $order)) {
            $problems[] = "order {$order}: the invoice did not arrive intact";
        } else {
            printf("order %d: one confirmation mail to %s (Message-ID %s), invoice attached, intact\n", $order, implode(', ', $mine[0]['rcpt_tos']), $mine[0]['message_id']);
        }
        $webhooks = DB::table('partner_orders')->where('order_id', $order)->count();
        if ($webhooks !== 1) {
            $problems[] = "order {$order}: the partner applied {$webhooks} webhooks, not 1";
        } else {
            echo "order {$order}: the partner applied its webhook once\n";
        }
    }
    $unexpected = count($mails) - count($orders);
    if ($unexpected !== 0 || DB::table('partner_orders')->whereNotIn('order_id', $orders)->exists()) {
        $problems[] = "something was sent for an order that was not placed ({$unexpected} extra mails)";
    }
    if ($pending !== []) {
        $problems[] = count($pending) . ' deliveries still pending';
    }
    if ($problems !== []) {
        fwrite(STDERR, implode("\n", $problems) . "\n");
        exit(1);
    }
    echo "nothing was sent for a declined order\n";
    exit(0);
}

exit($usage);
