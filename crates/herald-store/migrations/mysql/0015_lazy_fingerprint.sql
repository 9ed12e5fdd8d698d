-- herald schema 15 (MariaDB 10.11+): the SQL API's `submit_v1` leaves the fingerprint of a
-- payload it proves valid with MariaDB's own JSON functions uncomputed (version 0, with
-- the `send_at` its request gave in `fingerprint_send_at_ms`) until a repeat needs it, as
-- PostgreSQL's does since its schema 8. The routine itself is in routines/mysql/submit.sql;
-- this version only makes a herald from before it, which would compare a repeat with the
-- empty fingerprint of such a row and answer it `reused`, refuse this database.
DO 0;
