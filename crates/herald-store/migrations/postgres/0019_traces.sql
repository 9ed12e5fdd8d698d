-- herald schema 19 (PostgreSQL): the W3C traceparent a delivery was submitted under, so
-- that each attempt's span joins the submit's trace (herald_core::trace). Beside the
-- payload, which is written once by the claim and read by every lease: no extra row, no
-- extra statement, and NULL (no bytes but a bit) when tracing is off. The SQL API's
-- submit writes it from the transaction's `herald.traceparent` setting.
ALTER TABLE delivery_payloads ADD COLUMN traceparent text;
