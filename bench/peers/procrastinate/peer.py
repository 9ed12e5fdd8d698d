"""procrastinate peer harness for `herald bench`. See bench/peers/README.md.

Usage: peer.py --db URL --phase insert|drain|latency|e2e --n N --clients C [--rate R]

Prints exactly one line of JSON on stdout on success; logs go to stderr. Uses only the schema
`herald_peer_procrastinate`: every connection sets `search_path` to it, and procrastinate's own
schema installer (`SchemaManager.apply_schema_async`, what `procrastinate schema --apply` runs)
creates the tables there.

Configuration (procrastinate docs, "howto/production/concurrency" and the worker options of
`App.run_worker_async`): one async worker with `concurrency` parallel job slots, LISTEN/NOTIFY on
(the default), a short fetch polling fallback, and jobs kept (`delete_jobs="never"`, default).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import sys
import time
from importlib.metadata import version

import procrastinate
import psycopg
from procrastinate import exceptions

PEER = "procrastinate"
SCHEMA = "herald_peer_procrastinate"
VERSION = version("procrastinate")
TASK = "herald_peer_noop"
TIMEOUT = 600.0
CONCURRENCY = int(__import__("os").environ.get("HERALD_PEER_PROCRASTINATE_CONCURRENCY", "10"))
POLL = 0.5  # fetch_job_polling_interval fallback, seconds (default 5.0); NOTIFY wakes the worker
CONFIG = (
    f"one worker, concurrency {CONCURRENCY} (async no-op task), listen_notify on, "
    f"fetch_job_polling_interval {POLL}s, pool max {CONCURRENCY + 4}, delete_jobs never, "
    "queueing_lock per job (AlreadyEnqueued on a duplicate)"
)

log = logging.getLogger("herald-peer-procrastinate")


def now() -> float:
    return time.monotonic()


def key(i: int) -> str:
    return f"herald-peer-{i}"


def make_app(db: str, max_size: int, state: dict | None = None) -> tuple[procrastinate.App, object]:
    # min_size = max_size: the pool opens every connection up front (open_async waits for them).
    connector = procrastinate.PsycopgConnector(
        conninfo=db,
        kwargs={"options": f"-c search_path={SCHEMA}"},
        min_size=max_size,
        max_size=max_size,
    )
    app = procrastinate.App(connector=connector)

    @app.task(name=TASK)
    async def noop(seq: int) -> None:
        if state is not None:
            at = now()
            started = state["started"]
            if started[seq] == 0.0:
                started[seq] = at
            state["handled"] += 1

    return app, noop


async def admin(db: str, sql: str) -> list:
    async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
        cur = await conn.execute(sql)
        return await cur.fetchall() if cur.description else []


async def count(db: str, status: str | None = None) -> int:
    where = f" WHERE status = '{status}'" if status else ""
    rows = await admin(db, f"SELECT count(*) FROM {SCHEMA}.procrastinate_jobs{where}")
    return int(rows[0][0])


async def analyze_schema(db: str) -> None:
    """ANALYZE every table of the schema, untimed, before a drain of bulk-inserted jobs: the same
    fresh statistics herald's drain and its floor get (herald_store::bench::bench_analyze)."""
    await admin(
        db,
        "DO $$DECLARE t record; BEGIN FOR t IN SELECT format('%I.%I', schemaname, tablename) AS name "
        f"FROM pg_tables WHERE schemaname = '{SCHEMA}' LOOP EXECUTE 'ANALYZE ' || t.name; END LOOP; END$$",
    )


