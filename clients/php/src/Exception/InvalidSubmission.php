<?php

declare(strict_types=1);

namespace Herald\Exception;

/**
 * herald refused a request's content: `field` names what (tenant, operation_key, channel,
 * to, payload, quota_key, cost, send_at, max_attempts, scope, operation_id) and
 * `errorCode` why, with the codes every face of herald uses (README.md, "Refusal codes"):
 * empty, too_long, control_character, not_utf8, not_a_uuid, not_granted, unknown_tenant,
 * out_of_range, not_a_time, and for a payload the JSON rules' syntax, duplicate_key, nul,
 * lone_surrogate, number_too_large, number_too_precise, too_deep (and not_encodable for a
 * value PHP cannot encode). Over HTTP also not_configured (channel), not_a_url,
 * not_an_address (to) and not_an_email (payload). Nothing was written, and the database
 * call raised nothing: the caller's transaction is still usable.
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
