-- herald schema 2 (PostgreSQL): time helpers and the replay record.
--
-- Times cross the store boundary as Unix milliseconds (the same on both backends). A NULL
-- "now" means "the database's clock": lease expiry and due times that several machines
-- compare come from one clock, so skew between machines cannot reclaim a live lease.

CREATE FUNCTION herald_ts(ms bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE AS $$ SELECT to_timestamp(ms / 1000.0) $$;

CREATE FUNCTION herald_now(ms bigint) RETURNS timestamptz
    LANGUAGE sql STABLE AS $$ SELECT coalesce(to_timestamp(ms / 1000.0), now()) $$;

CREATE FUNCTION herald_ms(ts timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE AS $$ SELECT (extract(epoch FROM ts) * 1000)::bigint $$;

-- One row per replay: which reservation it took and when.
CREATE TABLE delivery_replays (
    delivery_id     uuid NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    reservation_seq integer NOT NULL CHECK (reservation_seq >= 2),
    at              timestamptz NOT NULL,
    PRIMARY KEY (delivery_id, reservation_seq)
);
