<?php

declare(strict_types=1);

namespace Herald\Sql;

/**
 * MariaDB: procedures in herald's own database on the application's server (one InnoDB
 * transaction spans databases), called positionally with NULL for a default; the answer
 * comes back in session variables, read by a second statement on the same connection.
 */
final class MariaDbCalls implements Calls
{
    public function __construct(private readonly string $database = 'herald')
    {
        if ($database === '') {
            throw new \InvalidArgumentException("herald's MariaDB database must not be empty");
        }
    }

    public function submit(SqlConnection $db, Submission $s): array
    {
        // v2 when this client computed the fingerprint (hex: the bytes cross no text charset).
        $v2 = $s->fingerprint !== null;
        // A traceparent goes in the session variable the call reads, cleared again by the
        // read of the answer, so that no later call on this connection inherits it.
        $traced = $s->traceparent !== null;
        if ($traced) {
            $db->statement('SET @herald_traceparent = ?', [$s->traceparent]);
        }
        $db->statement(
            sprintf(
                'CALL %s.%s(?, ?, ?, ?, ?, ?, ?, ?, ?, %s@herald_status, @herald_delivery_id, @herald_field, @herald_code)',
                $this->quotedDatabase(),
                $v2 ? 'submit_v2' : 'submit_v1',
                $v2 ? 'UNHEX(?), ' : '',
            ),
            [
                $s->tenant, $s->operationKey, $s->channel, $s->recipient, $s->payload,
                $s->quotaKey, $s->cost, $s->sendAt, $s->maxAttempts,
                ...($v2 ? [bin2hex($s->fingerprint)] : []),
            ],
        );
        $row = $db->selectOne(
            'SELECT @herald_status AS status, @herald_delivery_id AS delivery_id, @herald_field AS field, @herald_code AS code'
            . ($traced ? ', (@herald_traceparent := NULL) AS cleared' : ''),
        ) ?? throw new \UnexpectedValueException('the submit left no answer');
        return [
            'status' => (string) $row['status'],
            'delivery_id' => $row['delivery_id'] === null ? null : strtolower((string) $row['delivery_id']),
            'field' => $row['field'] === null ? null : (string) $row['field'],
            'code' => $row['code'] === null ? null : (string) $row['code'],
        ];
    }

    public function receipt(SqlConnection $db, string $scope, string $operationId): array
    {
        $db->statement(
            sprintf('CALL %s.receipt_v1(?, ?, @herald_status, @herald_field, @herald_code)', $this->quotedDatabase()),
            [$scope, $operationId],
        );
        $row = $db->selectOne('SELECT @herald_status AS status, @herald_field AS field, @herald_code AS code')
            ?? throw new \UnexpectedValueException('receipt_v1 left no answer');
        return [
            'status' => (string) $row['status'],
            'field' => $row['field'] === null ? null : (string) $row['field'],
            'code' => $row['code'] === null ? null : (string) $row['code'],
        ];
    }

    public function table(string $name): string
    {
        return $this->quotedDatabase() . '.' . self::quote($name);
    }

    public function uuidText(string $column): string
    {
        return "LOWER(INSERT(INSERT(INSERT(INSERT(HEX({$column}), 9, 0, '-'), 14, 0, '-'), 19, 0, '-'), 24, 0, '-'))";
    }

    public function uuidParam(): string
    {
        return "UNHEX(REPLACE(?, '-', ''))";
    }

    public function wakeTargets(SqlConnection $db): array
    {
        $rows = $db->select(sprintf('CALL %s.wake_targets_v1()', $this->quotedDatabase()));
        return array_map(
            static fn (array $row): array => ['address' => (string) $row['address'], 'token' => (string) $row['token']],
            $rows,
        );
    }

    private function quotedDatabase(): string
    {
        return self::quote($this->database);
    }

    private static function quote(string $identifier): string
    {
        return '`' . str_replace('`', '``', $identifier) . '`';
    }
}
