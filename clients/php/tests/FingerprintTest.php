<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Exception\InvalidSubmission;
use Herald\Fingerprint;

/**
 * The client's fingerprint against herald's golden vectors (testdata/fingerprint-vectors.json,
 * written by scripts/fingerprint-vectors, reproduced by herald_core and both SQL APIs):
 * every valid case gives exactly its canonical text and SHA-256, every invalid one herald's
 * code. Pure PHP: no database, no server, so it extends PHPUnit's TestCase directly.
 */
final class FingerprintTest extends \PHPUnit\Framework\TestCase
{
    private const VECTORS = __DIR__ . '/../../../testdata/fingerprint-vectors.json';

    /** @return array<string, array{array<string, mixed>}> one data set per vector, by its name */
    public static function vectors(): array
    {
        $file = json_decode((string) file_get_contents(self::VECTORS), true, 512, JSON_THROW_ON_ERROR);
        $cases = [];
        foreach ($file['cases'] as $case) {
            $cases[$case['name']] = [$case];
        }
        return $cases;
    }

    public function testAllVectorsAreRead(): void
    {
        $this->assertCount(235, self::vectors());
    }

    /**
     * @dataProvider vectors
     * @param array<string, mixed> $case
     */
    public function testVector(array $case): void
    {
        $r = $case['request'];
        $fingerprint = fn () => Fingerprint::of(
            channel: $r['channel'],
            to: $r['to'],
            payload: $case['payload'],
            maxAttempts: $r['max_attempts'],
            quotaKey: $r['quota_key'],
            cost: $r['cost'],
            sendAtMs: $r['send_at'],
        );
        if (isset($case['invalid'])) {
            $this->assertRefused($case['invalid'], $fingerprint);
            // The exact parser names the fault; the quick one only declines.
            $this->assertRefused($case['invalid'], fn () => self::reader('parse', $case['payload']));
            $this->assertNull(self::reader('quick', $case['payload']));
            $this->assertNull(self::reader('decoded', $case['payload']));
            return;
        }
        $canonical = Fingerprint::canonical($r['channel'], $r['to'], $case['payload'], $r['max_attempts'], $r['quota_key'], $r['cost'], $r['send_at']);
        $this->assertSame($case['canonical'], $canonical);
        $digest = $fingerprint();
        $this->assertSame(32, strlen($digest));
        $this->assertSame($case['sha256'], bin2hex($digest));
        // The readers write the same form, each on its own (quick() reads every valid vector,
        // decoded() those without a number or escape it leaves to quick()).
        foreach (['parse', 'quick', 'decoded'] as $reader) {
            $form = self::reader($reader, $case['payload']);
            if ($form !== null || $reader !== 'decoded') {
                $this->assertStringContainsString(',"payload":' . $form . ',"quota_key":', $canonical, $reader);
            }
        }
    }

    /**
     * decoded() trusts PHP's json_decode() and json_encode() where it can prove them exact;
     * a wrong form there would fail a delivery at its send (`fingerprint_mismatch`). So it
     * is checked against parse() on generated payloads made of the spellings where the two
     * could part: numbers at the edges of a double's digits and of json_encode()'s
     * notation, escapes, keys PHP makes integers, repeats, `":` in strings, whitespace.
     */
    public function testDecodedAgreesWithParseOnGeneratedPayloads(): void
    {
        mt_srand(3535);
        $decoded = 0;
        for ($i = 0; $i < 20000; $i++) {
            $text = self::generated(0);
            try {
                $want = self::reader('parse', $text);
            } catch (InvalidSubmission) {
                $want = null;
            }
            $form = self::reader('decoded', $text);
            if ($form !== null) {
                $this->assertSame($want, $form, $text);
                $decoded++;
            }
        }
        // Not a vacuous check: decoded() takes a good share of them.
        $this->assertGreaterThan(4000, $decoded);
        $bench = (string) file_get_contents(__DIR__ . '/fixtures/payload-4k.json');
        $this->assertSame(self::reader('parse', $bench), self::reader('decoded', $bench), 'the bench payload');
    }

