--
-- PostgreSQL database dump
--

\restrict igHSUx0NqW33xC7QbesAzyBZ6mpeddssG9LhdDrQnY2MWrtLjhfXObXYvDpMGgb

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: herald_upgrade_fixture; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA herald_upgrade_fixture;


--
-- Name: herald_ms(timestamp with time zone); Type: FUNCTION; Schema: herald_upgrade_fixture; Owner: -
--

CREATE FUNCTION herald_upgrade_fixture.herald_ms(ts timestamp with time zone) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$ SELECT (extract(epoch FROM ts) * 1000)::bigint $$;


--
-- Name: herald_now(bigint); Type: FUNCTION; Schema: herald_upgrade_fixture; Owner: -
--

CREATE FUNCTION herald_upgrade_fixture.herald_now(ms bigint) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$ SELECT coalesce(to_timestamp(ms / 1000.0), now()) $$;


--
-- Name: herald_ts(bigint); Type: FUNCTION; Schema: herald_upgrade_fixture; Owner: -
--

CREATE FUNCTION herald_upgrade_fixture.herald_ts(ms bigint) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT to_timestamp(ms / 1000.0) $$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: api_keys; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.api_keys (
    key_id text NOT NULL,
    tenant_id uuid NOT NULL,
    secret_sha256 bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT api_keys_secret_sha256_check CHECK ((length(secret_sha256) = 32))
);


--
-- Name: deliveries; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.deliveries (
    id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    operation_key text NOT NULL,
    channel text NOT NULL,
    recipient text NOT NULL,
    fingerprint bytea NOT NULL,
    quota_key text NOT NULL,
    cost bigint NOT NULL,
    state text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer NOT NULL,
    attempts_base integer DEFAULT 0 NOT NULL,
    reservation_seq integer DEFAULT 1 NOT NULL,
    next_attempt_at timestamp with time zone NOT NULL,
    lease_owner text,
    lease_until timestamp with time zone,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    attempt_worker text,
    attempt_started_at timestamp with time zone,
    CONSTRAINT deliveries_attempts_base_check CHECK ((attempts_base >= 0)),
    CONSTRAINT deliveries_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT deliveries_cost_check CHECK ((cost >= 0)),
    CONSTRAINT deliveries_lease_only_when_sending CHECK (((state = 'sending'::text) = ((lease_owner IS NOT NULL) AND (lease_until IS NOT NULL)))),
    CONSTRAINT deliveries_max_attempts_check CHECK ((max_attempts >= 1)),
    CONSTRAINT deliveries_operation_key_check CHECK (((length(operation_key) >= 1) AND (length(operation_key) <= 255))),
    CONSTRAINT deliveries_reservation_seq_check CHECK ((reservation_seq >= 1)),
    CONSTRAINT deliveries_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'sending'::text, 'sent'::text, 'failed'::text, 'cancelled'::text])))
);


--
-- Name: delivery_attempts; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.delivery_attempts (
    delivery_id uuid NOT NULL,
    n integer NOT NULL,
    worker text NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    outcome text,
    error_code text,
    error_message text,
    CONSTRAINT delivery_attempts_n_check CHECK ((n >= 1)),
    CONSTRAINT delivery_attempts_outcome_check CHECK ((outcome = ANY (ARRAY['sent'::text, 'transient'::text, 'terminal'::text, 'lost'::text, 'late_sent'::text])))
);


--
-- Name: delivery_payloads; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.delivery_payloads (
    delivery_id uuid NOT NULL,
    payload jsonb NOT NULL
);


--
-- Name: delivery_replays; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.delivery_replays (
    delivery_id uuid NOT NULL,
    reservation_seq integer NOT NULL,
    at timestamp with time zone NOT NULL,
    CONSTRAINT delivery_replays_reservation_seq_check CHECK ((reservation_seq >= 2))
);


--
-- Name: herald_migrations; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.herald_migrations (
    version bigint NOT NULL,
    description text NOT NULL,
    installed_on timestamp with time zone DEFAULT now() NOT NULL,
    success boolean NOT NULL,
    checksum bytea NOT NULL,
    execution_time bigint NOT NULL
);


