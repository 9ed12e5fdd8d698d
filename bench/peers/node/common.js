'use strict';
// Shared plumbing for the Node peer harnesses: argument parsing, schema reset, timing,
// percentiles and the one-line JSON result. Logs go to stderr; stdout carries only the result.

const { Client } = require('pg');

function parseArgs(argv) {
  const args = { db: null, phase: null, n: null, clients: 1, rate: 100 };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    i += 1;
    switch (flag) {
      case '--db': args.db = value; break;
      case '--phase': args.phase = value; break;
      case '--n': args.n = Number.parseInt(value, 10); break;
      case '--clients': args.clients = Number.parseInt(value, 10); break;
      case '--rate': args.rate = Number.parseFloat(value); break;
      default: throw new Error(`unknown argument ${flag}`);
    }
  }
  if (!args.db) throw new Error('--db is required');
  if (!['insert', 'drain', 'latency', 'e2e'].includes(args.phase)) throw new Error('--phase must be insert, drain, latency or e2e');
  if (!Number.isInteger(args.n) || args.n <= 0) throw new Error('--n must be a positive integer');
  if (!Number.isInteger(args.clients) || args.clients <= 0) args.clients = 1;
  if (!(args.rate > 0) || !Number.isFinite(args.rate)) throw new Error('--rate must be positive');
  return args;
}

/** Monotonic clock in milliseconds (float). */
function nowMs() {
  return Number(process.hrtime.bigint()) / 1e6;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function withClient(url, fn) {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

function quoteIdent(name) {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`unexpected schema name ${name}`);
  return `"${name}"`;
}

async function dropSchema(url, schema) {
  await withClient(url, (c) => c.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`));
}

/**
 * ANALYZE every table of `schema`, untimed, before a drain of bulk-inserted jobs: the same
 * fresh statistics herald's drain and its floor get (see `herald_store::bench::bench_analyze`).
 */
async function analyzeSchema(url, schema) {
  quoteIdent(schema);
  await withClient(url, (c) => c.query(
    `DO $$DECLARE t record; BEGIN FOR t IN SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname = '${schema}' LOOP EXECUTE 'ANALYZE ' || t.name; END LOOP; END$$`,
  ));
}

/** Polls `query` (returning a number) until `done(value)` or the deadline; returns the last value. */
async function pollUntil(url, sql, done, timeoutMs, intervalMs = 5) {
  return withClient(url, async (c) => {
    const deadline = nowMs() + timeoutMs;
    for (;;) {
      const { rows } = await c.query(sql);
      const value = Number(rows[0].n);
      if (done(value) || nowMs() > deadline) return value;
      await sleep(intervalMs);
    }
  });
}

/** Resolves when `predicate()` is true, checking every `intervalMs`; rejects after `timeoutMs`. */
async function waitFor(predicate, timeoutMs, what, intervalMs = 1) {
  const deadline = nowMs() + timeoutMs;
  while (!predicate()) {
    if (nowMs() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
}

const round = (x, places) => Math.round(x * 10 ** places) / 10 ** places;

/** Runs `fn(args)` and prints its result as one JSON line, or fails with one line on stderr. */
function main(peer, fn) {
  let args;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${peer} peer: ${error.message}\n`);
    process.exit(2);
  }
  fn(args).then(
    (result) => {
      process.stdout.write(`${JSON.stringify(result)}\n`, () => process.exit(0));
    },
    (error) => {
      const message = String((error && (error.stack || error.message)) || error);
      process.stderr.write(`${message}\n`);
      process.stderr.write(`${peer} peer: ${args.phase} phase failed: ${String(error && error.message ? error.message : error).split('\n')[0]}\n`);
      process.exit(1);
    },
  );
}

/** Fires `insertOne(i)` for i in 0..n at a fixed rate (on a timer, not back-to-back). */
async function paced(n, rate, insertOne) {
  const period = 1000 / rate;
  const first = nowMs();
  const pending = [];
  for (let i = 0; i < n; i += 1) {
    const due = first + i * period;
    const wait = due - nowMs();
    if (wait > 1) await sleep(wait);
    else if (wait > 0) await new Promise((resolve) => setImmediate(resolve));
    pending.push(insertOne(i));
  }
  await Promise.all(pending);
  return first;
}

/**
 * Calls `insertOne(i)` for every i in 0..n from `clients` concurrent async loops (each loop
 * awaits its insert before taking the next index); resolves when all inserts returned.
 */
async function concurrently(n, clients, insertOne) {
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    for (let i = next++; i < n; i = next++) await insertOne(i);
  }));
}

function latencySummary(committed, started) {
  const latencies = [];
  for (let i = 0; i < committed.length; i += 1) {
    if (!(started[i] > 0)) throw new Error(`job ${i} has no recorded start`);
    if (!(committed[i] > 0)) throw new Error(`job ${i} has no recorded commit`);
    latencies.push(Math.max(0, started[i] - committed[i]));
  }
  latencies.sort((a, b) => a - b);
  return { p50_ms: round(percentile(latencies, 50), 3), p99_ms: round(percentile(latencies, 99), 3) };
}

module.exports = {
  parseArgs, nowMs, sleep, withClient, quoteIdent, dropSchema, analyzeSchema, pollUntil, waitFor, percentile, round, main, paced, concurrently, latencySummary,
};

/** The installed version of a package (read from its package.json, which `exports` may hide). */
module.exports.packageVersion = function packageVersion(name) {
  const path = require('path');
  const fs = require('fs');
  const file = path.join(__dirname, 'node_modules', name, 'package.json');
  return JSON.parse(fs.readFileSync(file, 'utf8')).version;
};
