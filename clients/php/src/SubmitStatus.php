<?php

declare(strict_types=1);

namespace Herald;

/**
 * What a submit did. `invalid` is not a status: it is thrown as InvalidSubmission, after the
 * call returned (the database call itself raises nothing, the transaction stays usable).
 */
enum SubmitStatus: string
{
    /** A new delivery: claimed and its cost reserved, in the caller's transaction. */
    case Created = 'created';
    /** The same request again (through SQL or HTTP): the existing delivery, nothing written. */
    case Duplicate = 'duplicate';
    /** The operation key was used before with another request: nothing written. */
    case Reused = 'reused';
    /** The tenant's account cannot cover the cost: no claim, nothing written. */
    case QuotaExhausted = 'quota_exhausted';
}
