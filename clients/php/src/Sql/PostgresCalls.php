<?php

declare(strict_types=1);

namespace Herald\Sql;

/**
 * PostgreSQL: functions in herald's schema inside the application's database, called with
 * named parameters; an argument left out takes the function's default (passing NULL for
 * `cost` would be refused, so only the given ones are written).
 */
final class PostgresCalls implements Calls
{
    public function __construct(private readonly string $schema = 'herald')
    {
        if ($schema === '') {
            throw new \InvalidArgumentException("herald's PostgreSQL schema must not be empty");
        }
    }

    public function submit(SqlConnection $db, Submission $s): array
    {
        $args = [
            'tenant' => $s->tenant,
            'operation_key' => $s->operationKey,
            'channel' => $s->channel,
            'recipient' => $s->recipient,
            'payload' => $s->payload,
            'quota_key' => $s->quotaKey,
            'send_at' => $s->sendAt,
        ];
        $named = [];
        $bindings = [];
        // With a traceparent, the call reads it from `herald.traceparent`, set first (the
        // function depends on the setting's row, so it runs after) and cleared after
        // (the select list is computed after the call), all in this one statement.
        $traced = $s->traceparent !== null;
        if ($traced) {
            $bindings[] = $s->traceparent;
        }
        foreach ($args as $name => $value) {
            if ($value !== null) {
                $named[] = $traced && $name === 'tenant'
                    ? "{$name} => CAST(? AS text) || left(t.traceparent, 0)"
                    : "{$name} => CAST(? AS text)";
                $bindings[] = $value;
            }
        }
        if ($s->cost !== null) {
            $named[] = 'cost => CAST(? AS bigint)';
            $bindings[] = $s->cost;
        }
        if ($s->maxAttempts !== null) {
            $named[] = 'max_attempts => CAST(? AS integer)';
            $bindings[] = $s->maxAttempts;
        }
        // v2 when this client computed the fingerprint (hex: the bytes cross no text encoding).
        if ($s->fingerprint !== null) {
            $named[] = "fingerprint => decode(CAST(? AS text), 'hex')";
            $bindings[] = bin2hex($s->fingerprint);
        }
        $call = sprintf(
            '%s.herald_submit_%s(%s)',
            $this->quotedSchema(),
            $s->fingerprint !== null ? 'v2' : 'v1',
            implode(', ', $named),
        );
        $sql = $traced
            ? "SELECT s.status, CAST(s.delivery_id AS text) AS delivery_id, s.field, s.code,
                      set_config('herald.traceparent', '', true) AS cleared
                 FROM (SELECT set_config('herald.traceparent', CAST(? AS text), true) AS traceparent) t
                 CROSS JOIN LATERAL {$call} s"
            : "SELECT status, CAST(delivery_id AS text) AS delivery_id, field, code FROM {$call}";
        $row = $db->selectOne($sql, $bindings) ?? throw new \UnexpectedValueException('herald\'s submit returned no row');
        return [
            'status' => (string) $row['status'],
            'delivery_id' => $row['delivery_id'] === null ? null : (string) $row['delivery_id'],
            'field' => $row['field'] === null ? null : (string) $row['field'],
            'code' => $row['code'] === null ? null : (string) $row['code'],
        ];
    }

    public function receipt(SqlConnection $db, string $scope, string $operationId): array
    {
        $sql = sprintf(
            'SELECT status, field, code FROM %s.herald_receipt_v1(scope => CAST(? AS text), operation_id => CAST(? AS text))',
            $this->quotedSchema(),
        );
        $row = $db->selectOne($sql, [$scope, $operationId])
            ?? throw new \UnexpectedValueException('herald_receipt_v1 returned no row');
        return [
            'status' => (string) $row['status'],
            'field' => $row['field'] === null ? null : (string) $row['field'],
            'code' => $row['code'] === null ? null : (string) $row['code'],
        ];
    }

    public function wakeTargets(SqlConnection $db): array
    {
        // herald_submit_v1/v2 NOTIFY herald_due: the commit itself wakes the workers.
        return [];
    }

    public function table(string $name): string
    {
        return $this->quotedSchema() . '.' . self::quote($name);
    }

    public function uuidText(string $column): string
    {
        return "CAST({$column} AS text)";
    }

    public function uuidParam(): string
    {
        return 'CAST(? AS uuid)';
    }

    private function quotedSchema(): string
    {
        return self::quote($this->schema);
    }

    private static function quote(string $identifier): string
    {
        return '"' . str_replace('"', '""', $identifier) . '"';
    }
}
