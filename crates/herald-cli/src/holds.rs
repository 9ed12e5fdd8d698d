//! `herald hold`, `herald release` and `herald holds`: stop sending to a channel, a tenant
//! or a destination while an incident lasts, and resume — the operator's side of
//! `POST /v1/holds` and the dashboard's pause button, logged as the operator's.

use crate::ops::{Db, by_operator, logged, open, uuid};
use anyhow::{Result, anyhow};
use herald::{HoldKind, HoldScope, TenantId};

/// A scope on the command line.
#[derive(Debug, clap::Args)]
pub struct ScopeArgs {
    /// `channel`, `tenant` or `destination` (a webhook's host, or `smtp` for email).
    kind: String,
    /// The channel's name, the tenant's id, or the destination's host.
    value: String,
    /// Only this tenant's deliveries (its id); default: every tenant's.
    #[arg(long)]
    tenant: Option<String>,
}

impl ScopeArgs {
    fn scope(&self) -> Result<HoldScope> {
        let kind = HoldKind::parse(&self.kind).ok_or_else(|| {
            anyhow!("kind must be channel, tenant or destination, got {:?}", self.kind)
        })?;
        let tenant: Option<TenantId> =
            self.tenant.as_deref().map(|t| uuid("tenant", t)).transpose()?;
        Ok(HoldScope { kind, value: self.value.clone(), tenant: tenant.map(|t| t.as_uuid()) })
    }
}

/// `herald hold` (`release: false`) and `herald release`.
pub async fn change(db: Db, args: ScopeArgs, release: bool) -> Result<()> {
    let scope = args.scope()?;
    let herald = open(&db).await?;
    let report = if release {
        herald.release_hold(&scope).await?
    } else {
        herald.hold(&scope, "operator").await?
    };
    let scope = &report.scope;
    if report.changed {
        let tenant = scope.tenant.map(TenantId::from_uuid);
        let entry = by_operator(tenant, if release { "hold_release" } else { "hold" })
            .target(format!("{}:{}", scope.kind, scope.value))
            .count(report.deliveries as i64);
        logged(&herald, entry).await;
    }
    let what = format!("{} {}", scope.kind, scope.value);
    let whose = scope.tenant.map_or("every tenant".to_string(), |t| format!("tenant {t}"));
    if db.json {
        println!(
            "{}",
            serde_json::json!({"changed": report.changed, "deliveries": report.deliveries})
        );
    } else if release {
        match report.changed {
            true => {
                println!("released {what} ({whose}): {} deliveries due again", report.deliveries)
            }
            false => println!(
                "{what} ({whose}) was not held; {} held deliveries released",
                report.deliveries
            ),
        }
    } else {
        match report.changed {
            true => {
                println!("holding {what} ({whose}): {} pending deliveries wait", report.deliveries)
            }
            false => println!(
                "{what} ({whose}) was held already; {} more pending deliveries wait",
                report.deliveries
            ),
        }
    }
    herald.close().await;
    Ok(())
}

/// `herald holds`: the holds in place, oldest first.
pub async fn list(db: Db) -> Result<()> {
    let herald = open(&db).await?;
    let holds = herald.holds(None).await?;
    let at = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
    };
    if db.json {
        let rows: Vec<_> = holds
            .iter()
            .map(|h| {
                serde_json::json!({"kind": h.scope.kind.as_str(), "value": h.scope.value,
                    "tenant": h.scope.tenant.map(|t| t.to_string()), "created_at": at(h.created_ms),
                    "actor": h.actor})
            })
            .collect();
        println!("{}", serde_json::json!({"holds": rows}));
    } else if holds.is_empty() {
        println!("nothing is held");
    } else {
        for h in &holds {
            println!(
                "{:<12} {:<40} {:<36} {}  {}",
                h.scope.kind,
                h.scope.value,
                h.scope.tenant.map_or("every tenant".to_string(), |t| t.to_string()),
                at(h.created_ms),
                h.actor
            );
        }
    }
    herald.close().await;
    Ok(())
}
