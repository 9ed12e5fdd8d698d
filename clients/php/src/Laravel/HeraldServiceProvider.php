<?php

declare(strict_types=1);

namespace Herald\Laravel;

use Herald\Herald;
use Herald\Http\HttpClient;
use Herald\Laravel\Mail\SwiftTransport;
use Herald\Laravel\Mail\SymfonyTransport;
use Herald\Laravel\Notifications\HeraldChannel;
use Herald\Mail\HeraldMailer;
use Herald\Webhook\WebhookReceiver;
use Illuminate\Support\ServiceProvider;

/**
 * Binds `Herald` (the `Herald` facade) to the configured connection, and the HTTP client and
 * webhook receiver from config/herald.php. The connection is looked up on every call, so
 * `DB::purge()` and long-running workers get the live one. Adds the mailer `herald`
 * (`MAIL_MAILER=herald`: every mail becomes an email delivery claimed in the current
 * transaction; config/mail.php may name a `tenant`, `quota_key` or `channel` in a
 * `mailers.herald` entry `['transport' => 'herald', …]`) and the notification channel `herald`.
 */
final class HeraldServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        $this->mergeConfigFrom(dirname(__DIR__, 2) . '/config/herald.php', 'herald');
        // `MAIL_MAILER=herald` is the one line: config/mail.php needs no `herald` entry of its
        // own (one there, e.g. with a `tenant` or `quota_key`, is kept).
        $config = $this->app['config'];
        if ($config->get('mail.mailers.herald') === null) {
            $config->set('mail.mailers.herald', ['transport' => 'herald']);
        }

        $this->app->singleton(Herald::class, function ($app): Herald {
            $config = $app['config']['herald'];
            $name = $config['connection'] ?? null;
            return Herald::laravel(
                static fn () => $app['db']->connection($name),
                schema: (string) ($config['schema'] ?? 'herald'),
                database: (string) ($config['database'] ?? 'herald'),
                tenant: $config['tenant'] ?? null,
                maxAttempts: array_key_exists('max_attempts', $config)
                    ? ($config['max_attempts'] === null ? null : (int) $config['max_attempts'])
                    : Herald::MAX_ATTEMPTS_DEFAULT,
                currentTrace: self::currentTrace($config['traceparent'] ?? null, $app),
            );
        });
        $this->app->alias(Herald::class, 'herald');

        $this->app->singleton(HttpClient::class, function ($app): HttpClient {
            $config = $app['config']['herald'];
            if (($config['key'] ?? null) === null || $config['key'] === '') {
                throw new \InvalidArgumentException('herald.key (HERALD_KEY) is not set: the HTTP client needs the tenant\'s API key');
            }
            return new HttpClient((string) $config['url'], (string) $config['key']);
        });

        $this->app->singleton(WebhookReceiver::class, function ($app): WebhookReceiver {
            $config = $app['config']['herald'];
            $secrets = array_map('trim', explode(',', (string) ($config['webhook_secret'] ?? '')));
            return new WebhookReceiver(
                $app->make(Herald::class),
                $secrets,
                scope: (string) ($config['webhook_scope'] ?? 'herald-webhook'),
                toleranceSeconds: (int) ($config['webhook_tolerance'] ?? 300),
            );
        });
    }

    public function boot(): void
    {
        $this->callAfterResolving('mail.manager', static function ($manager, $app): void {
            $manager->extend('herald', static function (array $config = []) use ($app) {
                $mailer = new HeraldMailer(
                    $app->make(Herald::class),
                    tenant: $config['tenant'] ?? null,
                    quotaKey: $config['quota_key'] ?? null,
                    channel: (string) ($config['channel'] ?? 'email'),
                );
                // Laravel 8 mails through SwiftMailer; 9 and later through Symfony Mailer.
                return class_exists(\Illuminate\Mail\Transport\Transport::class)
                    ? new SwiftTransport($mailer)
                    : new SymfonyTransport($mailer);
            });
        });
        $this->callAfterResolving(\Illuminate\Notifications\ChannelManager::class, static function ($channels, $app): void {
            $channels->extend('herald', static fn () => new HeraldChannel($app->make(Herald::class)));
        });
        if (method_exists($this->app, 'configPath')) {
            $this->publishes([dirname(__DIR__, 2) . '/config/herald.php' => $this->app->configPath('herald.php')], 'herald-config');
        }
    }

    /**
     * `herald.traceparent`: the name of an invokable class (made by the container when a
     * submit asks) or a static callable (`[Tracing::class, 'current']`), never a closure, so
     * `php artisan config:cache` keeps working.
     *
     * @return (\Closure(): ?string)|null
     */
    private static function currentTrace(mixed $setting, $app): ?\Closure
    {
        if ($setting === null || $setting === '') {
            return null;
        }
        if (is_string($setting) && class_exists($setting) && method_exists($setting, '__invoke')) {
            return static fn (): mixed => $app->make($setting)();
        }
        if (is_callable($setting)) {
            return \Closure::fromCallable($setting);
        }
        throw new \InvalidArgumentException('herald.traceparent must name an invokable class or a static callable, got ' . json_encode($setting));
    }
}
