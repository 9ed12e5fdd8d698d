<?php

declare(strict_types=1);

namespace Herald;

use Herald\Exception\InvalidSubmission;

/**
 * herald's request fingerprint, version 2 (ARCHITECTURE.md, "The fingerprint"), computed
 * in PHP so that an SQL submit can hand it over instead of having the database walk the
 * payload: SHA-256 of the UTF-8 bytes of the canonical text of
 * `{channel, cost, max_attempts, payload, quota_key, send_at, to}`, defaults resolved.
 *
 * The payload is read by this class's own parser, not by `json_decode`: that one turns
 * `18446744073709551616` and `0.30000000000000001` into floats, accepts a duplicate key,
 * `\u0000` and a lone surrogate, and nests 512 levels, where herald's rules
 * (herald_core::json) keep every number's exact value and refuse those. A payload herald
 * refuses is refused here with herald's code. Three readers, one verdict: parse() follows
 * herald_core::json step for step, byte by byte, and names the first fault in the text as
 * it does; quick() only speeds up the common payload (one regular expression splits the
 * text into tokens, a loop without recursion builds the form) and hands anything unusual
 * or wrong to parse(); decoded() speeds up the commoner one still, by PHP's own JSON
 * functions, where they are exact, and hands the rest to quick(). tests/FingerprintTest.php
 * checks all three against every golden vector, and decoded() against parse() on generated
 * payloads.
 */
final class Fingerprint
{
    /** Deepest nesting of arrays and objects (herald's JSON_DEPTH_MAX: MariaDB reads 31). */
    public const DEPTH_MAX = 31;

    /** Most digits of a number's exact value before and after its point: DECIMAL(65,30). */
    public const INTEGER_DIGITS_MAX = 35;
    public const FRACTION_DIGITS_MAX = 30;

    /** The longest text quick() reads: herald's PAYLOAD_BYTES_MAX. */
    private const QUICK_BYTES_MAX = 64 * 1024;

    /**
     * Exponents are clamped here, as herald does: far beyond any that the digits of a text
     * could bring back within the limits, and far from PHP_INT_MAX.
     */
    private const EXPONENT_SATURATED = 1 << 40;

    /**
     * quick()'s tokens, each right after the one before (`\G`): group 1 the `,` or `:`
     * before it, if any (whitespace around it skipped); group 2 the token: a bracket, a
     * literal, a string with well-formed escapes, a number; group 3 empty when the token is
     * its own canonical form (a string without escapes, a number within the limits without
     * exponent, `-0` or trailing fraction zeros), else a byte of it (a string's backslash,
     * a number's last digit) and parse()'s rules write it.
     */
    private const TOKEN = '/\G[ \t\n\r]*+([,:]?+)[ \t\n\r]*+(?|([\[\]{}]|true|false|null'
        . '|(?:0|-?[1-9][0-9]{0,34}|-?(?:0|[1-9][0-9]{0,34})\.[0-9]{0,29}[1-9])(?![0-9.eE]))'
        . '|("(?:[^"\\\\\x00-\x1f]++|(\\\\)(?:["\\\\\/bfnrt]|u[0-9a-fA-F]{4}))*+")'
        . '|(-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][+-]?+[0-9]++)?+)(?<=([0-9])))/';

    /**
     * A run of plain bytes inside a string: all but `"`, `\` and U+0000–U+001F. A regular
     * expression, not strcspn(), which compares every byte with every byte of its mask.
     */
    private const PLAIN_RUN = '/[^"\\\\\x00-\x1f]*+/A';

    /** A byte a canonical string escapes. */
    private const NEEDS_ESCAPE = '/["\\\\\x01-\x1f]/';

    /**
     * What decoded() leaves to the others: a run of 16 digits or dots (beyond 15 significant
     * digits a double's shortest form may not be the number's value), a digit before an exponent,
     * `\u0000` (PHP decodes it; herald refuses it), an empty object (json_decode() makes
     * it `[]`). In a string too: there it costs only the quicker reader's time.
     */
    private const NOT_DECODED = '/[0-9.]{16}|[0-9][eE]|\\\\u0000|\{[ \t\n\r]*+\}/';

    /** A key's end: json_decode() keeps a repeated key's last value, so decoded() counts. */
    private const KEY_END = '/"[ \t\n\r]*+:/';