    /** A random JSON-like text: mostly valid, with the spellings decoded() must get right. */
    private static function generated(int $depth): string
    {
        $pick = static fn (array $from): string => $from[mt_rand(0, count($from) - 1)];
        $space = static fn (): string => mt_rand(0, 5) === 0 ? $pick([' ', "\n  ", "\t", "\r\n", "\f"]) : '';
        $kind = mt_rand(0, $depth >= 4 ? 3 : 5);
        if ($kind === 0) {
            if (mt_rand(0, 1) === 0) {
                return $pick(['0', '-0', '0.0', '-0.0', '1.50', '0.1', '0.001', '0.0001', '0.00009', '1e-4', '1E2', '10e-1',
                    '123456789012345', '1234567890123456', '999999999999999.9', '99999999999999.99', '0.30000000000000001',
                    '0.123456789012345', '9007199254740993', '-12.3400', '1.', '01', '.5', '1e400', '1e-400', '5e-324']);
            }
            $number = (mt_rand(0, 3) === 0 ? '-' : '') . (mt_rand(0, 2) === 0 ? '0' : (string) mt_rand(1, 9) . str_repeat((string) mt_rand(0, 9), mt_rand(0, 16)));
            if (mt_rand(0, 1) === 0) {
                $number .= '.' . substr(str_shuffle('01234567890123456789') . str_repeat('0', mt_rand(0, 3)), 0, mt_rand(1, 18));
            }
            return mt_rand(0, 5) === 0 ? $number . $pick(['e', 'E', 'e-', 'E+']) . mt_rand(0, 40) : $number;
        }
        if ($kind === 1) {
            return $pick(['true', 'false', 'null', 'nul']);
        }
        if ($kind <= 3) {
            $string = '"';
            for ($n = mt_rand(0, 4); $n > 0; $n--) {
                $string .= $pick(['abc', 'é', '😀', "\u{2028}", "\x7f", '\\n', '\\t', '\\b', '\\f', '\\r', '\\/', '\\"', '\\\\',
                    '\\u00e9', '\\u00E9', '\\ud83d\\ude00', '\\u0000', '\\u001f', '\\u007F', '\\ud800', '\\udc00x', "\x01", ':',
                    '\\":', '0', '1234567890123456', '5e3', '{}', '\\u0030', ' ', '\\\\n']);
            }
            return $string . '"';
        }
        $items = [];
        for ($n = mt_rand(0, 4); $n > 0; $n--) {
            $item = self::generated($depth + 1);
            if ($kind === 5) {
                $item = $pick(['"a"', '"b"', '"A"', '"é"', '""', '"0"', '"\\u0030"', '"1"', '"10"', '"9"', '"-0"', '"01"', '"\\u0061"',
                    '"a\\":"', '"😀"', '"\\uffff"', '"9223372036854775808"', '"x"', '"y"', '"z"']) . $space() . ':' . $space() . $item;
            }
            $items[] = $space() . $item . $space();
        }
        return $kind === 5 ? '{' . implode(',', $items) . '}' : '[' . implode(',', $items) . ']';
    }

    /** Fingerprint's private decoded(), quick() or parse() on a payload text. */
    private static function reader(string $reader, string $text): ?string
    {
        return \Closure::bind(fn () => Fingerprint::$reader($text), null, Fingerprint::class)();
    }

    public function testDefaultsAreResolvedAsHeraldDoes(): void
    {
        // ARCHITECTURE.md's example: quota_key = the channel, cost = 1, send_at = null.
        $this->assertSame(
            '{"channel":"webhook","cost":1,"max_attempts":8,"payload":{"a":"é","b":1.5},"quota_key":"webhook","send_at":null,"to":"https://example.com/h"}',
            Fingerprint::canonical('webhook', 'https://example.com/h', '{"b": 1.50, "a": "\u00e9"}', 8),
        );
        $this->assertSame(
            Fingerprint::of('email', 'a@example.com', '{}', 5),
            Fingerprint::of('email', 'a@example.com', '{}', 5, 'email', 1, null),
        );
        $this->assertNotSame(Fingerprint::of('email', 'a@example.com', '{}', 5), Fingerprint::of('email', 'a@example.com', '{}', 6));
    }

    public function testWhitespaceAndNotationDoNotChangeTheFingerprint(): void
    {
        $print = fn (string $payload) => bin2hex(Fingerprint::of('webhook', 'https://example.com/h', $payload, 8));
        $want = $print('{"a":[1,"x",{"c":null,"b":true}],"d":0.5}');
        foreach ([
            " \t\r\n{\"a\":[1,\"x\",{\"c\":null,\"b\":true}],\"d\":0.5}\n",
            "{ \"d\" : 5e-1 ,\n\t\"a\" : [ 1.000 , \"\\u0078\" , { \"b\" : true , \"c\" : null } ] }",
            "{\r\n  \"a\": [\r\n    10e-1,\r\n    \"x\",\r\n    {\"b\":true,\"c\":null}\r\n  ],\r\n  \"d\": 0.50\r\n}",
        ] as $spelling) {
            $this->assertSame($want, $print($spelling), $spelling);
        }
        // Whitespace inside a string is content; other whitespace than JSON's four is not JSON.
        $this->assertNotSame($want, $print('{"a":[1,"x ",{"c":null,"b":true}],"d":0.5}'));
        $this->assertRefused('syntax', fn () => Fingerprint::canonicalPayload("\u{a0}{}"));
        $this->assertRefused('syntax', fn () => Fingerprint::canonicalPayload("{}\f"));
    }

    public function testEmptyAndTruncatedTextsAreSyntax(): void
    {
        foreach (['', ' ', '{', '[', '"', '"\\', '"\\u', '"\\u00', '"\\ud83d\\u', '"\\ud83d\\ude0', '{"a"', '{"a":', '[1,', '-', '1.', '1e', 'nul', 't'] as $text) {
            $this->assertRefused('syntax', fn () => Fingerprint::canonicalPayload($text), $text);
        }
        // A high surrogate the text ends after has no partner; one cut inside its partner's
        // hex digits is an unfinished escape (herald_core: the partner is read first).
        $this->assertRefused('lone_surrogate', fn () => Fingerprint::canonicalPayload('"\\ud83d'));
        $this->assertRefused('lone_surrogate', fn () => Fingerprint::canonicalPayload('"\\ud83d\\'));
    }

