<?php

declare(strict_types=1);

namespace Herald\Tests;

use Herald\Exception\IdempotencyKeyReused;
use Herald\Laravel\Mail\SymfonyTransport;
use Herald\Mail\HeraldMailer;
use Herald\Mail\RenderedMail;
use Herald\Tests\Support\Expect;
use Herald\Tests\Support\SecondConnection;
use Herald\Tests\Support\Shop\OrderConfirmation;
use Herald\Tests\Support\SmtpRelay;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Mail;

/**
 * Issue 35's one line: `MAIL_MAILER=herald` (tests/Support/App.php's mail config) and seed
 * 004's code unchanged — `Mail::to($customer)->send(new OrderConfirmation($order))` inside
 * `DB::transaction($fn, 5)` — through Laravel 8's real Mailer, SwiftMailer and a Blade view,
 * to herald, to a real SMTP relay. The Symfony Mailer transport (Laravel 9+) is tested
 * against Debian's symfony/mailer directly.
 */
final class MailTest extends TestCase
{
    protected function quotas(): array
    {
        return ['webhook' => 100, 'email' => 100];
    }

    protected function setUp(): void
    {
        parent::setUp();
        // The suite's tenant is herald's default one here, as in a single-tenant application.
        self::$app['config']->set('herald.tenant', $this->tenant->id);
        self::$app->forgetInstance(\Herald\Herald::class);
        \Herald\Laravel\Facades\Herald::clearResolvedInstance(\Herald\Herald::class);
        Mail::purge('herald');
        DB::table('inventory')->whereIn('id', [1, 2])->delete();
        DB::table('inventory')->insert([['id' => 1, 'stock' => 100], ['id' => 2, 'stock' => 100]]);
    }

    public function testSeed004UnchangedButTheMailerDeadlocksTwiceAndMailsOnceByteForByte(): void
    {
        $marker = $this->unique('seed004mail');
        $invoice = random_bytes(200_000);
        $second = new SecondConnection();
        $runs = 0;
        try {
            DB::transaction(function () use (&$runs, $second, $marker, $invoice) {
                $runs++;
                if ($runs > 1) {
                    $second->finish();
                }
                DB::table('inventory')->where('id', 1)->decrement('stock');
                // Seed 004's line, unchanged.
                Mail::to('zoe@customer.example')->send(new OrderConfirmation(17, 'Zoë', $marker, $invoice));
                if ($runs < 3) {
                    $second->deadlockTheOtherSide();
                }
                DB::table('inventory')->where('id', 2)->decrement('stock');
            }, 5);
        } finally {
            $second->close();
        }
        $this->assertSame(3, $runs, 'two deadlocked runs, then one that committed');

        $claimed = $this->heraldInspector()->deliveries(channel: 'email');
        $this->assertCount(1, $claimed, 'each deadlocked run\'s claim rolled back with it');
        $this->assertSame(99, $this->heraldInspector()->account('email')['available']);
        $delivery = $this->heraldInspector()->delivery($claimed[0]['id']);
        $this->assertSame('zoe@customer.example', $delivery['recipient']);
        $this->assertStringStartsWith('mail-', $delivery['operation_key'], 'a key derived from the message');

        $this->awaitHeraldDelivery($delivery['id']);
        $got = SmtpRelay::await($delivery['id']);
        $this->assertSame(['zoe@customer.example'], $got['rcpt_tos']);
        $this->assertSame('shop@shop.example', $got['mail_from']);
        $rendered = json_decode($delivery['payload'], true, 512, JSON_THROW_ON_ERROR)['raw'];
        $this->assertSentAsClaimed($rendered, $got['raw'], SmtpRelay::messageId($delivery['id']));
        $this->assertSame($invoice, self::attachment($got['raw'], 'invoice-17.pdf'), 'the attachment, byte for byte');
        $this->assertStringContainsString($marker, quoted_printable_decode($got['raw']));
        $this->assertStringContainsString('Order #17 confirmed', (string) $got['subject']);
        Expect::mailedOnce($delivery['id'], 'seed-004-mail');
    }

    public function testARolledBackClosureMailsNothing(): void
    {
        $marker = $this->unique('rolledbackmail');
        try {
            DB::transaction(function () use ($marker) {
                Mail::to('zoe@customer.example')->send(new OrderConfirmation(18, 'Zoë', $marker, 'pdf'));
                throw new \DomainException('the payment provider refused');
            });
            $this->fail('the closure threw');
        } catch (\DomainException) {
        }
        $this->assertSame([], $this->heraldInspector()->deliveries(channel: 'email'));
        Expect::neverDelivered($marker, 'rolled-back-mail');
    }

    public function testAnExplicitKeyClaimsOnceAndNeverTravelsAndBccStaysInTheEnvelope(): void
    {
        $key = $this->unique('order-19-confirmation');
        $marker = $this->unique('keyedmail');
        $mail = fn () => (new OrderConfirmation(19, 'Ada', $marker, 'pdf'))->herald($key);
        DB::transaction(function () use ($mail) {
            Mail::to('ada@customer.example')->cc('billing@customer.example')->bcc('audit@shop.example')->send($mail());
        });
        // Sent again outside any transaction (a retried job): the same key, one delivery.
        Mail::to('ada@customer.example')->cc('billing@customer.example')->bcc('audit@shop.example')->send($mail());
        $delivery = $this->assertHeraldClaimed($key, 'email');
        $this->assertCount(1, $this->heraldInspector()->deliveries(channel: 'email'));
        $payload = json_decode($this->heraldInspector()->delivery($delivery['id'])['payload'], true, 512, JSON_THROW_ON_ERROR);
        $this->assertSame(['ada@customer.example', 'billing@customer.example', 'audit@shop.example'], $payload['envelope']['to']);

        $this->awaitHeraldDelivery($delivery['id']);
        $got = SmtpRelay::await($delivery['id']);
        $this->assertSame(['ada@customer.example', 'billing@customer.example', 'audit@shop.example'], $got['rcpt_tos']);
        $head = substr($got['raw'], 0, (int) strpos($got['raw'], "\r\n\r\n"));
        $this->assertDoesNotMatchRegularExpression('/^(Bcc|X-Herald-Key):/mi', $head, 'neither Bcc nor the key reach any recipient');
        $this->assertMatchesRegularExpression('/^Cc: billing@customer\.example/mi', $head);
        Expect::mailedOnce($delivery['id'], 'keyed-mail');

        // The same key for another message is refused, and the transaction can go on.
        $this->expectException(IdempotencyKeyReused::class);
        Mail::to('someone-else@customer.example')->send($mail());
    }

