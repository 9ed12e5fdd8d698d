<?php

declare(strict_types=1);

namespace Herald;

use Herald\Exception\InvalidSubmission;

/**
 * herald's rule for text, checked before any call leaves PHP: bytes that are not UTF-8
 * (a cut character, an encoded surrogate) and NUL never reach a driver. PDO's PostgreSQL
 * driver cuts a string at NUL, so "order-7\0-a" and "order-7\0-b" would become one
 * identity; PostgreSQL refuses bytes that are not UTF-8 with an error that aborts the
 * caller's transaction. Both are refused here as InvalidSubmission, with the codes every
 * face uses (`not_utf8`, `control_character`); the database checks everything else.
 *
 * @internal
 */
final class Text
{
    /** Refuses `$value` of `$field` that is not UTF-8, or (for a name) holds a control character. */
    public static function check(string $field, string $value, bool $name = true): void
    {
        // PCRE's UTF check refuses cut, overlong and surrogate sequences.
        if (preg_match('//u', $value) !== 1) {
            throw new InvalidSubmission($field, 'not_utf8', "herald refused {$field}: its bytes are not UTF-8");
        }
        // A name (key, channel, recipient, quota key, scope, operation id) holds no control
        // character at all (Unicode Cc, as herald's text rule) nor bidirectional formatting
        // character (it reorders the text around it when shown); a payload no NUL, the one
        // a driver would cut at (herald's JSON rules refuse the rest of them).
        $pattern = $name
            ? '/[\x{00}-\x{1f}\x{7f}-\x{9f}\x{061c}\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}]/u'
            : '/\x{00}/u';
        if (preg_match($pattern, $value) === 1) {
            throw new InvalidSubmission($field, 'control_character', "herald refused {$field}: it holds a control character");
        }
    }

    /** @param array<string, ?string> $fields field => value (null: herald's default) */
    public static function checkAll(array $fields): void
    {
        foreach ($fields as $field => $value) {
            if ($value !== null) {
                self::check($field, $value, $field !== 'payload');
            }
        }
    }
}