    /** json_encode()'s short escapes, as herald writes them (an escaped `\` is kept). */
    private const SHORT_ESCAPES = ['\\\\' => '\\\\', '\\b' => '\\u0008', '\\f' => '\\u000c', '\\n' => '\\u000a', '\\r' => '\\u000d', '\\t' => '\\u0009'];

    /** quick()'s states: what the next token may be. */
    private const VALUE = 0;
    private const VALUE_OR_CLOSE = 1;
    private const KEY = 2;
    private const KEY_OR_CLOSE = 3;
    private const COLON = 4;
    private const COMMA_OR_CLOSE = 5;
    private const END = 6;

    /** @var array<string, string>|null canonical escapes: `"`, `\` and U+0001–U+001F */
    private static ?array $escapes = null;

    private int $at = 0;
    private readonly int $length;

    private function __construct(private readonly string $text)
    {
        $this->length = strlen($text);
    }

    /**
     * The fingerprint: the 32 raw bytes of SHA-256 (what herald stores and `submit_v2`
     * takes; `bin2hex()` gives the 64 hex digits the golden vectors list). `$maxAttempts`
     * has no default here: herald's is the database's shared setting (`herald_settings`),
     * which the caller must read.
     *
     * @param ?string $quotaKey null: the channel
     * @param ?int $cost null: 1
     * @param ?int $sendAtMs Unix milliseconds, null: now
     * @throws InvalidSubmission payload (herald's JSON codes, `not_utf8`), or `not_utf8` for
     *         channel, to or quota_key
     */
    public static function of(
        string $channel,
        string $to,
        string $payload,
        int $maxAttempts,
        ?string $quotaKey = null,
        ?int $cost = null,
        ?int $sendAtMs = null,
    ): string {
        return hash('sha256', self::canonical($channel, $to, $payload, $maxAttempts, $quotaKey, $cost, $sendAtMs), true);
    }

    /**
     * The canonical text the fingerprint hashes: the seven members in byte order, no
     * whitespace, every string and number canonical (the vectors' `canonical`).
     *
     * @throws InvalidSubmission as of()
     */
    public static function canonical(
        string $channel,
        string $to,
        string $payload,
        int $maxAttempts,
        ?string $quotaKey = null,
        ?int $cost = null,
        ?int $sendAtMs = null,
    ): string {
        $quotaKey ??= $channel;
        // The other fields' rules are the submit's; only their bytes matter to the text.
        foreach (['channel' => $channel, 'to' => $to, 'quota_key' => $quotaKey] as $field => $value) {
            self::checkUtf8($field, $value);
        }
        return '{"channel":' . self::quote($channel)
            . ',"cost":' . ($cost ?? 1)
            . ',"max_attempts":' . $maxAttempts
            . ',"payload":' . self::canonicalPayload($payload)
            . ',"quota_key":' . self::quote($quotaKey)
            . ',"send_at":' . ($sendAtMs ?? 'null')
            . ',"to":' . self::quote($to)
            . '}';
    }

    /**
     * The canonical form of one JSON text: no whitespace, members sorted by the UTF-8 bytes
     * of their keys, strings raw UTF-8 with only `"`, `\` and U+0001–U+001F escaped (as
     * `\u00xx`), numbers as their exact value in plain notation.
     *
     * @throws InvalidSubmission field `payload`, code `not_utf8`, `syntax`, `duplicate_key`,
     *         `nul`, `lone_surrogate`, `control_character`, `number_too_large`,
     *         `number_too_precise` or `too_deep`: herald's verdict on the same text
     */
    public static function canonicalPayload(string $json): string
    {
        // herald reads the payload as Rust text, UTF-8 checked before any JSON rule.
        self::checkUtf8('payload', $json);
        // quick()'s tokens take ~100 bytes each: a text beyond herald's payload limit (which
        // herald refuses anyway) is left to parse(), whose memory stays that of the text.
        return (strlen($json) <= self::QUICK_BYTES_MAX ? self::decoded($json) ?? self::quick($json) : null)
            ?? self::parse($json);
    }

    private static function checkUtf8(string $field, string $value): void
    {
        // PCRE's UTF check refuses cut, overlong and surrogate sequences (as Text::check).
        if (preg_match('//u', $value) !== 1) {
            throw new InvalidSubmission($field, 'not_utf8', "herald refused {$field}: its bytes are not UTF-8");
        }
    }

