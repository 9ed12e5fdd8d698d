<?php

declare(strict_types=1);

namespace Herald\Laravel\Facades;

use Illuminate\Support\Facades\Facade;

/**
 * `Herald::submit(...)` and `Herald::once(...)` on the configured connection.
 *
 * @method static \Herald\SubmitResult submit(string $operationKey, string $channel, string $to, string|array|object $payload, ?string $tenant = null, ?string $quotaKey = null, ?int $cost = null, \DateTimeInterface|string|null $sendAt = null, ?int $maxAttempts = null)
 * @method static \Herald\OnceResult once(string $scope, string $operationId, callable $apply, int $attempts = 1)
 * @see \Herald\Herald
 */
final class Herald extends Facade
{
    protected static function getFacadeAccessor(): string
    {
        return \Herald\Herald::class;
    }
}