--
-- Name: quota_accounts; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.quota_accounts (
    tenant_id uuid NOT NULL,
    quota_key text NOT NULL,
    granted bigint DEFAULT 0 NOT NULL,
    available bigint DEFAULT 0 NOT NULL,
    reserved bigint DEFAULT 0 NOT NULL,
    spent bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT quota_accounts_available_check CHECK ((available >= 0)),
    CONSTRAINT quota_accounts_balanced CHECK ((granted = ((available + reserved) + spent))),
    CONSTRAINT quota_accounts_granted_check CHECK ((granted >= 0)),
    CONSTRAINT quota_accounts_quota_key_check CHECK (((length(quota_key) >= 1) AND (length(quota_key) <= 100))),
    CONSTRAINT quota_accounts_reserved_check CHECK ((reserved >= 0)),
    CONSTRAINT quota_accounts_spent_check CHECK ((spent >= 0))
);


--
-- Name: quota_journal; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.quota_journal (
    id bigint NOT NULL,
    tenant_id uuid NOT NULL,
    quota_key text NOT NULL,
    kind text NOT NULL,
    amount bigint NOT NULL,
    delivery_id uuid,
    reservation_seq integer,
    idempotency_key text,
    at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT quota_journal_amount_check CHECK ((amount > 0)),
    CONSTRAINT quota_journal_check CHECK (((kind = 'grant'::text) = (delivery_id IS NULL))),
    CONSTRAINT quota_journal_check1 CHECK (((delivery_id IS NULL) = (reservation_seq IS NULL))),
    CONSTRAINT quota_journal_kind_check CHECK ((kind = ANY (ARRAY['grant'::text, 'reserve'::text, 'commit'::text, 'release'::text])))
);


--
-- Name: quota_journal_id_seq; Type: SEQUENCE; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE herald_upgrade_fixture.quota_journal ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME herald_upgrade_fixture.quota_journal_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: receipts; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.receipts (
    scope text NOT NULL,
    operation_id text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT receipts_operation_id_check CHECK (((length(operation_id) >= 1) AND (length(operation_id) <= 255))),
    CONSTRAINT receipts_scope_check CHECK (((length(scope) >= 1) AND (length(scope) <= 200)))
);


--
-- Name: tenants; Type: TABLE; Schema: herald_upgrade_fixture; Owner: -
--

CREATE TABLE herald_upgrade_fixture.tenants (
    id uuid NOT NULL,
    name text NOT NULL,
    webhook_secret text NOT NULL,
    webhook_secret_previous text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenants_name_check CHECK (((length(name) >= 1) AND (length(name) <= 200)))
);


--
-- Data for Name: api_keys; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--

INSERT INTO herald_upgrade_fixture.api_keys VALUES ('74ead73bfbd48276', '01a231a9-5a1a-704a-a748-552799858ac8', '\x077852c2ce9bc7f670ed15c3f300e23eccd48319db2d7db32ca9c94ee6429e8b', '2026-12-01 12:51:52.069897+00', NULL);


--
-- Data for Name: deliveries; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--