    /**
     * The canonical form of a valid text, or null: for a text with a fault (and one beyond
     * what PCRE splits), which parse() then reads and names. Every token is checked with
     * parse()'s own rules; only the grammar is this loop's.
     */
    private static function quick(string $json): ?string
    {
        if (preg_match_all(self::TOKEN, $json, $match) === false) {
            return null;
        }
        $consumed = strlen(implode('', $match[0]));
        if ($consumed + strspn($json, " \t\n\r", $consumed) !== strlen($json)) {
            return null;
        }
        [, $separators, $tokens, $work] = $match;
        $state = self::VALUE;
        $depth = 0;
        $inArray = []; // per depth: an array (true) or an object
        $members = []; // per depth: canonical items, or decoded key => canonical `"key":value`
        $keys = [];    // per depth: the key whose value comes next
        foreach ($tokens as $i => $token) {
            if ($separators[$i] !== '') {
                if ($separators[$i] === ',' && $state === self::COMMA_OR_CLOSE) {
                    $state = $inArray[$depth] ? self::VALUE : self::KEY;
                } elseif ($separators[$i] === ':' && $state === self::COLON) {
                    $state = self::VALUE;
                } else {
                    return null;
                }
            }
            $first = $token[0];
            if ($state === self::KEY || $state === self::KEY_OR_CLOSE) {
                if ($first === '"') {
                    $key = $work[$i] === '' ? substr($token, 1, -1) : self::unescaped($token);
                    if ($key === null || isset($members[$depth][$key])) {
                        return null;
                    }
                    $keys[$depth] = $key;
                    $members[$depth][$key] = ($work[$i] === '' ? $token : self::quote($key)) . ':';
                    $state = self::COLON;
                    continue;
                }
                if ($state === self::KEY) {
                    return null;
                }
            }
            if ($first === '[' || $first === '{') {
                if ($state !== self::VALUE && $state !== self::VALUE_OR_CLOSE || $depth === self::DEPTH_MAX) {
                    return null;
                }
                $depth++;
                $inArray[$depth] = $first === '[';
                $members[$depth] = [];
                $state = $first === '[' ? self::VALUE_OR_CLOSE : self::KEY_OR_CLOSE;
                continue;
            }
            if ($first === ']' || $first === '}') {
                if ($state === self::VALUE || $state === self::COLON || $state === self::END
                    || $depth === 0 || $inArray[$depth] !== ($first === ']')) {
                    return null;
                }
                if ($first === '}') {
                    // Byte order of the decoded keys (memcmp, then length): UTF-8 order. PHP
                    // makes a key such as "12" the integer 12, one to one: compared as "12".
                    ksort($members[$depth], SORT_STRING);
                }
                $value = ($first === ']' ? '[' : '{') . implode(',', $members[$depth]) . $first;
                unset($members[$depth]);
                $depth--;
            } elseif ($state === self::VALUE || $state === self::VALUE_OR_CLOSE) {
                if ($work[$i] === '') {
                    $value = $token;
                } elseif ($first === '"') {
                    $value = self::unescaped($token);
                    $value = $value === null ? null : self::quote($value);
                } else {
                    $value = self::number($token);
                }
                if ($value === null) {
                    return null;
                }
            } else {
                return null;
            }
            if ($depth === 0) {
                $state = self::END;
                $canonical = $value;
            } elseif ($inArray[$depth]) {
                $members[$depth][] = $value;
                $state = self::COMMA_OR_CLOSE;
            } else {
                $members[$depth][$keys[$depth]] .= $value;
                $state = self::COMMA_OR_CLOSE;
            }
        }
        return $state === self::END ? $canonical : null;
    }

    /**
     * The canonical form by json_decode(), a sort of each object's members and
     * json_encode(), or null where that might not be herald's: a text either refuses, one
     * NOT_DECODED names, a repeated key or an object decoded as a list (the objects' keys
     * are counted against the text's key ends, which a string holding `":` only adds to),
     * and under another `serialize_precision` than PHP's default -1: the shortest digits
     * that read back as the same double, a number's exact value within 15 digits.
     */
    private static function decoded(string $json): ?string
    {
        if (ini_get('serialize_precision') !== '-1' || preg_match(self::NOT_DECODED, $json) !== 0) {
            return null;
        }
        try {
            $value = json_decode($json, true, self::DEPTH_MAX + 1, JSON_THROW_ON_ERROR);
        } catch (\JsonException) {
            return null;
        }
        $keys = 0;
        if (is_array($value) ? !self::sortMembers($value, $keys) : is_float($value) && !self::plainDouble($value)) {
            return null;
        }
        if ($keys !== preg_match_all(self::KEY_END, $json)) {
            return null;
        }
        $text = json_encode($value, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_LINE_TERMINATORS);
        return $text === false ? null : strtr($text, self::SHORT_ESCAPES);
    }

