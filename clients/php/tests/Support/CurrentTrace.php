<?php

declare(strict_types=1);

namespace Herald\Tests\Support;

/**
 * `herald.traceparent` for the tests: what an application's tracing would answer as the
 * current trace (its OpenTelemetry span's context), or a failure to ask.
 */
final class CurrentTrace
{
    public static ?string $traceparent = null;
    public static bool $fails = false;

    public function __invoke(): ?string
    {
        if (self::$fails) {
            throw new \RuntimeException('the tracing SDK is not ready');
        }
        return self::$traceparent;
    }
}
