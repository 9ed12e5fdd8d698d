//! Operator commands on the database: tenants, keys, quotas, deliveries. Human tables by
//! default, `--json` for scripts.

use anyhow::{Context, Result, anyhow, bail};
use herald::{
    AuditActor, AuditEntry, BulkAction, BulkFilter, Delivery, DeliveryFilter, DeliveryId,
    DeliveryState, Herald, TenantId,
};
use herald_core::limits::OPERATOR_LIST_MAX;
use uuid::Uuid;

#[derive(clap::Args)]
pub struct Db {
    /// Database: a file path or sqlite://PATH, postgres://…, or mariadb://… / mysql://…
    #[arg(long, global = true, env = "HERALD_DB", default_value = crate::DB_DEFAULT)]
    db: String,
    /// Print JSON.
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

/// The URL prints without its password.
impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("db", &herald_core::redact_url(&self.db))
            .field("json", &self.json)
            .finish()
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum TenantCmd {
    /// Create a tenant; prints its API key and webhook secret once.
    Create { name: String },
}

#[derive(Debug, clap::Subcommand)]
pub enum KeyCmd {
    /// Create another API key for a tenant; prints it once.
    Create { tenant: String },
    /// Revoke a key (by its public key id).
    Revoke { tenant: String, key_id: String },
}

#[derive(Debug, clap::Subcommand)]
pub enum QuotaCmd {
    /// Add units to a tenant's quota account.
    Grant {
        tenant: String,
        quota_key: String,
        #[arg(allow_hyphen_values = true)]
        amount: String,
        /// Makes a retried grant count once.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// A tenant's accounts.
    Show { tenant: String },
}

#[derive(Debug, clap::Subcommand)]
pub enum DeliveriesCmd {
    /// A tenant's deliveries, newest first.
    List {
        tenant: String,
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        channel: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// One delivery.
    Show { id: String },
    /// A delivery's attempts.
    Attempts { id: String },
    /// Re-queue a failed or cancelled delivery (same id, new reservation); or, with
    /// --tenant and filters instead of an id, every delivery they match (up to 10,000 a
    /// call; --dry-run only counts).
    Replay {
        id: Option<String>,
        #[command(flatten)]
        matching: Matching,
    },
    /// Cancel a pending delivery (its reservation is released); or, with --tenant and
    /// filters instead of an id, every delivery they match.
    Cancel {
        id: Option<String>,
        #[command(flatten)]
        matching: Matching,
    },
}

/// Which deliveries a bulk replay or cancel takes.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("scope").args(["tenant", "all_tenants"])))]
pub struct Matching {
    /// The tenant whose deliveries to take (instead of one delivery's id).
    #[arg(long, conflicts_with = "id")]
    tenant: Option<String>,
    /// Every tenant's deliveries (an incident across tenants).
    #[arg(long, conflicts_with_all = ["id", "tenant"])]
    all_tenants: bool,
    /// pending, sending, sent, failed or cancelled.
    #[arg(long, requires = "scope")]
    state: Option<String>,
    #[arg(long, requires = "scope")]
    channel: Option<String>,
    /// Created at or after this time (RFC 3339).
    #[arg(long, requires = "scope")]
    from: Option<String>,
    /// Created before this time (RFC 3339).
    #[arg(long, requires = "scope")]
    to: Option<String>,
    /// The error code of the latest attempt, e.g. http_500.
    #[arg(long, requires = "scope")]
    error_code: Option<String>,
    /// Only deliveries to this destination: a webhook's host, or smtp for email.
    #[arg(long, requires = "scope")]
    destination: Option<String>,
    /// Only count what matches; change nothing.
    #[arg(long, requires = "scope")]
    dry_run: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum SettingsCmd {
    /// The shared settings.
    Show,
    /// Change them; running processes use the new ones within 10 seconds.
    Set {
        /// Attempts a delivery gets when its submit does not say (1 to 100).
        #[arg(long)]
        max_attempts: String,
    },
    /// Replace the dashboard's session secret (random, kept in the database): every
    /// dashboard session ends, in running servers within 10 seconds.
    RotateSessionSecret,
}

#[derive(Debug, clap::Subcommand)]
pub enum SqlCmd {
    /// Let a database role submit through SQL for a tenant, or for every tenant. On
    /// PostgreSQL (`herald_submit_v1`) it gets USAGE on herald's schema; on MariaDB
    /// (`submit_v1`) ROLE is a user name, whose every account gets EXECUTE on the
    /// procedures. The role must exist.
    Grant {
        role: String,
        #[command(flatten)]
        tenants: SqlTenants,
    },
    /// Take back a grant (the same tenant, or --all-tenants).
    Revoke {
        role: String,
        #[command(flatten)]
        tenants: SqlTenants,
    },
    /// Every grant.
    Grants,
}

#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct SqlTenants {
    /// The tenant's id.
    #[arg(long)]
    tenant: Option<String>,
    /// Every tenant, present and future.
    #[arg(long)]
    all_tenants: bool,
}

/// A tenant's, a delivery's or a key's id from the command line.
pub(crate) fn uuid<T: From<Uuid>>(what: &str, raw: &str) -> Result<T> {
    Uuid::try_parse(raw).map(T::from).map_err(|_| anyhow!("{what} {raw:?} is not a UUID"))
}

pub(crate) async fn open(db: &Db) -> Result<Herald> {
    Ok(Herald::open(&db.db).await?)
}

/// Writes the audit entry of an operator's action, which has already happened: a failure
/// is said, not made the command's.
pub(crate) async fn logged(herald: &Herald, entry: AuditEntry) {
    if let Err(e) = herald.audit(entry).await {
        eprintln!("warning: the audit entry was not written: {e}");
    }
}

/// An operator's `action` on `tenant`.
pub(crate) fn by_operator(tenant: Option<TenantId>, action: &'static str) -> AuditEntry {
    AuditEntry::new(AuditActor::Operator, tenant, action)
}

pub async fn tenant(db: Db, cmd: TenantCmd) -> Result<()> {
    let herald = open(&db).await?;
    match cmd {
        TenantCmd::Create { name } => {
            // The tenant and its first key are one transaction: a failure leaves neither.
            let tenant = herald.tenant_create(&name).await?;
            let key = &tenant.api_key;
            let entry = by_operator(Some(tenant.id), "tenant_create");
            logged(&herald, entry.target(key.key_id.to_string())).await;
            if db.json {
                println!(
                    "{}",
                    serde_json::json!({"id": tenant.id.to_string(), "name": tenant.name, "api_key": key.plaintext, "webhook_secret": tenant.webhook_secret})
                );
            } else {
                println!("tenant         {}  {}", tenant.id, tenant.name);
                println!("api key        {}", key.plaintext);
                println!("webhook secret {}", tenant.webhook_secret);
                println!("(both are shown once; store them now)");
            }
        }
    }
    herald.close().await;
    Ok(())
}

async fn new_key(herald: &Herald, tenant: TenantId) -> Result<herald::NewApiKey> {
    herald.api_key_create(tenant).await.map_err(|e| match e {
        herald::Error::UnknownTenant => anyhow!("no tenant {tenant}"),
        e => e.into(),
    })
}

pub async fn key(db: Db, cmd: KeyCmd) -> Result<()> {
    let herald = open(&db).await?;
    match cmd {
        KeyCmd::Create { tenant } => {
            let tenant = uuid("tenant", &tenant)?;
            let key = new_key(&herald, tenant).await?;
            logged(&herald, by_operator(Some(tenant), "key_create").target(key.key_id.to_string()))
                .await;
            if db.json {
                println!(
                    "{}",
                    serde_json::json!({"key_id": key.key_id.as_str(), "api_key": key.plaintext})
                );
            } else {
                println!("key id  {}\napi key {}\n(shown once)", key.key_id, key.plaintext);
            }
        }
        KeyCmd::Revoke { tenant, key_id } => {
            let tenant: TenantId = uuid("tenant", &tenant)?;
            // A malformed key id names no key, as over HTTP.
            let Some(key) = herald::KeyId::parse(&key_id) else {
                bail!("no key {key_id:?} for tenant {tenant}");
            };
            if !herald.api_key_revoke(tenant, &key).await? {
                bail!("no key {key_id:?} for tenant {tenant}");
            }
            logged(&herald, by_operator(Some(tenant), "key_revoke").target(key.as_str())).await;
            if db.json {
                println!("{}", serde_json::json!({"key_id": key_id, "revoked": true}));
            } else {
                println!("revoked {key_id}");
            }
        }
    }
    herald.close().await;
    Ok(())
}

pub async fn quota(db: Db, cmd: QuotaCmd) -> Result<()> {
    // Bad input is refused before the database is opened (or created).
    let tenant_id = match &cmd {
        QuotaCmd::Grant { tenant, .. } | QuotaCmd::Show { tenant } => uuid("tenant", tenant)?,
    };
    let amount = match &cmd {
        QuotaCmd::Grant { amount, .. } => Some(
            amount
                .parse::<i64>()
                .map_err(|_| anyhow!("amount {amount:?} is not a whole number"))?,
        ),
        QuotaCmd::Show { .. } => None,
    };
    let max = herald_core::limits::GRANT_MAX;
    if amount.is_some_and(|a| !(1..=max).contains(&a)) {
        bail!("amount must be between 1 and {max}");
    }
    let herald = open(&db).await?;
    if let (QuotaCmd::Grant { quota_key, idempotency_key, .. }, Some(amount)) = (&cmd, amount) {
        let applied = herald
            .quota_grant(tenant_id, quota_key, amount, idempotency_key.as_deref())
            .await
            .map_err(|e| match e {
                herald::Error::UnknownTenant => anyhow!("no tenant {tenant_id}"),
                e => e.into(),
            })?;
        if applied {
            let entry = by_operator(Some(tenant_id), "grant").target(quota_key.as_str());
            logged(&herald, entry.count(amount)).await;
        } else if !db.json {
            println!("(already granted under this idempotency key; nothing added)");
        }
    }
    let quotas = herald.quotas(tenant_id).await?;
    if db.json {
        let rows: Vec<_> = quotas
            .iter()
            .map(|q| serde_json::json!({"quota_key": q.quota_key, "granted": q.granted, "available": q.available, "reserved": q.reserved, "spent": q.spent}))
            .collect();
        println!("{}", serde_json::json!({"quotas": rows}));
    } else {
        println!(
            "{:<20} {:>12} {:>12} {:>12} {:>12}",
            "QUOTA KEY", "GRANTED", "AVAILABLE", "RESERVED", "SPENT"
        );
        for q in quotas {
            println!(
                "{:<20} {:>12} {:>12} {:>12} {:>12}",
                q.quota_key, q.granted, q.available, q.reserved, q.spent
            );
        }
    }
    herald.close().await;
    Ok(())
}

fn delivery_json(d: &Delivery) -> serde_json::Value {
    serde_json::json!({
        "id": d.id.to_string(), "tenant": d.tenant.to_string(), "operation_key": d.operation_key, "channel": d.channel,
        "to": d.to, "state": d.state.as_str(), "attempts": d.attempts, "max_attempts": d.max_attempts,
        "quota_key": d.quota_key, "cost": d.cost, "next_attempt_at": d.next_attempt_at.to_string(),
        "last_error": d.last_error, "created_at": d.created_at.to_string(),
        "updated_at": d.updated_at.to_string(), "sent_at": d.sent_at.map(|t| t.to_string()),
    })
}

fn delivery_line(d: &Delivery) -> String {
    format!(
        "{}  {:<9} {:<8} {:>3}/{:<3} {:<24} {}",
        d.id,
        d.state.as_str(),
        d.channel,
        d.attempts,
        d.max_attempts,
        d.operation_key,
        d.last_error.as_deref().unwrap_or("")
    )
}

/// The tenant of a delivery (operators act on any tenant's deliveries).
async fn tenant_of(herald: &Herald, id: DeliveryId) -> Result<TenantId> {
    match herald.delivery_tenant(id).await {
        Err(herald::Error::NotFound) => Err(anyhow!("no delivery {id}")),
        other => Ok(other?),
    }
}

pub async fn deliveries(db: Db, cmd: DeliveriesCmd) -> Result<()> {
    let herald = open(&db).await?;
    match cmd {
        DeliveriesCmd::List { tenant, state, channel, limit } => {
            let tenant = uuid("tenant", &tenant)?;
            if !(1..=OPERATOR_LIST_MAX).contains(&limit) {
                bail!("--limit must be 1 to {OPERATOR_LIST_MAX}");
            }
            let state = match state {
                None => None,
                Some(s) => Some(s.parse::<DeliveryState>().map_err(|e| anyhow!("{e}"))?),
            };
            let filter = DeliveryFilter {
                tenant: Some(tenant),
                state,
                channel,
                error_code: None,
                key_prefix: None,
                to_prefix: None,
                failed_since: None,
                before: None,
                from: None,
                to: None,
                limit,
            };
            let list = herald.deliveries(&filter).await?;
            if db.json {
                let rows: Vec<_> = list.iter().map(delivery_json).collect();
                println!("{}", serde_json::json!({"deliveries": rows}));
            } else {
                for d in &list {
                    println!("{}", delivery_line(d));
                }
            }
        }
        DeliveriesCmd::Show { id } => {
            let id = uuid("delivery", &id)?;
            let d = herald.delivery(tenant_of(&herald, id).await?, id).await?;
            print_delivery(&d, db.json);
        }
        DeliveriesCmd::Attempts { id } => {
            let id = uuid("delivery", &id)?;
            let attempts = herald.attempts(tenant_of(&herald, id).await?, id).await?;
            if db.json {
                let rows: Vec<_> = attempts
                    .iter()
                    .map(|a| serde_json::json!({"n": a.n, "worker": a.worker, "started_at": a.started_at.to_string(), "finished_at": a.finished_at.map(|t| t.to_string()), "outcome": a.outcome, "error_code": a.error_code, "error_message": a.error_message, "release": a.release}))
                    .collect();
                println!("{}", serde_json::json!({"attempts": rows}));
            } else {
                for a in attempts {
                    println!(
                        "{:>3}  {:<10} {:<24} {:<12} {} {}",
                        a.n,
                        a.outcome.as_deref().unwrap_or("running"),
                        a.worker,
                        a.release.as_deref().unwrap_or("-"),
                        a.started_at,
                        a.error_message.as_deref().unwrap_or("")
                    );
                }
            }
        }
        DeliveriesCmd::Replay { id: Some(id), .. } => {
            let id = uuid("delivery", &id)?;
            let tenant = tenant_of(&herald, id).await?;
            let d = herald.replay(tenant, id).await.context("replay refused")?;
            logged(&herald, by_operator(Some(tenant), "replay").target(id.to_string())).await;
            print_delivery(&d, db.json);
        }
        DeliveriesCmd::Cancel { id: Some(id), .. } => {
            let id = uuid("delivery", &id)?;
            let tenant = tenant_of(&herald, id).await?;
            let d = herald.cancel(tenant, id).await.context("cancel refused")?;
            logged(&herald, by_operator(Some(tenant), "cancel").target(id.to_string())).await;
            print_delivery(&d, db.json);
        }
        DeliveriesCmd::Replay { id: None, matching } => {
            bulk(&herald, BulkAction::Replay, matching, db.json).await?;
        }
        DeliveriesCmd::Cancel { id: None, matching } => {
            bulk(&herald, BulkAction::Cancel, matching, db.json).await?;
        }
    }
    herald.close().await;
    Ok(())
}

/// A bulk replay or cancel by filter, or its dry run.
async fn bulk(herald: &Herald, action: BulkAction, m: Matching, json: bool) -> Result<()> {
    let tenant: Option<TenantId> = match (m.tenant, m.all_tenants) {
        (Some(tenant), false) => Some(uuid("tenant", &tenant)?),
        (None, true) => None,
        _ => bail!("give a delivery id, or --tenant (or --all-tenants) and filters"),
    };
    let time = |raw: Option<String>, name: &str| -> Result<Option<jiff::Timestamp>> {
        raw.map(|t| t.parse().map_err(|_| anyhow!("--{name} must be an RFC 3339 time"))).transpose()
    };
    let filter = BulkFilter {
        state: m
            .state
            .map(|s| s.parse::<DeliveryState>())
            .transpose()
            .map_err(|e| anyhow!("{e}"))?,
        channel: m.channel,
        from: time(m.from, "from")?,
        to: time(m.to, "to")?,
        error_code: m.error_code,
        destination: m
            .destination
            .as_deref()
            .map(herald_core::hold::check_destination)
            .transpose()
            .map_err(|e| anyhow!("--destination: {e}"))?,
        through: None,
        max: None,
    };
    let r = match tenant {
        Some(tenant) => herald.bulk(tenant, action, &filter, m.dry_run).await?,
        None => herald.bulk_all_tenants(action, &filter, m.dry_run).await?,
    };
    if !m.dry_run {
        let name = match action {
            BulkAction::Replay => "bulk_replay",
            BulkAction::Cancel => "bulk_cancel",
        };
        logged(herald, by_operator(tenant, name).count(r.changed as i64)).await;
    }
    if json {
        println!(
            "{}",
            serde_json::json!({"dry_run": m.dry_run, "matched": r.matched, "changed": r.changed,
                               "skipped": r.skipped, "more": r.more})
        );
    } else {
        let verb = match action {
            BulkAction::Replay => "replayed",
            BulkAction::Cancel => "cancelled",
        };
        if m.dry_run {
            println!("{} match (dry run: nothing changed)", r.matched);
        } else {
            println!("{} matched, {} {verb}, {} skipped", r.matched, r.changed, r.skipped);
        }
        if r.more {
            println!("more match than one call takes ({}): run it again", herald::BULK_MAX);
        }
    }
    Ok(())
}

fn print_delivery(d: &Delivery, json: bool) {
    if json {
        println!("{}", delivery_json(d));
    } else {
        println!("{}", delivery_line(d));
    }
}

pub async fn settings(db: Db, cmd: SettingsCmd) -> Result<()> {
    let herald = open(&db).await?;
    let settings = match cmd {
        SettingsCmd::RotateSessionSecret => {
            herald.ui_session_secret_rotate().await?;
            logged(&herald, by_operator(None, "session_secret_rotate")).await;
            match db.json {
                true => println!("{}", serde_json::json!({"rotated": "ui_session"})),
                false => println!("rotated: every dashboard session ends (within 10 s)"),
            }
            return Ok(());
        }
        SettingsCmd::Show => herald.settings_stored().await?,
        SettingsCmd::Set { max_attempts } => {
            let max_attempts = max_attempts.parse::<u32>().map_err(|_| {
                anyhow!("--max-attempts must be a whole number, got {max_attempts:?}")
            })?;
            Some(herald.settings_set(herald::Settings { max_attempts }).await?)
        }
    };
    match (settings, db.json) {
        (Some(s), true) => println!("{}", serde_json::json!({"max_attempts": s.max_attempts})),
        (Some(s), false) => println!("max_attempts  {}", s.max_attempts),
        (None, true) => println!("{}", serde_json::json!({"max_attempts": null})),
        (None, false) => println!(
            "max_attempts  (not written yet: the first herald to submit writes its HERALD_MAX_ATTEMPTS)"
        ),
    }
    Ok(())
}

pub async fn sql(db: Db, cmd: SqlCmd) -> Result<()> {
    let herald = open(&db).await?;
    let tenant_of = |t: &SqlTenants| -> Result<Option<herald::TenantId>> {
        t.tenant.as_deref().map(|raw| uuid("tenant", raw)).transpose()
    };
    let (done, what) = match &cmd {
        SqlCmd::Grant { role, tenants } => {
            (herald.sql_grant(role, tenant_of(tenants)?).await?, "granted")
        }
        SqlCmd::Revoke { role, tenants } => {
            (herald.sql_revoke(role, tenant_of(tenants)?).await?, "revoked")
        }
        SqlCmd::Grants => {
            let grants = herald.sql_grants().await?;
            let rows: Vec<_> = grants
                .iter()
                .map(|g| (g.role.clone(), g.tenant.map_or("*".to_string(), |t| t.to_string())))
                .collect();
            if db.json {
                let list: Vec<_> = rows
                    .iter()
                    .map(|(role, tenant)| serde_json::json!({"role": role, "tenant": tenant}))
                    .collect();
                println!("{}", serde_json::json!({"grants": list}));
            } else {
                for (role, tenant) in rows {
                    println!("{role}  {tenant}");
                }
            }
            return Ok(());
        }
    };
    if db.json {
        println!("{}", serde_json::json!({ what: done }));
    } else if done {
        println!("{what}");
    } else {
        println!(
            "nothing to do: it was {}",
            if what == "granted" { "granted already" } else { "not granted" }
        );
    }
    Ok(())
}

/// `herald audit-log`: the audit log, newest first.
#[derive(Debug, clap::Args)]
pub struct AuditLogArgs {
    /// One tenant's entries only (its id).
    #[arg(long)]
    tenant: Option<String>,
    /// Entries older than this id (the next page: the smallest id shown).
    #[arg(long)]
    before: Option<i64>,
    /// At most this many.
    #[arg(long, default_value_t = 100)]
    limit: usize,
}

pub async fn audit_log(db: Db, args: AuditLogArgs) -> Result<()> {
    let tenant: Option<TenantId> = args.tenant.as_deref().map(|t| uuid("tenant", t)).transpose()?;
    if !(1..=OPERATOR_LIST_MAX).contains(&args.limit) {
        bail!("--limit must be 1 to {OPERATOR_LIST_MAX}");
    }
    let herald = open(&db).await?;
    let entries = herald.audit_log(tenant, args.before, args.limit).await?;
    let at = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
    };
    if db.json {
        let rows: Vec<_> = entries
            .iter()
            .map(|e| {
                serde_json::json!({"id": e.id, "at": at(e.at), "actor": e.actor, "key_id": e.key_id,
                "tenant": e.tenant.map(|t| t.to_string()), "action": e.action, "target": e.target,
                "count": e.count, "address": e.address})
            })
            .collect();
        println!("{}", serde_json::json!({"entries": rows}));
    } else {
        for e in &entries {
            println!(
                "{:>6}  {}  {:<9} {:<16} {:<22} {:<36} {} {}",
                e.id,
                at(e.at),
                e.actor,
                e.key_id.as_deref().unwrap_or("-"),
                e.action,
                e.tenant.map_or("-".to_string(), |t| t.to_string()),
                e.target.as_deref().unwrap_or("-"),
                e.count.map_or(String::new(), |c| c.to_string()),
            );
        }
    }
    herald.close().await;
    Ok(())
}
