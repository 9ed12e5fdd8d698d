<p>Hello {{ $customer }},</p>
<p>your order <b>#{{ $order }}</b> is confirmed.</p>
<p>{{ $marker }}</p>
<p>Ünïcödé survives the trip.</p>
