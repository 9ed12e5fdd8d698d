<?php

declare(strict_types=1);

namespace Herald\Webhook;

use Closure;
use Herald\Exception\WebhookVerificationFailed;
use Herald\Herald;
use Herald\OnceResult;

/**
 * The receiving half of exactly once: verify a webhook's Standard Webhooks signature, then
 * run its handler through `Herald::once` under its `webhook-id`, in the receiver's own
 * transaction. herald sends at least once (a lost answer is resent with the same
 * `webhook-id`); the receipt and the handler's writes commit together, so a resend finds
 * the receipt and the handler does not run again. A handler that throws rolls both back,
 * the receiver answers an error, and herald's retry runs it afresh.
 *
 * The receipt lives in herald's SQL API on the receiver's database (`herald migrate` on it).
 */
final class WebhookReceiver
{
    /** @var list<string> */
    private readonly array $secrets;
    /** @var Closure(): int */
    private readonly Closure $clock;

    /**
     * @param string|list<string> $secrets the tenant's `whsec_…` secret (and the previous one during a rotation)
     * @param (Closure(): int)|null $clock Unix seconds now; tests inject one
     */
    public function __construct(
        private readonly Herald $herald,
        string|array $secrets,
        private readonly string $scope = 'herald-webhook',
        private readonly int $toleranceSeconds = Signature::TOLERANCE_SECONDS,
        ?Closure $clock = null,
    ) {
        $this->secrets = array_values(array_filter((array) $secrets, static fn ($s) => $s !== ''));
        $this->clock = $clock ?? static fn (): int => time();
    }

    /**
     * @param array<string, string|list<string>> $headers any case, as PHP frameworks give them
     * @throws WebhookVerificationFailed
     */
    public function verify(array $headers, string $body): WebhookMessage
    {
        $id = self::header($headers, 'webhook-id');
        $timestamp = self::header($headers, 'webhook-timestamp');
        $signature = self::header($headers, 'webhook-signature');
        $ts = Signature::verify($this->secrets, $id, $timestamp, $signature, $body, ($this->clock)(), $this->toleranceSeconds);
        return new WebhookMessage($id, $ts, $body);
    }

    /**
     * Verifies, then runs `$handler(WebhookMessage)` once per `webhook-id`.
     *
     * @param callable(WebhookMessage): mixed $handler
     * @throws WebhookVerificationFailed before anything runs
     */
    public function handle(array $headers, string $body, callable $handler, int $attempts = 1): OnceResult
    {
        $message = $this->verify($headers, $body);
        return $this->herald->once($this->scope, $message->id, static fn () => $handler($message), $attempts);
    }

    /**
     * `handle` for a Symfony/Laravel request (`$request->headers`, `$request->getContent()`).
     *
     * @param callable(WebhookMessage): mixed $handler
     */
    public function handleRequest(object $request, callable $handler, int $attempts = 1): OnceResult
    {
        /** @var \Symfony\Component\HttpFoundation\Request $request */
        return $this->handle($request->headers->all(), (string) $request->getContent(), $handler, $attempts);
    }

    /** @param array<string, string|list<string>> $headers */
    private static function header(array $headers, string $name): string
    {
        foreach ($headers as $key => $value) {
            if (strcasecmp((string) $key, $name) === 0 || strcasecmp(str_replace('_', '-', (string) $key), "http-{$name}") === 0) {
                $value = is_array($value) ? implode(' ', $value) : (string) $value;
                if ($value !== '') {
                    return $value;
                }
            }
        }
        throw new WebhookVerificationFailed('missing_header', "the {$name} header is missing");
    }
}