INSERT INTO herald_upgrade_fixture.deliveries VALUES ('01a231a9-5b68-71e5-af95-0b6a56bf2c6f', '01a231a9-5a1a-704a-a748-552799858ac8', 'explicit', 'webhook', 'http://127.0.0.1:9/hooks/b', '\x92dbbe9bfc24fca9319a039b945c38cdb569448b5b66d7ce91a8d088c55d4391', 'premium', 2, 'pending', 0, 3, 0, 1, '2099-01-02 03:04:05+00', NULL, NULL, NULL, '2026-12-01 12:51:52.300609+00', '2026-12-01 12:51:52.300609+00', NULL, NULL, NULL);
INSERT INTO herald_upgrade_fixture.deliveries VALUES ('01a231a9-5b79-735d-baaa-55249c9207f1', '01a231a9-5a1a-704a-a748-552799858ac8', 'explicit-default', 'webhook', 'http://127.0.0.1:9/hooks/c', '\x5e25e4fa19e59a200936ce05c4614bf8755ea71c4caa0a5829a3d88f47a0e84a', 'webhook', 1, 'pending', 0, 12, 0, 1, '2099-05-31 22:00:00+00', NULL, NULL, NULL, '2026-12-01 12:51:52.314786+00', '2026-12-01 12:51:52.314786+00', NULL, NULL, NULL);
INSERT INTO herald_upgrade_fixture.deliveries VALUES ('01a231a9-5ab0-7712-bd92-7b60c220cf48', '01a231a9-5a1a-704a-a748-552799858ac8', 'plain', 'webhook', 'http://127.0.0.1:9/hooks/a', '\xd438c0fff9cd309d9da9a53a25496a6bf2490fdfba4368631e1b627375e321e7', 'webhook', 1, 'pending', 2, 12, 0, 1, '2026-12-01 12:51:53.604794+00', NULL, NULL, 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)', '2026-12-01 12:51:52.114102+00', '2026-12-01 12:51:52.432794+00', NULL, NULL, '2026-12-01 12:51:52.427462+00');
INSERT INTO herald_upgrade_fixture.deliveries VALUES ('01a231a9-5ac2-72d6-89ce-16e4e495b3da', '01a231a9-5a1a-704a-a748-552799858ac8', 'float', 'webhook', 'http://127.0.0.1:9/hooks/a', '\x31af201739460336acd3ff73a724873cbe1e95a122544df3f31a9752f83b8424', 'webhook', 1, 'pending', 2, 12, 0, 1, '2026-12-01 12:51:54.635748+00', NULL, NULL, 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)', '2026-12-01 12:51:52.135711+00', '2026-12-01 12:51:52.666748+00', NULL, NULL, '2026-12-01 12:51:52.660159+00');
INSERT INTO herald_upgrade_fixture.deliveries VALUES ('01a231a9-5ad3-759e-ac7e-784b53e0d329', '01a231a9-5a1a-704a-a748-552799858ac8', 'beyond-u64', 'webhook', 'http://127.0.0.1:9/hooks/a', '\x28664215bd7891646ba189098ff74e85879745346f7241e50805f9d400e07c14', 'webhook', 1, 'pending', 2, 12, 0, 1, '2026-12-01 12:51:53.942402+00', NULL, NULL, 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)', '2026-12-01 12:51:52.14824+00', '2026-12-01 12:51:52.876402+00', NULL, NULL, '2026-12-01 12:51:52.865166+00');
INSERT INTO herald_upgrade_fixture.deliveries VALUES ('01a231a9-5b44-7318-9a5f-f614a0b779b8', '01a231a9-5a1a-704a-a748-552799858ac8', 'integers', 'webhook', 'http://127.0.0.1:9/hooks/a', '\xc33e44e28738c8d5fdd04f5000c5fecbe3524713c8701f2a6c5e1a1aea50ceb8', 'webhook', 1, 'pending', 2, 12, 0, 1, '2026-12-01 12:51:53.971097+00', NULL, NULL, 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)', '2026-12-01 12:51:52.260808+00', '2026-12-01 12:51:52.982097+00', NULL, NULL, '2026-12-01 12:51:52.975436+00');
INSERT INTO herald_upgrade_fixture.deliveries VALUES ('01a231a9-5b4c-76c9-91fb-b3ac6d013692', '01a231a9-5a1a-704a-a748-552799858ac8', 'strings', 'webhook', 'http://127.0.0.1:9/hooks/a', '\x2daf536e303d5e26d192a55c4ea24a04bd2ea964a0835e09b8d488a36072e11a', 'webhook', 1, 'pending', 3, 12, 0, 1, '2026-12-01 12:51:55.93107+00', NULL, NULL, 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)', '2026-12-01 12:51:52.268515+00', '2026-12-01 12:51:53.18007+00', NULL, NULL, '2026-12-01 12:51:53.175099+00');
INSERT INTO herald_upgrade_fixture.deliveries VALUES ('01a231a9-5b54-762a-a69c-f6d16aeeabef', '01a231a9-5a1a-704a-a748-552799858ac8', 'order', 'webhook', 'http://127.0.0.1:9/hooks/a', '\xe4dbbd959e479cc021b70b6fdd4092141e5743fa057a8ff77fec8f7f50cb457e', 'webhook', 1, 'pending', 2, 12, 0, 1, '2026-12-01 12:51:54.43896+00', NULL, NULL, 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)', '2026-12-01 12:51:52.278135+00', '2026-12-01 12:51:53.30196+00', NULL, NULL, '2026-12-01 12:51:53.296292+00');


