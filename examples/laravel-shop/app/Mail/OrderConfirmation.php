<?php

declare(strict_types=1);

namespace Shop\Mail;

use Illuminate\Mail\Mailable;

/** The order confirmation, with its invoice attached: an ordinary Laravel Mailable. */
final class OrderConfirmation extends Mailable
{
    public function __construct(public readonly int $order, public readonly string $customer, public readonly int $total)
    {
    }

    public function build(): self
    {
        return $this->subject("Your order #{$this->order} is confirmed")
            ->view('emails.order-confirmation')
            ->attachData(self::invoice($this->order, $this->total), "invoice-{$this->order}.pdf", ['mime' => 'application/pdf']);
    }

    /** A one-page PDF (what a real shop renders with its PDF library). */
    public static function invoice(int $order, int $total): string
    {
        $text = sprintf('Invoice for order %d: %d.%02d EUR', $order, intdiv($total, 100), $total % 100);
        $stream = "BT /F1 18 Tf 72 720 Td ({$text}) Tj ET";
        $objects = [
            '<< /Type /Catalog /Pages 2 0 R >>',
            '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
            '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
            '<< /Length ' . strlen($stream) . " >>\nstream\n{$stream}\nendstream",
            '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
        ];
        $pdf = "%PDF-1.4\n";
        $offsets = [];
        foreach ($objects as $i => $object) {
            $offsets[] = strlen($pdf);
            $pdf .= ($i + 1) . " 0 obj\n{$object}\nendobj\n";
        }
        $xref = strlen($pdf);
        $pdf .= "xref\n0 " . (count($objects) + 1) . "\n0000000000 65535 f \n";
        foreach ($offsets as $offset) {
            $pdf .= sprintf("%010d 00000 n \n", $offset);
        }
        return $pdf . 'trailer << /Size ' . (count($objects) + 1) . " /Root 1 0 R >>\nstartxref\n{$xref}\n%%EOF\n";
    }
}
