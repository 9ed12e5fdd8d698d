<?php

// A webhook receiver application under `php -S` (tests/Support/PhpServer.php starts it):
// POST /receive/{tenant}/{mode} verifies the request with the tenant's secret and runs its
// handler through WebhookReceiver (once per webhook-id, in this application's transaction).
// Every request is logged first, committed on its own. Modes: `ok` answers 200;
// `lost-ack` answers 503 to the first request of a webhook-id after the handler has
// committed (a lost answer, as a timeout would be), so herald sends it again; `terminal`
// refuses with 422. POST /proxy-lossy/... forwards to herald and loses the first answer
// per Idempotency-Key (an `outcome_unknown` after a real commit), for the HTTP client.

declare(strict_types=1);

require __DIR__ . '/../bootstrap.php';

use Herald\Exception\WebhookVerificationFailed;
use Herald\Http\Reply;
use Herald\Tests\Support\App;
use Herald\Tests\Support\Env;
use Herald\Tests\Support\Tenant;
use Herald\Webhook\WebhookMessage;
use Herald\Webhook\WebhookReceiver;
use Illuminate\Http\Request;
use Illuminate\Support\Facades\DB;

$path = (string) parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH);
$body = (string) file_get_contents('php://input');

if (str_starts_with($path, '/proxy-lossy/')) {
    $key = $_SERVER['HTTP_IDEMPOTENCY_KEY'] ?? '';
    $bearer = substr($_SERVER['HTTP_AUTHORIZATION'] ?? '', strlen('Bearer '));
    $reply = Reply::exchange($_SERVER['REQUEST_METHOD'], Env::heraldUrl() . substr($path, strlen('/proxy-lossy')), $bearer, $body, ['Idempotency-Key' => $key], 10.0);
    $seen = Env::workDir() . '/lossy-' . hash('sha256', $key);
    if (!is_file($seen)) {
        touch($seen);
        http_response_code(503);
        header('Content-Type: application/json');
        echo json_encode(['error' => ['code' => 'outcome_unknown', 'message' => 'the answer was lost on the way']]);
        return;
    }
    http_response_code($reply->status);
    header('Content-Type: application/json');
    echo $reply->body;
    return;
}

if (!preg_match('#^/receive/([0-9a-f-]{36})/(ok|lost-ack|terminal)$#', $path, $m)) {
    http_response_code(404);
    echo 'no such hook';
    return;
}
[, $tenant, $mode] = $m;
App::boot();
$id = (string) ($_SERVER['HTTP_WEBHOOK_ID'] ?? '');
DB::table('receiver_requests')->insert(['webhook_id' => $id, 'mode' => $mode, 'body' => $body]);
if ($mode === 'terminal') {
    http_response_code(422);
    echo 'this receiver refuses the request';
    return;
}

$receiver = new WebhookReceiver(app(\Herald\Herald::class), Tenant::secretOf($tenant), scope: "webhooks-{$tenant}");
try {
    $result = $receiver->handleRequest(Request::capture(), static function (WebhookMessage $message): void {
        DB::table('receiver_effects')->insert(['webhook_id' => $message->id, 'body' => $message->body]);
    });
} catch (WebhookVerificationFailed $e) {
    http_response_code(401);
    echo $e->reason;
    return;
}
if ($mode === 'lost-ack' && DB::table('receiver_requests')->where('webhook_id', $id)->count() === 1) {
    http_response_code(503);
    echo 'the effect committed, and this answer is lost';
    return;
}
http_response_code(200);
echo $result->applied ? 'applied' : 'duplicate';