    /**
     * decoded()'s walk: every object's (an array not a list) members in byte order of their
     * keys, as quick() sorts them; false for a double json_encode() would not write plainly.
     *
     * @param array<mixed> $value
     */
    private static function sortMembers(array &$value, int &$keys): bool
    {
        if (!array_is_list($value)) {
            ksort($value, SORT_STRING);
            $keys += count($value);
        }
        foreach ($value as &$member) {
            if (is_array($member) ? !self::sortMembers($member, $keys) : is_float($member) && !self::plainDouble($member)) {
                return false;
            }
        }
        return true;
    }

    /**
     * A double json_encode() writes as its exact value in plain notation (`-0.0` made `0`):
     * PHP writes an exponent below 1e-4 (and far above 1e15, which a number of at most 15
     * digits, as NOT_DECODED leaves, stays under); from 1e-3 on this is clear of both.
     */
    private static function plainDouble(float &$value): bool
    {
        if ($value == 0.0) {
            $value = 0;
            return true;
        }
        return abs($value) >= 1e-3;
    }

    /** A string token's value, decoded by parse()'s rules; null for one they refuse. */
    private static function unescaped(string $token): ?string
    {
        try {
            return (new self($token))->string();
        } catch (InvalidSubmission) {
            return null;
        }
    }

    /** A number token's canonical form by parse()'s rules; null beyond the limits. */
    private static function number(string $token): ?string
    {
        try {
            return (new self($token))->numberValue();
        } catch (InvalidSubmission) {
            return null;
        }
    }

    /** herald_core::json::parse, step for step: the canonical form, or its first fault. */
    private static function parse(string $json): string
    {
        $parser = new self($json);
        $parser->skipWhitespace();
        $canonical = $parser->value(0);
        $parser->skipWhitespace();
        if ($parser->at < $parser->length) {
            throw $parser->refuse('syntax', 'text after the value');
        }
        return $canonical;
    }

    private function refuse(string $code, string $problem, ?int $at = null): InvalidSubmission
    {
        return new InvalidSubmission('payload', $code, sprintf('herald refused payload: %s at byte %d', $problem, $at ?? $this->at));
    }

    /** What herald calls an unexpected character, or the end of the text. */
    private function unexpected(): InvalidSubmission
    {
        return $this->at < $this->length
            ? $this->refuse('syntax', sprintf('unexpected byte 0x%02x', ord($this->text[$this->at])))
            : $this->refuse('syntax', 'the text ends in the middle of a value');
    }

    /** The byte at the cursor, '' at the end. */
    private function peek(): string
    {
        return $this->at < $this->length ? $this->text[$this->at] : '';
    }

    private function skipWhitespace(): void
    {
        $this->at += strspn($this->text, " \t\n\r", $this->at);
    }

    private function digits(): string
    {
        $run = strspn($this->text, '0123456789', $this->at);
        $digits = substr($this->text, $this->at, $run);
        $this->at += $run;
        return $digits;
    }

    /**
     * One value in canonical form; `$depth` counts the arrays and objects around it. The
     * recursion is bounded by DEPTH_MAX: a 32nd bracket is refused before it is entered.
     */
    private function value(int $depth): string
    {
        return match ($this->peek()) {
            '{' => $this->object($depth + 1),
            '[' => $this->array($depth + 1),
            '"' => self::quote($this->string()),
            't' => $this->word('true'),
            'f' => $this->word('false'),
            'n' => $this->word('null'),
            '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9' => $this->numberValue(),
            default => throw $this->unexpected(),
        };
    }

    private function word(string $word): string
    {
        if (substr($this->text, $this->at, strlen($word)) !== $word) {
            throw $this->refuse('syntax', "not {$word}");
        }
        $this->at += strlen($word);
        return $word;
    }

    /**
     * Past the opening bracket of an array or object at `$depth`: whether it closed at
     * once with `$close` (then past that too).
     */
    private function openedEmpty(int $depth, string $close): bool
    {
        if ($depth > self::DEPTH_MAX) {
            throw $this->refuse('too_deep', 'nesting deeper than ' . self::DEPTH_MAX . ' arrays and objects');
        }
        $this->at++;
        $this->skipWhitespace();
        if ($this->peek() !== $close) {
            return false;
        }
        $this->at++;
        return true;
    }

