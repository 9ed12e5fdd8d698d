<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

use Herald\Http\Reply;

/**
 * A fresh tenant per test, made through herald's admin API, with the quota accounts it
 * asks for. Its webhook secret is written where the PHP webhook receiver finds it.
 */
final class Tenant
{
    private function __construct(
        public readonly string $id,
        public readonly string $apiKey,
        public readonly string $secret,
    ) {
    }

    /** @param array<string, int> $quotas quota key => units granted */
    public static function create(array $quotas = ['webhook' => 100]): self
    {
        $name = 'php-' . bin2hex(random_bytes(6));
        $tenant = self::admin('POST', '/v1/tenants', ['name' => $name], 201);
        $self = new self($tenant['id'], $tenant['api_key'], $tenant['webhook_secret']);
        foreach ($quotas as $key => $amount) {
            $self->grant($key, $amount);
        }
        $dir = Env::workDir() . '/secrets';
        if (!is_dir($dir)) {
            @mkdir($dir, 0o700, true);
        }
        file_put_contents("{$dir}/{$self->id}", $self->secret);
        return $self;
    }

    public function grant(string $quotaKey, int $amount): void
    {
        self::admin('POST', "/v1/tenants/{$this->id}/quotas/" . rawurlencode($quotaKey) . '/grant', ['amount' => $amount], 200);
    }

    public static function secretOf(string $tenantId): string
    {
        $file = Env::workDir() . '/secrets/' . basename($tenantId);
        return is_file($file) ? (string) file_get_contents($file) : '';
    }

    private static function admin(string $method, string $path, array $body, int $expected): array
    {
        $reply = Reply::exchange($method, Env::heraldUrl() . $path, Env::adminKey(), json_encode($body), [], 10.0);
        if ($reply->status !== $expected) {
            throw new \RuntimeException("{$method} {$path}: herald answered {$reply->status} {$reply->body} ({$reply->transportError})");
        }
        return $reply->json();
    }
}
