<?php

declare(strict_types=1);

namespace Herald\Sql;

/**
 * herald's SQL API on one backend: how a submit and a receipt are called, and where
 * herald's tables are (for the test helper). Neither call raises inside the caller's
 * transaction except for concurrency errors; every answer is a row.
 */
interface Calls
{
    /** @return array{status: string, delivery_id: ?string, field: ?string, code: ?string} */
    public function submit(SqlConnection $db, Submission $s): array;

    /** @return array{status: string, field: ?string, code: ?string} */
    public function receipt(SqlConnection $db, string $scope, string $operationId): array;

    /**
     * Where herald's running workers hear wake-ups, for a caller to send each one datagram
     * after its commit (`Wake`); none where the database wakes them itself (PostgreSQL's
     * submit NOTIFYs).
     *
     * @return list<array{address: string, token: string}>
     */
    public function wakeTargets(SqlConnection $db): array;

    /** `name` qualified with herald's schema or database, quoted. */
    public function table(string $name): string;

    /** An SQL expression giving the UUID column `column` as lowercase hyphenated text. */
    public function uuidText(string $column): string;

    /** An SQL expression turning a bound UUID text (`?`) into the column's type. */
    public function uuidParam(): string;
}
