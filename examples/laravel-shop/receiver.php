<?php

// The fulfilment partner's webhook endpoint, under `php -S` (./run starts it): verifies the
// Standard Webhooks signature with the shop's secret (HERALD_WEBHOOK_SECRET) and applies
// each webhook once per webhook-id, in its own transaction, through WebhookReceiver.

declare(strict_types=1);

require __DIR__ . '/bootstrap.php';

use Herald\Exception\WebhookVerificationFailed;
use Herald\Webhook\WebhookMessage;
use Herald\Webhook\WebhookReceiver;
use Illuminate\Http\Request;
use Illuminate\Support\Facades\DB;

try {
    $result = app(WebhookReceiver::class)->handleRequest(Request::capture(), static function (WebhookMessage $message): void {
        $event = json_decode($message->body, true, 512, JSON_THROW_ON_ERROR);
        DB::table('partner_orders')->insert(['webhook_id' => $message->id, 'order_id' => $event['order']]);
    });
} catch (WebhookVerificationFailed $e) {
    http_response_code(401);
    echo $e->reason;
    return;
}
echo $result->applied ? 'applied' : 'already applied';
