-- herald schema 2 (SQLite): the replay record. (SQLite has one machine and one clock.)

CREATE TABLE delivery_replays (
    delivery_id     BLOB NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    reservation_seq INTEGER NOT NULL CHECK (reservation_seq >= 2),
    at              INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, reservation_seq)
) STRICT;
