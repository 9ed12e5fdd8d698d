<?php

declare(strict_types=1);

namespace Herald\Http;

use Herald\Exception\HttpError;

/**
 * One HTTP exchange through PHP's own stream wrapper (no curl, no Guzzle: nothing to
 * install). Status 0 is no answer: `refused` when the connection was never made.
 */
final class Reply
{
    /** Bound on an answer's size: herald's answers are small JSON documents. */
    public const BODY_MAX_BYTES = 1 << 20;

    private function __construct(
        public readonly int $status,
        public readonly string $body,
        public readonly ?string $retryAfter = null,
        public readonly string $transportError = '',
        public readonly bool $refused = false,
    ) {
    }

    /** @param array<string, string> $headers */
    public static function exchange(string $method, string $url, string $apiKey, ?string $body, array $headers, float $timeout): self
    {
        $lines = ["Authorization: Bearer {$apiKey}", 'Accept: application/json', 'Connection: close'];
        if ($body !== null) {
            $lines[] = 'Content-Type: application/json';
        }
        foreach ($headers as $name => $value) {
            if (preg_match('/[\r\n]/', $value)) {
                throw new \InvalidArgumentException("the {$name} header must not hold a line break");
            }
            $lines[] = "{$name}: {$value}";
        }
        $context = stream_context_create(['http' => [
            'method' => $method,
            'header' => implode("\r\n", $lines),
            'content' => $body ?? '',
            'timeout' => $timeout,
            'ignore_errors' => true,
            'follow_location' => 0,
            'protocol_version' => 1.1,
        ]]);
        $error = '';
        set_error_handler(static function (int $no, string $message) use (&$error): bool {
            $error = $message;
            return true;
        });
        try {
            $stream = fopen($url, 'rb', false, $context);
            $text = $stream === false ? false : stream_get_contents($stream, self::BODY_MAX_BYTES);
            $meta = $stream === false ? [] : stream_get_meta_data($stream);
            if ($stream !== false) {
                fclose($stream);
            }
        } finally {
            restore_error_handler();
        }
        if ($stream === false || $text === false) {
            // PHP's stream wrapper reports a failed connect only as a warning's text: a
            // refused connection (nothing was sent) is told from a lost answer by it.
            return new self(0, '', null, $error !== '' ? $error : 'no answer', str_contains($error, 'Connection refused'));
        }
        if (($meta['timed_out'] ?? false) === true) {
            return new self(0, '', null, 'timed out reading the answer');
        }
        $status = 0;
        $retryAfter = null;
        foreach ($meta['wrapper_data'] ?? [] as $line) {
            if (preg_match('#^HTTP/\S+\s+(\d{3})#', $line, $m)) {
                $status = (int) $m[1];
            } elseif (preg_match('/^retry-after:\s*(\S+)/i', $line, $m)) {
                $retryAfter = $m[1];
            }
        }
        return $status === 0 ? new self(0, '', null, 'no status line in the answer') : new self($status, $text, $retryAfter);
    }

    public function json(): array
    {
        $decoded = json_decode($this->body, true);
        return is_array($decoded) ? $decoded : [];
    }

    public function errorCode(): string
    {
        return (string) ($this->json()['error']['code'] ?? 'http_' . $this->status);
    }

    /** The field a 400 refused, when it names one. */
    public function errorField(): ?string
    {
        $field = $this->json()['error']['field'] ?? null;
        return is_string($field) ? $field : null;
    }

    /** Why that field was refused (`empty`, `control_character`, ...), when a 400 says. */
    public function errorReason(): ?string
    {
        $reason = $this->json()['error']['reason'] ?? null;
        return is_string($reason) ? $reason : null;
    }

    public function errorMessage(): string
    {
        return (string) ($this->json()['error']['message'] ?? substr($this->body, 0, 200));
    }

    public function error(): HttpError
    {
        return new HttpError($this->status, $this->errorCode(), $this->errorMessage());
    }
}
