<?php

declare(strict_types=1);

namespace Herald;

use Herald\Sql\Calls;
use Herald\Sql\SqlConnection;

/**
 * Wakes herald's workers in other processes after a commit, on MariaDB (PostgreSQL's
 * submit NOTIFYs): each running worker listens on a UDP port it keeps in herald's
 * database with a random token (`wake_targets_v1`), and a datagram carrying that token
 * makes it look for due work at once instead of at its next poll. The targets read are
 * reused for two seconds by this PHP process. Fire and forget: nothing here throws or
 * waits, and a datagram lost leaves the delivery to herald's poll (1 s).
 */
final class Wake
{
    /** What every wake datagram starts with; the worker's token follows. */
    public const DATAGRAM_PREFIX = 'herald-wake/1 ';

    /** How long this process reuses the targets it read (herald's own senders: the same). */
    private const TARGETS_MAX_AGE_NS = 2_000_000_000;

    /**
     * At most one round of datagrams per this interval per PHP process: a woken worker
     * keeps looking for a quarter of a second, which covers the commits in between.
     */
    private const SEND_EVERY_NS = 5_000_000;

    /** @var array<string, array{at: int, targets: list<array{address: string, token: string}>}> */
    private static array $targets = [];

    /** @var array<string, int> per database, when the last round was sent */
    private static array $sentAt = [];

    /** One datagram to each running worker of the herald database `$namespace`. */
    public static function send(Calls $calls, SqlConnection $db, string $namespace): void
    {
        try {
            $now = hrtime(true);
            if ($now - (self::$sentAt[$namespace] ?? PHP_INT_MIN / 2) < self::SEND_EVERY_NS) {
                return;
            }
            self::$sentAt[$namespace] = $now;
            $cached = self::$targets[$namespace] ?? null;
            if ($cached === null || $now - $cached['at'] >= self::TARGETS_MAX_AGE_NS) {
                try {
                    $targets = $calls->wakeTargets($db);
                } catch (\Throwable) {
                    // No EXECUTE on wake_targets_v1 (a grant from before it: `herald
                    // migrate` grants it again), or the connection is gone: poll.
                    $targets = [];
                }
                $cached = self::$targets[$namespace] = ['at' => $now, 'targets' => $targets];
            }
            foreach ($cached['targets'] as $target) {
                $socket = @stream_socket_client('udp://' . $target['address'], $errno, $error, 0.0);
                if ($socket === false) {
                    continue;
                }
                @fwrite($socket, self::DATAGRAM_PREFIX . $target['token']);
                @fclose($socket);
            }
        } catch (\Throwable) {
            // Never fails the application.
        }
    }

    /** Forgets the targets read (tests: a worker started since). */
    public static function forget(): void
    {
        self::$targets = [];
        self::$sentAt = [];
    }
}