--
-- Data for Name: delivery_attempts; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--

INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5ac2-72d6-89ce-16e4e495b3da', 1, 'w12689-239d362d', '2026-12-01 12:51:52.147+00', '2026-12-01 12:51:52.158503+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5ad3-759e-ac7e-784b53e0d329', 1, 'w12689-239d362d', '2026-12-01 12:51:52.152+00', '2026-12-01 12:51:52.168713+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5ab0-7712-bd92-7b60c220cf48', 1, 'w12689-239d362d', '2026-12-01 12:51:52.126+00', '2026-12-01 12:51:52.245255+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5b44-7318-9a5f-f614a0b779b8', 1, 'w12689-239d362d', '2026-12-01 12:51:52.264+00', '2026-12-01 12:51:52.281756+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5b4c-76c9-91fb-b3ac6d013692', 1, 'w12689-239d362d', '2026-12-01 12:51:52.279+00', '2026-12-01 12:51:52.291124+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5b54-762a-a69c-f6d16aeeabef', 1, 'w12689-239d362d', '2026-12-01 12:51:52.289+00', '2026-12-01 12:51:52.30977+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5b4c-76c9-91fb-b3ac6d013692', 2, 'w12689-239d362d', '2026-12-01 12:51:52.366+00', '2026-12-01 12:51:52.375424+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5ab0-7712-bd92-7b60c220cf48', 2, 'w12689-239d362d', '2026-12-01 12:51:52.427+00', '2026-12-01 12:51:52.432794+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5ac2-72d6-89ce-16e4e495b3da', 2, 'w12689-239d362d', '2026-12-01 12:51:52.66+00', '2026-12-01 12:51:52.666748+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5ad3-759e-ac7e-784b53e0d329', 2, 'w12689-239d362d', '2026-12-01 12:51:52.865+00', '2026-12-01 12:51:52.876402+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5b44-7318-9a5f-f614a0b779b8', 2, 'w12689-239d362d', '2026-12-01 12:51:52.975+00', '2026-12-01 12:51:52.982097+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5b4c-76c9-91fb-b3ac6d013692', 3, 'w12689-239d362d', '2026-12-01 12:51:53.175+00', '2026-12-01 12:51:53.18007+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');
INSERT INTO herald_upgrade_fixture.delivery_attempts VALUES ('01a231a9-5b54-762a-a69c-f6d16aeeabef', 2, 'w12689-239d362d', '2026-12-01 12:51:53.296+00', '2026-12-01 12:51:53.30196+00', 'transient', 'connection', 'error sending request for url (http://127.0.0.1:9/hooks/a): client error (Connect): tcp connect error: Connection refused (os error 111)');


--
-- Data for Name: delivery_payloads; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--

INSERT INTO herald_upgrade_fixture.delivery_payloads VALUES ('01a231a9-5ab0-7712-bd92-7b60c220cf48', '{"event": "order.paid", "order": 1042}');
INSERT INTO herald_upgrade_fixture.delivery_payloads VALUES ('01a231a9-5ac2-72d6-89ce-16e4e495b3da', '{"big": 1000000000000000000000, "tiny": 0.0000001, "price": 19.99, "amount": 0.3}');
INSERT INTO herald_upgrade_fixture.delivery_payloads VALUES ('01a231a9-5ad3-759e-ac7e-784b53e0d329', '{"m": -9223372036854776000, "n": 18446744073709552000}');
INSERT INTO herald_upgrade_fixture.delivery_payloads VALUES ('01a231a9-5b44-7318-9a5f-f614a0b779b8', '{"max": 18446744073709551615, "min": -9223372036854775808, "long": 123456789012345670000, "zero": 0.0, "hundred": 100.0}');
INSERT INTO herald_upgrade_fixture.delivery_payloads VALUES ('01a231a9-5b4c-76c9-91fb-b3ac6d013692', '{"ctl": "\u0001\b\t\f\r", "raw": "été 😀", "text": "Grüße\n\"quoted\" \\ /", "emoji": "😀"}');
INSERT INTO herald_upgrade_fixture.delivery_payloads VALUES ('01a231a9-5b54-762a-a69c-f6d16aeeabef', '{"E": {}, "a": true, "z": {"a": null, "b": [1, 2.5, 0.0]}, "é": []}');
INSERT INTO herald_upgrade_fixture.delivery_payloads VALUES ('01a231a9-5b68-71e5-af95-0b6a56bf2c6f', '{"k": "v"}');
INSERT INTO herald_upgrade_fixture.delivery_payloads VALUES ('01a231a9-5b79-735d-baaa-55249c9207f1', '[1, "two", {"three": 3}]');


