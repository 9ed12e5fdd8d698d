//! `herald limit`, `herald limits`, `herald send-weight`, `herald circuits`, `herald
//! enable` and `herald events-url`: the operator's side of `/v1/limits`, `/v1/circuits` and
//! the tenant's send weight and events webhook — how much a destination takes across every
//! process, a tenant's share of the slots, the lanes whose sends fail — logged as the
//! operator's.

use crate::ops::{Db, by_operator, logged, open, uuid};
use anyhow::Result;
use herald::TenantId;
use herald_core::fair::Limit;

/// A limit on the command line.
#[derive(Debug, clap::Args)]
pub struct LimitArgs {
    /// A webhook's host, `smtp` for email, a channel's name, or `*` for every destination
    /// without a limit of its own.
    destination: String,
    /// Most sends in flight at once, across every process on the database.
    #[arg(long)]
    max_in_flight: Option<u32>,
    /// Most sends started per second (a bucket of one second's worth).
    #[arg(long)]
    per_second: Option<f64>,
    /// Only this tenant's sends (its id); default: every tenant's.
    #[arg(long)]
    tenant: Option<String>,
    /// Remove the limit of this destination (and tenant) instead.
    #[arg(long, conflicts_with_all = ["max_in_flight", "per_second"])]
    remove: bool,
}

/// `herald limit`.
pub async fn change(db: Db, args: LimitArgs) -> Result<()> {
    let tenant: Option<TenantId> = args.tenant.as_deref().map(|t| uuid("tenant", t)).transpose()?;
    let herald = open(&db).await?;
    let whose = tenant.map_or("every tenant".to_string(), |t| format!("tenant {t}"));
    if args.remove {
        let removed = herald.remove_destination_limit(&args.destination, tenant).await?;
        if removed {
            let entry = by_operator(tenant, "limit_remove").target(args.destination.trim());
            logged(&herald, entry).await;
        }
        match (db.json, removed) {
            (true, _) => println!("{}", serde_json::json!({"removed": removed})),
            (false, true) => println!("removed the limit of {} ({whose})", args.destination),
            (false, false) => println!("{} ({whose}) had no limit", args.destination),
        }
    } else {
        let limit = Limit {
            destination: args.destination.clone(),
            tenant: tenant.map(|t| t.as_uuid()),
            max_in_flight: args.max_in_flight,
            per_second: args.per_second,
        };
        let limit = herald.set_destination_limit(&limit, "operator").await?;
        let entry = by_operator(tenant, "limit_set").target(limit.destination.clone());
        logged(&herald, entry).await;
        if db.json {
            println!(
                "{}",
                serde_json::json!({"destination": limit.destination,
                "tenant": limit.tenant.map(|t| t.to_string()),
                "max_in_flight": limit.max_in_flight, "per_second": limit.per_second})
            );
        } else {
            println!("{} ({whose}): {}", limit.destination, describe(&limit));
        }
    }
    herald.close().await;
    Ok(())
}

fn describe(limit: &Limit) -> String {
    let in_flight = limit.max_in_flight.map(|n| format!("at most {n} in flight"));
    let rate = limit.per_second.map(|r| format!("at most {r} per second"));
    [in_flight, rate].into_iter().flatten().collect::<Vec<_>>().join(", ")
}

/// `herald limits`: the destination limits, by destination.
pub async fn list(db: Db) -> Result<()> {
    let herald = open(&db).await?;
    let limits = herald.destination_limits(None).await?;
    if db.json {
        let rows: Vec<_> = limits
            .iter()
            .map(|l| {
                serde_json::json!({"destination": l.limit.destination,
                    "tenant": l.limit.tenant.map(|t| t.to_string()),
                    "max_in_flight": l.limit.max_in_flight, "per_second": l.limit.per_second,
                    "actor": l.actor})
            })
            .collect();
        println!("{}", serde_json::json!({"limits": rows}));
    } else if limits.is_empty() {
        println!("no destination is limited");
    } else {
        for l in &limits {
            let whose = l.limit.tenant.map_or("every tenant".to_string(), |t| t.to_string());
            println!(
                "{:<40} {:<36} {}  {}",
                l.limit.destination,
                whose,
                describe(&l.limit),
                l.actor
            );
        }
    }
    herald.close().await;
    Ok(())
}

/// `herald send-weight TENANT WEIGHT`.
pub async fn send_weight(db: Db, tenant: &str, weight: u32) -> Result<()> {
    let tenant: TenantId = uuid("tenant", tenant)?;
    let herald = open(&db).await?;
    herald.set_send_weight(tenant, weight).await?;
    logged(&herald, by_operator(Some(tenant), "send_weight").count(i64::from(weight))).await;
    match db.json {
        true => {
            println!("{}", serde_json::json!({"tenant": tenant.to_string(), "send_weight": weight}))
        }
        false => println!("tenant {tenant}: send weight {weight}"),
    }
    herald.close().await;
    Ok(())
}

/// `herald circuits`: the lanes whose sends fail, the most failures first.
pub async fn circuits(db: Db) -> Result<()> {
    let herald = open(&db).await?;
    let lanes = herald.lanes_failing(None).await?;
    let at = |ms: Option<i64>| {
        ms.and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok()).map(|t| t.to_string())
    };
    if db.json {
        let rows: Vec<_> = lanes
            .iter()
            .map(|l| {
                serde_json::json!({"tenant": l.tenant.to_string(), "destination": l.destination,
                    "circuit": l.circuit, "failures": l.health.failures,
                    "failing_since": at(l.health.failing_since_ms),
                    "disabled_at": at(l.health.disabled_ms)})
            })
            .collect();
        println!("{}", serde_json::json!({"circuits": rows}));
    } else if lanes.is_empty() {
        println!("no lane is failing");
    } else {
        for l in &lanes {
            println!(
                "{:<36} {:<40} {:<8} {:>5} failures since {}",
                l.tenant,
                l.destination,
                l.circuit,
                l.health.failures,
                at(l.health.failing_since_ms).unwrap_or_default()
            );
        }
    }
    herald.close().await;
    Ok(())
}

/// `herald enable TENANT DESTINATION`: the lane sends again.
pub async fn enable(db: Db, tenant: &str, destination: &str) -> Result<()> {
    let tenant: TenantId = uuid("tenant", tenant)?;
    let herald = open(&db).await?;
    let enabled = herald.enable_lane(tenant, destination).await?;
    if enabled {
        logged(&herald, by_operator(Some(tenant), "lane_enable").target(destination.trim())).await;
    }
    match (db.json, enabled) {
        (true, _) => println!("{}", serde_json::json!({"enabled": enabled})),
        (false, true) => println!("{destination} (tenant {tenant}) sends again"),
        (false, false) => println!("{destination} (tenant {tenant}) had no failures"),
    }
    herald.close().await;
    Ok(())
}

/// `herald events-url TENANT [URL]`: where the tenant hears of herald's events (no URL:
/// nowhere).
pub async fn events_url(db: Db, tenant: &str, url: Option<&str>) -> Result<()> {
    let tenant: TenantId = uuid("tenant", tenant)?;
    let herald = open(&db).await?;
    herald.set_events_url(tenant, url).await?;
    logged(&herald, by_operator(Some(tenant), "events_url")).await;
    match (db.json, url) {
        (true, _) => println!("{}", serde_json::json!({"tenant": tenant.to_string(), "url": url})),
        (false, Some(url)) => println!("tenant {tenant} hears of herald's events at {url}"),
        (false, None) => println!("tenant {tenant} has no events webhook"),
    }
    herald.close().await;
    Ok(())
}