    private function array(int $depth): string
    {
        if ($this->openedEmpty($depth, ']')) {
            return '[]';
        }
        $items = [];
        while (true) {
            $this->skipWhitespace();
            $items[] = $this->value($depth);
            $this->skipWhitespace();
            $next = $this->peek();
            if ($next !== ',' && $next !== ']') {
                throw $this->unexpected();
            }
            $this->at++;
            if ($next === ']') {
                return '[' . implode(',', $items) . ']';
            }
        }
    }

    private function object(int $depth): string
    {
        if ($this->openedEmpty($depth, '}')) {
            return '{}';
        }
        $members = []; // decoded key => canonical `"key":value`
        while (true) {
            $this->skipWhitespace();
            $keyAt = $this->at;
            if ($this->peek() !== '"') {
                throw $this->unexpected();
            }
            $key = $this->string();
            // Before the value, as herald: the duplicate is the first fault in the text.
            if (isset($members[$key])) {
                throw $this->refuse('duplicate_key', 'duplicate key ' . json_encode($key, JSON_UNESCAPED_UNICODE), $keyAt);
            }
            $this->skipWhitespace();
            if ($this->peek() !== ':') {
                throw $this->unexpected();
            }
            $this->at++;
            $this->skipWhitespace();
            $members[$key] = self::quote($key) . ':' . $this->value($depth);
            $this->skipWhitespace();
            $next = $this->peek();
            if ($next !== ',' && $next !== '}') {
                throw $this->unexpected();
            }
            $this->at++;
            if ($next === '}') {
                // As in quick(): byte order, a key PHP made an integer compared as text.
                ksort($members, SORT_STRING);
                return '{' . implode(',', $members) . '}';
            }
        }
    }

    /** A string literal, its escapes decoded; the opening quote is at the cursor. */
    private function string(): string
    {
        $this->at++;
        $out = '';
        while (true) {
            if (preg_match(self::PLAIN_RUN, $this->text, $run, 0, $this->at) !== 1) {
                throw new \RuntimeException('PCRE failed to read the payload: ' . preg_last_error_msg());
            }
            $out .= $run[0];
            $this->at += strlen($run[0]);
            $stop = $this->peek();
            if ($stop === '"') {
                $this->at++;
                return $out;
            }
            $out .= match ($stop) {
                '\\' => $this->escape(),
                '' => throw $this->refuse('syntax', 'the text ends in the middle of a value'),
                "\0" => throw $this->refuse('nul', 'the NUL character (\u0000) is not allowed'),
                default => throw $this->refuse('control_character', 'a control character must be escaped inside a string'),
            };
        }
    }

    /** One escape sequence, decoded to UTF-8; the backslash is at the cursor. */
    private function escape(): string
    {
        $start = $this->at;
        $this->at++;
        $decoded = match ($this->peek()) {
            '' => throw $this->refuse('syntax', 'the text ends in the middle of a value'),
            '"' => '"',
            '\\' => '\\',
            '/' => '/',
            'b' => "\x08",
            'f' => "\x0c",
            'n' => "\n",
            'r' => "\r",
            't' => "\t",
            'u' => null,
            default => throw $this->refuse('syntax', 'an invalid escape sequence'),
        };
        $this->at++;
        return $decoded ?? $this->codePoint($start, $this->hex4());
    }

    /**
     * The character a `\uXXXX` escape (and for a high surrogate, the `\uXXXX` after it)
     * stands for, in UTF-8. `\u0000` and a surrogate without its partner are refused.
     */
    private function codePoint(int $start, int $unit): string
    {
        $lone = fn () => $this->refuse('lone_surrogate', sprintf('a lone surrogate (\\u%04x) is not a character', $unit), $start);
        if ($unit === 0) {
            throw $this->refuse('nul', 'the NUL character (\u0000) is not allowed', $start);
        }
        if ($unit >= 0xdc00 && $unit <= 0xdfff) {
            throw $lone();
        }
        if ($unit >= 0xd800 && $unit <= 0xdbff) {
            // The partner is read as an escape first: `\ud83d\u12` is a syntax error.
            if (substr($this->text, $this->at, 2) !== '\\u') {
                throw $lone();
            }
            $this->at += 2;
            $low = $this->hex4();
            if ($low < 0xdc00 || $low > 0xdfff) {
                throw $lone();
            }
            $unit = 0x10000 + (($unit - 0xd800) << 10) + ($low - 0xdc00);
        }
        return self::utf8($unit);
    }

