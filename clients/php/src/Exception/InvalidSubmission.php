<?php

declare(strict_types=1);

namespace Herald\Exception;

/**
 * herald refused a request's content: `field` names what (tenant, operation_key, channel,
 * to, payload, quota_key, cost, send_at, max_attempts, scope, operation_id) and
 * `errorCode` why (empty, too_long, control_character, not_a_uuid, not_granted,
 * unknown_tenant, syntax, duplicate_key, out_of_range, not_a_time, ...). Nothing was
 * written, and the database call raised nothing: the caller's transaction is still usable.
 */
final class InvalidSubmission extends HeraldException
{
    public function __construct(
        public readonly ?string $field,
        public readonly string $errorCode,
        ?string $message = null,
    ) {
        parent::__construct($message ?? sprintf('herald refused %s: %s', $field ?? 'the request', $errorCode));
    }
}
