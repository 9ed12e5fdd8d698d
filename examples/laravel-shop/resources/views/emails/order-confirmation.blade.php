<p>Hello {{ $customer }},</p>
<p>thank you: your order <b>#{{ $order }}</b> is confirmed.</p>
<p>Total: {{ number_format($total / 100, 2) }} EUR. Your invoice is attached.</p>
