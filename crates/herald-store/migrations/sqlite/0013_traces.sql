-- herald schema 13 (SQLite): the W3C traceparent a delivery was submitted under, beside
-- its payload (PostgreSQL schema 19 says why).
ALTER TABLE delivery_payloads ADD COLUMN traceparent TEXT;