    public function testTheSymfonyMailerTransportClaimsInTheTransactionAndSendsByteForByte(): void
    {
        if (!class_exists(\Symfony\Component\Mailer\Mailer::class)) {
            require_once 'Symfony/Component/Mailer/autoload.php';
        }
        $marker = $this->unique('symfonymail');
        $invoice = random_bytes(100_000);
        $mailer = new \Symfony\Component\Mailer\Mailer(new SymfonyTransport(new HeraldMailer($this->herald())));
        $email = (new \Symfony\Component\Mime\Email())
            ->from('The Shop <shop@shop.example>')
            ->to('zoe@customer.example')
            ->bcc('audit@shop.example')
            ->subject('Votre facture — ' . $marker)
            ->text("Bonjour Zoë,\nyour invoice {$marker} is attached.\n")
            ->html("<p>Bonjour Zoë, your invoice <b>{$marker}</b> is attached.</p>")
            ->attach($invoice, 'invoice.pdf', 'application/pdf');
        DB::transaction(function () use ($mailer, $email) {
            DB::table('inventory')->where('id', 1)->decrement('stock');
            $mailer->send($email);
        });
        $claimed = $this->heraldInspector()->deliveries(channel: 'email');
        $this->assertCount(1, $claimed);
        $delivery = $this->heraldInspector()->delivery($claimed[0]['id']);
        $this->awaitHeraldDelivery($delivery['id']);
        $got = SmtpRelay::await($delivery['id']);
        $this->assertSame(['zoe@customer.example', 'audit@shop.example'], $got['rcpt_tos']);
        $rendered = json_decode($delivery['payload'], true, 512, JSON_THROW_ON_ERROR)['raw'];
        $this->assertSentAsClaimed($rendered, $got['raw'], SmtpRelay::messageId($delivery['id']));
        $this->assertSame($invoice, self::attachment($got['raw'], 'invoice.pdf'));
        $this->assertStringNotContainsString('audit@shop.example', substr($got['raw'], 0, (int) strpos($got['raw'], "\r\n\r\n")));
        Expect::mailedOnce($delivery['id'], 'symfony-mail');
    }

    public function testTheDerivedKeyIgnoresWhatTwoRenderingsDrawAtRandom(): void
    {
        $render = function (): string {
            $m = (new \Swift_Message('Hello'))->setFrom('shop@shop.example')->setTo('a@customer.example')
                ->setBody('<p>hi <img src="cid:x"></p>', 'text/html')->addPart('hi', 'text/plain');
            $m->attach(new \Swift_Attachment('pdf bytes', 'a.pdf', 'application/pdf'));
            $m->embed(new \Swift_Image('png bytes', 'logo.png', 'image/png'));
            return $m->toString();
        };
        [$one, $two] = [$render(), $render()];
        $this->assertNotSame($one, $two, 'boundaries, Message-ID and Content-IDs are drawn anew');
        $key = fn (string $raw, array $to = ['a@customer.example']) => RenderedMail::of($raw, 'shop@shop.example', $to)->operationKey();
        $this->assertSame($key($one), $key($two));
        $payload = fn (string $raw) => RenderedMail::of($raw, 'shop@shop.example', ['a@customer.example'])->payload();
        $this->assertSame($payload($one), $payload($two), 'the same request: a repeat is a duplicate, never reused');
        $this->assertNotSame($key($one), $key($one, ['b@customer.example']), 'another envelope is another mail');
        $this->assertNotSame($key($one), $key(str_replace('hi', 'ho', $one)), 'another text is another mail');
    }

    /**
     * What the relay received is what was claimed, byte for byte, after the two fields herald
     * writes when it sends (the submitted message has neither): its Message-ID, and the Date
     * of the attempt.
     */
    private function assertSentAsClaimed(string $claimed, string $received, string $messageId): void
    {
        $this->assertMatchesRegularExpression(
            '/\AMessage-ID: ' . preg_quote($messageId, '/') . '\r\nDate: [A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} \+0000\r\n/',
            $received,
        );
        $this->assertDoesNotMatchRegularExpression('/^(Message-ID|Date):/mi', substr($claimed, 0, (int) strpos($claimed, "\r\n\r\n")));
        $this->assertSame($claimed, (string) preg_replace('/\A(?:[^\r\n]*\r\n){2}/', '', $received), 'the rest, byte for byte');
    }

    /** The decoded bytes of the base64 attachment named `$filename`. */
    private static function attachment(string $raw, string $filename): string
    {
        $quoted = preg_quote($filename, '/');
        if (preg_match('/filename="?' . $quoted . '"?\r\n(?:[^\r\n]+\r\n)*\r\n([A-Za-z0-9+\/=\r\n]+?)\r\n(?:\r\n)?--/', $raw, $m) !== 1) {
            throw new \RuntimeException("no attachment {$filename} in the message");
        }
        return base64_decode($m[1], true);
    }
}