--
-- Data for Name: delivery_replays; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--



--
-- Data for Name: herald_migrations; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--

INSERT INTO herald_upgrade_fixture.herald_migrations VALUES (1, 'foundation', '2026-12-01 12:51:51.819266+00', true, '\x3200e6761e1eb0f2c932dd97dad7dd0120ecc36445da304e203a5a4ce46d4579a9883c09fd96b2f575f0dd8518d6306a', 82255901);
INSERT INTO herald_upgrade_fixture.herald_migrations VALUES (2, 'engine', '2026-12-01 12:51:51.903212+00', true, '\x02b9a7ee465831fe0f02e5311e0ab674382e3e7d7ff555ddb67bd8e4746c5fd0a12e266a4d09169be29241ceaefa39fb', 9018869);
INSERT INTO herald_upgrade_fixture.herald_migrations VALUES (3, 'attempt on row', '2026-12-01 12:51:51.912866+00', true, '\xd8b7302f934b1f00c96cc9551ccf1cb83ba21a38fb7732eb96b3ad078372b5580fe17f86badf99808614507709609f84', 2111401);
INSERT INTO herald_upgrade_fixture.herald_migrations VALUES (4, 'inline ms', '2026-12-01 12:51:51.915526+00', true, '\xcb7572fbde72f30b0a73665e93a416c71859716aa5044a013a73f3246d5fd1ccab99055d119b876ba7bc7bd5391fb694', 1368708);


--
-- Data for Name: quota_accounts; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--

INSERT INTO herald_upgrade_fixture.quota_accounts VALUES ('01a231a9-5a1a-704a-a748-552799858ac8', 'premium', 100, 98, 2, 0, '2026-12-01 12:51:52.300609+00');
INSERT INTO herald_upgrade_fixture.quota_accounts VALUES ('01a231a9-5a1a-704a-a748-552799858ac8', 'webhook', 100, 93, 7, 0, '2026-12-01 12:51:52.314786+00');


--
-- Data for Name: quota_journal; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--

INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (1, '01a231a9-5a1a-704a-a748-552799858ac8', 'webhook', 'grant', 100, NULL, NULL, NULL, '2026-12-01 12:51:52.08202+00');
INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (2, '01a231a9-5a1a-704a-a748-552799858ac8', 'premium', 'grant', 100, NULL, NULL, NULL, '2026-12-01 12:51:52.098507+00');
INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (3, '01a231a9-5a1a-704a-a748-552799858ac8', 'webhook', 'reserve', 1, '01a231a9-5ab0-7712-bd92-7b60c220cf48', 1, NULL, '2026-12-01 12:51:52.114102+00');
INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (4, '01a231a9-5a1a-704a-a748-552799858ac8', 'webhook', 'reserve', 1, '01a231a9-5ac2-72d6-89ce-16e4e495b3da', 1, NULL, '2026-12-01 12:51:52.135711+00');
INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (5, '01a231a9-5a1a-704a-a748-552799858ac8', 'webhook', 'reserve', 1, '01a231a9-5ad3-759e-ac7e-784b53e0d329', 1, NULL, '2026-12-01 12:51:52.14824+00');
INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (6, '01a231a9-5a1a-704a-a748-552799858ac8', 'webhook', 'reserve', 1, '01a231a9-5b44-7318-9a5f-f614a0b779b8', 1, NULL, '2026-12-01 12:51:52.260808+00');
INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (7, '01a231a9-5a1a-704a-a748-552799858ac8', 'webhook', 'reserve', 1, '01a231a9-5b4c-76c9-91fb-b3ac6d013692', 1, NULL, '2026-12-01 12:51:52.268515+00');
INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (8, '01a231a9-5a1a-704a-a748-552799858ac8', 'webhook', 'reserve', 1, '01a231a9-5b54-762a-a69c-f6d16aeeabef', 1, NULL, '2026-12-01 12:51:52.278135+00');
INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (9, '01a231a9-5a1a-704a-a748-552799858ac8', 'premium', 'reserve', 2, '01a231a9-5b68-71e5-af95-0b6a56bf2c6f', 1, NULL, '2026-12-01 12:51:52.300609+00');
INSERT INTO herald_upgrade_fixture.quota_journal OVERRIDING SYSTEM VALUE VALUES (10, '01a231a9-5a1a-704a-a748-552799858ac8', 'webhook', 'reserve', 1, '01a231a9-5b79-735d-baaa-55249c9207f1', 1, NULL, '2026-12-01 12:51:52.314786+00');


--
-- Data for Name: receipts; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--



--
-- Data for Name: tenants; Type: TABLE DATA; Schema: herald_upgrade_fixture; Owner: -
--

INSERT INTO herald_upgrade_fixture.tenants VALUES ('01a231a9-5a1a-704a-a748-552799858ac8', 'fixture', 'whsec_4QUkoGT2MphkFBe5g78SvFAsr6vAdpIwlEFNyz3AZbo=', NULL, '2026-12-01 12:51:52.069897+00');


--
-- Name: quota_journal_id_seq; Type: SEQUENCE SET; Schema: herald_upgrade_fixture; Owner: -
--

SELECT pg_catalog.setval('herald_upgrade_fixture.quota_journal_id_seq', 10, true);


--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (key_id);


--
-- Name: api_keys api_keys_secret_sha256_key; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.api_keys
    ADD CONSTRAINT api_keys_secret_sha256_key UNIQUE (secret_sha256);


--
-- Name: deliveries deliveries_identity; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.deliveries
    ADD CONSTRAINT deliveries_identity UNIQUE (tenant_id, operation_key, channel);


--
-- Name: deliveries deliveries_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.deliveries
    ADD CONSTRAINT deliveries_pkey PRIMARY KEY (id);


--
-- Name: delivery_attempts delivery_attempts_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.delivery_attempts
    ADD CONSTRAINT delivery_attempts_pkey PRIMARY KEY (delivery_id, n);


--
-- Name: delivery_payloads delivery_payloads_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.delivery_payloads
    ADD CONSTRAINT delivery_payloads_pkey PRIMARY KEY (delivery_id);


--
-- Name: delivery_replays delivery_replays_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.delivery_replays
    ADD CONSTRAINT delivery_replays_pkey PRIMARY KEY (delivery_id, reservation_seq);


--
-- Name: herald_migrations herald_migrations_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.herald_migrations
    ADD CONSTRAINT herald_migrations_pkey PRIMARY KEY (version);


--
-- Name: quota_accounts quota_accounts_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.quota_accounts
    ADD CONSTRAINT quota_accounts_pkey PRIMARY KEY (tenant_id, quota_key);


--
-- Name: quota_journal quota_journal_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.quota_journal
    ADD CONSTRAINT quota_journal_pkey PRIMARY KEY (id);


--
-- Name: receipts receipts_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.receipts
    ADD CONSTRAINT receipts_pkey PRIMARY KEY (scope, operation_id);


--
-- Name: tenants tenants_name_key; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.tenants
    ADD CONSTRAINT tenants_name_key UNIQUE (name);


--
-- Name: tenants tenants_pkey; Type: CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (id);


--
-- Name: api_keys_tenant; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE INDEX api_keys_tenant ON herald_upgrade_fixture.api_keys USING btree (tenant_id);