    public function testBytesThatAreNotUtf8AreRefusedCleanly(): void
    {
        foreach (["\xff", "\"\xc3\"", "{\"a\":\"\xed\xa0\x80\"}", "\"\xc0\xaf\"", "\xf4\x90\x80\x80", "[\"ok\",\x80]", "\"\xe2\x82\""] as $text) {
            $this->assertRefused('not_utf8', fn () => Fingerprint::canonicalPayload($text), bin2hex($text));
        }
        $this->assertRefused('not_utf8', fn () => Fingerprint::of("web\xffhook", 'x', '{}', 8), 'channel', 'channel');
        $this->assertRefused('not_utf8', fn () => Fingerprint::of('webhook', "\xff", '{}', 8), 'to', 'to');
        $this->assertRefused('not_utf8', fn () => Fingerprint::of('webhook', 'x', '{}', 8, "\xff"), 'quota_key', 'quota_key');
    }

    public function testArbitraryBytesGiveAValueOrACleanRefusal(): void
    {
        // Fixed seed: the same inputs every run. Valid UTF-8 made of JSON's own bytes, so
        // most texts get past the UTF-8 check and into the parser.
        mt_srand(35);
        $alphabet = ['{', '}', '[', ']', '"', ':', ',', '\\', 'u', 'd', '8', '0', 'e', '-', '.', '1', ' ', 'a', "\x01", "\0", 'é', 'n', 't'];
        $codes = ['not_utf8', 'syntax', 'duplicate_key', 'nul', 'lone_surrogate', 'control_character', 'number_too_large', 'number_too_precise', 'too_deep'];
        for ($i = 0; $i < 3000; $i++) {
            $text = '';
            for ($n = mt_rand(0, 24); $n > 0; $n--) {
                $text .= $i % 3 === 0 ? chr(mt_rand(0, 255)) : $alphabet[mt_rand(0, count($alphabet) - 1)];
            }
            try {
                $canonical = Fingerprint::canonicalPayload($text);
                // What is accepted is JSON, and its canonical form is its own fixed point.
                $this->assertSame($canonical, Fingerprint::canonicalPayload($canonical), bin2hex($text));
                $this->assertSame($canonical, self::reader('parse', $text), bin2hex($text));
            } catch (InvalidSubmission $e) {
                $this->assertSame('payload', $e->field);
                $this->assertContains($e->errorCode, $codes, bin2hex($text));
                if ($e->errorCode !== 'not_utf8') {
                    $this->assertNull(self::reader('quick', $text), bin2hex($text));
                }
            }
        }
    }

    public function testVeryDeepNestingIsRefusedWithoutRecursingIntoIt(): void
    {
        foreach (['[', '{"a":', '[{"a":'] as $open) {
            $this->assertRefused('too_deep', fn () => Fingerprint::canonicalPayload(str_repeat($open, 1_000_000)), $open);
        }
        $this->assertSame(str_repeat('[', 31) . str_repeat(']', 31), Fingerprint::canonicalPayload(str_repeat('[', 31) . str_repeat(']', 31)));
    }

    public function testNumbersKeepTheirExactValue(): void
    {
        foreach ([
            '-12.3400e-3' => '-0.01234',
            '0e99999999999999999999' => '0',
            '1e000000000000000000000000034' => '10000000000000000000000000000000000',
            '123456789012345678901234567890.5' => '123456789012345678901234567890.5',
            '[0.1,-0,1E2]' => '[0.1,0,100]',
        ] as $text => $want) {
            $this->assertSame($want, Fingerprint::canonicalPayload((string) $text), (string) $text);
        }
        $this->assertRefused('number_too_large', fn () => Fingerprint::canonicalPayload('1e9223372036854775808'));
        $this->assertRefused('number_too_precise', fn () => Fingerprint::canonicalPayload('-1e-9223372036854775808'));
        $this->assertRefused('syntax', fn () => Fingerprint::canonicalPayload('00'));
    }

    public function testKeysAreComparedDecodedAndSortedByTheirBytes(): void
    {
        // PHP turns the key "10" into an integer key: still one key, still sorted as text.
        $this->assertSame('{"":0,"10":1,"9":2,"A":3,"a":4,"é":5}', Fingerprint::canonicalPayload('{"é":5,"a":4,"A":3,"9":2,"10":1,"":0}'));
        $this->assertRefused('duplicate_key', fn () => Fingerprint::canonicalPayload('{"10":1,"1\u0030":2}'));
        $this->assertSame('{"-0":1,"0":2,"01":3}', Fingerprint::canonicalPayload('{"01":3,"0":2,"-0":1}'));
    }

    private function assertRefused(string $code, callable $call, string $context = '', string $field = 'payload'): void
    {
        try {
            $call();
        } catch (InvalidSubmission $e) {
            $this->assertSame([$field, $code], [$e->field, $e->errorCode], $context . ': ' . $e->getMessage());
            return;
        }
        $this->fail("{$context}: accepted, expected {$code}");
    }
}