async def fresh_schema(db: str) -> None:
    await admin(db, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    await admin(db, f"CREATE SCHEMA {SCHEMA}")
    app, _ = make_app(db, 2)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def drop_schema(db: str) -> None:
    await admin(db, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


async def wait_for(predicate, what: str, interval: float = 0.001) -> None:
    deadline = now() + TIMEOUT
    while not predicate():
        if now() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


async def poll_count(db: str, status: str, target: int) -> int:
    deadline = now() + TIMEOUT
    while True:
        value = await count(db, status)
        if value >= target or now() > deadline:
            return value
        await asyncio.sleep(0.005)


async def phase_insert(args) -> dict:
    n, clients = args.n, args.clients
    app, noop = make_app(args.db, clients)
    next_i = 0
    duplicates = 0
    async with app.open_async():
        await app.connector._async_pool.wait()  # every pooled connection is open before timing

        async def client() -> None:
            nonlocal next_i, duplicates
            while True:
                i = next_i
                next_i += 1
                if i >= n:
                    return
                try:
                    await noop.configure(queueing_lock=key(i)).defer_async(seq=i)
                except exceptions.AlreadyEnqueued:
                    duplicates += 1

        begin = now()
        await asyncio.gather(*(client() for _ in range(clients)))
        seconds = now() - begin
    rows = await count(args.db)
    if rows != n or duplicates:
        raise RuntimeError(f"expected {n} jobs, found {rows} ({duplicates} AlreadyEnqueued)")
    return {
        "peer": PEER, "version": VERSION, "phase": "insert",
        "config": f"defer_async per job with a queueing_lock per key, {clients} concurrent callers over a {clients}-connection pool",
        "count": n, "seconds": round(seconds, 4), "per_sec": round(n / seconds, 1),
    }


async def bulk_insert(db: str, n: int) -> None:
    app, noop = make_app(db, 2)
    async with app.open_async():
        for start in range(0, n, 1000):
            jobs = [
                noop.configure(queueing_lock=key(i), task_kwargs={"seq": i}).job
                for i in range(start, min(n, start + 1000))
            ]
            await app.job_manager.batch_defer_jobs_async(jobs)


async def run_worker(app: procrastinate.App) -> asyncio.Task:
    return asyncio.create_task(
        app.run_worker_async(
            concurrency=CONCURRENCY,
            wait=True,
            listen_notify=True,
            fetch_job_polling_interval=POLL,
            install_signal_handlers=False,
            delete_jobs="never",
        )
    )


async def stop_worker(task: asyncio.Task) -> None:
    task.cancel()
    try:
        await asyncio.wait_for(task, timeout=10)
    except (asyncio.CancelledError, asyncio.TimeoutError):
        pass


async def phase_drain(args) -> dict:
    n = args.n
    await bulk_insert(args.db, n)
    queued = await count(args.db, "todo")
    if queued != n:
        raise RuntimeError(f"expected {n} queued jobs after the bulk insert, found {queued}")
    await analyze_schema(args.db)
    state = {"started": [0.0] * n, "handled": 0}
    app, _ = make_app(args.db, CONCURRENCY + 4, state)
    async with app.open_async():
        begin = now()
        worker = await run_worker(app)
        try:
            await wait_for(lambda: state["handled"] >= n or worker.done(), f"{n} jobs to be handled")
            if worker.done():
                worker.result()
            done = await poll_count(args.db, "succeeded", n)
            seconds = now() - begin
        finally:
            await stop_worker(worker)
    if done != n or state["handled"] != n:
        raise RuntimeError(f"expected {n} succeeded jobs; {state['handled']} handled, {done} succeeded")
    return {
        "peer": PEER, "version": VERSION, "phase": "drain", "config": CONFIG,
        "count": n, "seconds": round(seconds, 4), "per_sec": round(n / seconds, 1),
    }


def percentile(values: list[float], p: float) -> float:
    rank = math.ceil(p / 100 * len(values))
    return values[min(max(rank, 1), len(values)) - 1]


async def phase_latency(args) -> dict:
    n, rate = args.n, args.rate
    producers = min(max(args.clients, 1), 64)
    state = {"started": [0.0] * n, "handled": 0}
    committed = [0.0] * n
    app, _ = make_app(args.db, CONCURRENCY + 4, state)
    producer_app, noop = make_app(args.db, producers)
    async with app.open_async(), producer_app.open_async():
        worker = await run_worker(app)
        try:
            await asyncio.sleep(1.0)

            async def insert(i: int) -> None:
                await noop.configure(queueing_lock=key(i)).defer_async(seq=i)
                committed[i] = now()

            period = 1.0 / rate
            first = now()
            tasks = []
            for i in range(n):
                delay = first + i * period - now()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(insert(i)))
            await asyncio.gather(*tasks)
            insert_seconds = now() - first
            await wait_for(lambda: state["handled"] >= n or worker.done(), f"{n} jobs to be handled")
            if worker.done():
                worker.result()
            done = await poll_count(args.db, "succeeded", n)
        finally:
            await stop_worker(worker)
    if done != n:
        raise RuntimeError(f"expected {n} succeeded jobs, found {done}")
    started = state["started"]
    latencies = sorted(max(0.0, started[i] - committed[i]) * 1000 for i in range(n))
    if any(s == 0.0 for s in started):
        raise RuntimeError("a job has no recorded start")
    return {
        "peer": PEER, "version": VERSION, "phase": "latency",
        "config": f"{CONFIG}; {producers} insert connections, target rate {rate:g}/s",
        "count": n, "seconds": round(insert_seconds, 4), "per_sec": round(n / insert_seconds, 1),
        "p50_ms": round(percentile(latencies, 50), 3), "p99_ms": round(percentile(latencies, 99), 3),
    }


async def phase_e2e(args) -> dict:
    """End to end: the worker (drain's configuration) runs while C callers defer N jobs one per
    call (as in insert); timed from the first insert until N jobs have succeeded in the table."""
    n, clients = args.n, args.clients
    state = {"started": [0.0] * n, "handled": 0}
    app, _ = make_app(args.db, CONCURRENCY + 4, state)
    producer_app, noop = make_app(args.db, clients)
    next_i = 0
    duplicates = 0
    async with app.open_async(), producer_app.open_async():
        await producer_app.connector._async_pool.wait()  # every insert connection is open
        worker = await run_worker(app)
        try:
            await asyncio.sleep(1.0)  # let the worker settle (as in latency)

            async def client() -> None:
                nonlocal next_i, duplicates
                while True:
                    i = next_i
                    next_i += 1
                    if i >= n:
                        return
                    try:
                        await noop.configure(queueing_lock=key(i)).defer_async(seq=i)
                    except exceptions.AlreadyEnqueued:
                        duplicates += 1

            begin = now()
            await asyncio.gather(*(client() for _ in range(clients)))
            if duplicates:
                raise RuntimeError(f"{duplicates} inserts raised AlreadyEnqueued")
            await wait_for(lambda: state["handled"] >= n or worker.done(), f"{n} jobs to be handled")
            if worker.done():
                worker.result()
            done = await poll_count(args.db, "succeeded", n)
            seconds = now() - begin
        finally:
            await stop_worker(worker)
    rows = await count(args.db)
    if done != n or rows != n or state["handled"] != n:
        raise RuntimeError(f"expected {n} succeeded jobs; {state['handled']} handled, {done} succeeded of {rows}")
    return {
        "peer": PEER, "version": VERSION, "phase": "e2e",
        "config": f"{CONFIG}; defer_async per job, {clients} concurrent callers over a {clients}-connection pool",
        "count": n, "seconds": round(seconds, 4), "per_sec": round(n / seconds, 1),
    }


async def run(args) -> dict:
    await fresh_schema(args.db)
    try:
        return await {
            "insert": phase_insert, "drain": phase_drain, "latency": phase_latency, "e2e": phase_e2e,
        }[args.phase](args)
    finally:
        await drop_schema(args.db)


def main() -> int:
    parser = argparse.ArgumentParser(prog="procrastinate-peer")
    parser.add_argument("--db", required=True)
    parser.add_argument("--phase", required=True, choices=["insert", "drain", "latency", "e2e"])
    parser.add_argument("--n", required=True, type=int)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--rate", type=float, default=100.0)
    args = parser.parse_args()
    if args.n <= 0 or args.rate <= 0:
        print("procrastinate peer: --n and --rate must be positive", file=sys.stderr)
        return 2
    args.clients = max(args.clients, 1)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # The harness is a script, so procrastinate's "App is instantiated in the main module" notice
    # is expected noise.
    logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)
    try:
        result = asyncio.run(run(args))
    except Exception as error:  # noqa: BLE001 - one line on stderr, non-zero exit
        logging.getLogger(PEER).debug("failure", exc_info=True)
        message = str(error).replace("\n", " ") or type(error).__name__
        print(f"procrastinate peer: {args.phase} phase failed: {type(error).__name__}: {message}", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