--
-- Name: deliveries_due; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE INDEX deliveries_due ON herald_upgrade_fixture.deliveries USING btree (next_attempt_at) WHERE (state = 'pending'::text);


--
-- Name: deliveries_final; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE INDEX deliveries_final ON herald_upgrade_fixture.deliveries USING btree (updated_at) WHERE (state = ANY (ARRAY['sent'::text, 'failed'::text, 'cancelled'::text]));


--
-- Name: deliveries_leased; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE INDEX deliveries_leased ON herald_upgrade_fixture.deliveries USING btree (lease_until) WHERE (state = 'sending'::text);


--
-- Name: deliveries_tenant_id; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE INDEX deliveries_tenant_id ON herald_upgrade_fixture.deliveries USING btree (tenant_id, id DESC);


--
-- Name: quota_journal_account; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE INDEX quota_journal_account ON herald_upgrade_fixture.quota_journal USING btree (tenant_id, quota_key, id);


--
-- Name: quota_journal_grant_once; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE UNIQUE INDEX quota_journal_grant_once ON herald_upgrade_fixture.quota_journal USING btree (tenant_id, quota_key, idempotency_key) WHERE ((kind = 'grant'::text) AND (idempotency_key IS NOT NULL));


--
-- Name: quota_journal_one_final; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE UNIQUE INDEX quota_journal_one_final ON herald_upgrade_fixture.quota_journal USING btree (delivery_id, reservation_seq) WHERE (kind = ANY (ARRAY['commit'::text, 'release'::text]));


--
-- Name: quota_journal_one_reserve; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE UNIQUE INDEX quota_journal_one_reserve ON herald_upgrade_fixture.quota_journal USING btree (delivery_id, reservation_seq) WHERE (kind = 'reserve'::text);


--
-- Name: receipts_created_at; Type: INDEX; Schema: herald_upgrade_fixture; Owner: -
--

CREATE INDEX receipts_created_at ON herald_upgrade_fixture.receipts USING btree (created_at);


--
-- Name: api_keys api_keys_tenant_id_fkey; Type: FK CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.api_keys
    ADD CONSTRAINT api_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES herald_upgrade_fixture.tenants(id);


--
-- Name: deliveries deliveries_tenant_id_fkey; Type: FK CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.deliveries
    ADD CONSTRAINT deliveries_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES herald_upgrade_fixture.tenants(id);


--
-- Name: delivery_attempts delivery_attempts_delivery_id_fkey; Type: FK CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.delivery_attempts
    ADD CONSTRAINT delivery_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES herald_upgrade_fixture.deliveries(id) ON DELETE CASCADE;


--
-- Name: delivery_payloads delivery_payloads_delivery_id_fkey; Type: FK CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.delivery_payloads
    ADD CONSTRAINT delivery_payloads_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES herald_upgrade_fixture.deliveries(id) ON DELETE CASCADE;


--
-- Name: delivery_replays delivery_replays_delivery_id_fkey; Type: FK CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.delivery_replays
    ADD CONSTRAINT delivery_replays_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES herald_upgrade_fixture.deliveries(id) ON DELETE CASCADE;


--
-- Name: quota_accounts quota_accounts_tenant_id_fkey; Type: FK CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.quota_accounts
    ADD CONSTRAINT quota_accounts_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES herald_upgrade_fixture.tenants(id);


--
-- Name: quota_journal quota_journal_tenant_id_quota_key_fkey; Type: FK CONSTRAINT; Schema: herald_upgrade_fixture; Owner: -
--

ALTER TABLE ONLY herald_upgrade_fixture.quota_journal
    ADD CONSTRAINT quota_journal_tenant_id_quota_key_fkey FOREIGN KEY (tenant_id, quota_key) REFERENCES herald_upgrade_fixture.quota_accounts(tenant_id, quota_key);


--
-- PostgreSQL database dump complete
--

\unrestrict igHSUx0NqW33xC7QbesAzyBZ6mpeddssG9LhdDrQnY2MWrtLjhfXObXYvDpMGgb

