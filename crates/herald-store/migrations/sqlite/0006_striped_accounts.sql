-- herald schema 6 (SQLite): the stripe column of the striped quota accounts (issue 33),
-- for the one schema contract. SQLite has one writer, so an account is one stripe: no
-- reservation could take another while a transaction holds the first.
ALTER TABLE quota_accounts ADD COLUMN stripe INTEGER NOT NULL DEFAULT 0 CHECK (stripe = 0);
ALTER TABLE quota_journal ADD COLUMN stripe INTEGER NOT NULL DEFAULT 0 CHECK (stripe = 0);
