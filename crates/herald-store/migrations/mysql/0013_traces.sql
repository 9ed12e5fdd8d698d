-- herald schema 13 (MariaDB): the W3C traceparent a delivery was submitted under, beside
-- its payload (PostgreSQL schema 19 says why). The SQL API's submit writes it from the
-- session's `@herald_traceparent`. Written to be run again from the top.
ALTER TABLE delivery_payloads ADD COLUMN IF NOT EXISTS traceparent VARCHAR(64) NULL;
