<?php

// herald's settings for a Laravel application (`php artisan vendor:publish --tag=herald-config`).

return [
    // The connection whose transactions herald's calls join: the one your business writes
    // use (null: the default connection). A claim is atomic with the writes of this
    // connection's transaction only.
    'connection' => env('HERALD_CONNECTION'),

    // Where `herald migrate` put herald's objects: a schema inside the application's
    // database on PostgreSQL, a database of its own on the application's MariaDB server.
    'schema' => env('HERALD_SCHEMA', 'herald'),
    'database' => env('HERALD_DATABASE', 'herald'),

    // The tenant of a submit that names none (single-tenant applications).
    'tenant' => env('HERALD_TENANT'),

    // The attempts of a submit that says none: herald's default is 8, and `herald serve`
    // reads the same variable. Known here, the request's fingerprint is computed in PHP and
    // the database does not walk the payload. null: herald's shared setting
    // (`herald settings set --max-attempts`), which only the database knows, so the
    // fingerprint is computed in SQL instead (slower for large payloads).
    'max_attempts' => env('HERALD_MAX_ATTEMPTS', 8),

    // The current W3C trace, for submits that pass none (the `herald` mailer's, the
    // notification channel's): an invokable class (made by the container) or a static
    // callable returning the current `traceparent` or null. With herald's traces on, each
    // delivery's attempts then join the request that sent it. With OpenTelemetry's PHP API,
    // e.g. a class whose __invoke() formats Span::getCurrent()->getContext()
    // ('00-' . traceId . '-' . spanId . '-01' when it is valid). null: none.
    'traceparent' => null,

    // herald's HTTP API, for the HttpClient (applications that do not share its database).
    'url' => env('HERALD_URL', 'http://127.0.0.1:8080'),
    'key' => env('HERALD_KEY'),

    // The webhook receiver: the sender's `whsec_…` secret(s), comma separated during a
    // rotation, and the scope its receipts are recorded under.
    'webhook_secret' => env('HERALD_WEBHOOK_SECRET'),
    'webhook_scope' => env('HERALD_WEBHOOK_SCOPE', 'herald-webhook'),
    'webhook_tolerance' => (int) env('HERALD_WEBHOOK_TOLERANCE', 300),
];