    private function hex4(): int
    {
        $hex = substr($this->text, $this->at, 4);
        $valid = strspn($hex, '0123456789abcdefABCDEF');
        if ($valid < 4) {
            $this->at += $valid;
            throw $this->at < $this->length
                ? $this->refuse('syntax', 'an invalid escape sequence')
                : $this->refuse('syntax', 'the text ends in the middle of a value');
        }
        $this->at += 4;
        return (int) hexdec($hex);
    }

    private static function utf8(int $c): string
    {
        return match (true) {
            $c < 0x80 => chr($c),
            $c < 0x800 => chr(0xc0 | $c >> 6) . chr(0x80 | $c & 0x3f),
            $c < 0x10000 => chr(0xe0 | $c >> 12) . chr(0x80 | $c >> 6 & 0x3f) . chr(0x80 | $c & 0x3f),
            default => chr(0xf0 | $c >> 18) . chr(0x80 | $c >> 12 & 0x3f) . chr(0x80 | $c >> 6 & 0x3f) . chr(0x80 | $c & 0x3f),
        };
    }

    /** A number's exact value in plain notation; the cursor is at its `-` or first digit. */
    private function numberValue(): string
    {
        $start = $this->at;
        $negative = $this->peek() === '-';
        if ($negative) {
            $this->at++;
        }
        $int = $this->digits();
        if ($int === '' || (strlen($int) > 1 && $int[0] === '0')) {
            throw $this->refuse('syntax', 'an invalid number', $start);
        }
        $frac = '';
        if ($this->peek() === '.') {
            $this->at++;
            $frac = $this->digits();
            if ($frac === '') {
                throw $this->refuse('syntax', 'an invalid number');
            }
        }
        $exponent = 0;
        if ($this->peek() === 'e' || $this->peek() === 'E') {
            $this->at++;
            $sign = $this->peek();
            if ($sign === '-' || $sign === '+') {
                $this->at++;
            }
            $digits = $this->digits();
            if ($digits === '') {
                throw $this->refuse('syntax', 'an invalid number');
            }
            // 2^40 has 13 digits: a longer run (leading zeros aside) saturates unread.
            $digits = ltrim($digits, '0');
            $exponent = strlen($digits) > 13 ? self::EXPONENT_SATURATED : min((int) $digits, self::EXPONENT_SATURATED);
            if ($sign === '-') {
                $exponent = -$exponent;
            }
        }
        return $this->plain($negative, $int, $frac, $exponent, $start);
    }

    /** The exact value of `-?int.frac e exponent` in plain notation, within the digit limits. */
    private function plain(bool $negative, string $int, string $frac, int $exponent, int $start): string
    {
        $all = $int . $frac;
        // The decimal point sits `$point` digits into `$all`.
        $point = strlen($int) + $exponent;
        $leading = strspn($all, '0');
        $digits = rtrim(substr($all, $leading), '0');
        if ($digits === '') {
            return '0';
        }
        $point -= $leading;
        $length = strlen($digits);
        if ($point > self::INTEGER_DIGITS_MAX) {
            throw $this->refuse('number_too_large', 'a number whose exact value has more than ' . self::INTEGER_DIGITS_MAX . ' integer digits', $start);
        }
        if ($length - $point > self::FRACTION_DIGITS_MAX) {
            throw $this->refuse('number_too_precise', 'a number whose exact value has more than ' . self::FRACTION_DIGITS_MAX . ' fraction digits', $start);
        }
        $sign = $negative ? '-' : '';
        if ($point >= $length) {
            return $sign . $digits . str_repeat('0', $point - $length);
        }
        if ($point <= 0) {
            return $sign . '0.' . str_repeat('0', -$point) . $digits;
        }
        return $sign . substr($digits, 0, $point) . '.' . substr($digits, $point);
    }

    /** A decoded string in canonical form: raw UTF-8, `\"`, `\\` and lowercase `\u00xx`. */
    private static function quote(string $s): string
    {
        // Most strings need no escape; strtr() prepares its table on every call.
        if (preg_match(self::NEEDS_ESCAPE, $s) === 0) {
            return '"' . $s . '"';
        }
        if (self::$escapes === null) {
            self::$escapes = ['"' => '\\"', '\\' => '\\\\'];
            for ($c = 1; $c < 0x20; $c++) {
                self::$escapes[chr($c)] = sprintf('\\u%04x', $c);
            }
        }
        return '"' . strtr($s, self::$escapes) . '"';
    }
}
