//! `fault-proxy`: the fault proxy as a program, for trying herald by hand. An example,
//! not a binary, so that `cargo run -- serve` in the workspace has one binary to run.
//!
//! ```text
//! cargo run -p herald-faults --example fault-proxy -- \
//!     --listen 127.0.0.1:15432 --upstream 127.0.0.1:5432 --reset-every 100ms
//! ```
//! then `herald serve --db postgres://postgres@127.0.0.1:15432/test`. Every
//! `--reset-every` one random open connection is reset; `--latency` delays every chunk.

use herald_core::duration::parse_duration;
use herald_faults::FaultProxy;
use std::net::SocketAddr;
use std::time::Duration;

const USAGE: &str = "usage: fault-proxy --listen ADDR --upstream ADDR \
                     [--reset-every DURATION] [--latency DURATION]";

struct Args {
    listen: SocketAddr,
    upstream: SocketAddr,
    reset_every: Option<Duration>,
    latency: Duration,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut listen, mut upstream, mut reset_every, mut latency) =
        (None, None, None, Duration::ZERO);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let addr = |v: &str| v.parse::<SocketAddr>().map_err(|e| format!("{flag} {v}: {e}"));
        let duration = |v: &str| parse_duration(v).map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--listen" => listen = Some(addr(&value)?),
            "--upstream" => upstream = Some(addr(&value)?),
            "--reset-every" => reset_every = Some(duration(&value)?),
            "--latency" => latency = duration(&value)?,
            _ => return Err(format!("unknown argument {flag}\n{USAGE}")),
        }
    }
    Ok(Args {
        listen: listen.ok_or(USAGE)?,
        upstream: upstream.ok_or(USAGE)?,
        reset_every: reset_every.filter(|d| !d.is_zero()),
        latency,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let proxy = match FaultProxy::start_on(args.listen, args.upstream).await {
        Ok(proxy) => proxy,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", args.listen);
            return std::process::ExitCode::FAILURE;
        }
    };
    proxy.set_latency(args.latency);
    eprintln!("proxying {} -> {}", proxy.addr(), proxy.upstream());
    let Some(every) = args.reset_every else {
        let _ = tokio::signal::ctrl_c().await;
        return std::process::ExitCode::SUCCESS;
    };
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => { proxy.reset_random(); }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    eprintln!("accepted {} connections, injected {} faults", proxy.accepted(), proxy.faults());
    std::process::ExitCode::SUCCESS
}
