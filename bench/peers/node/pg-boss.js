'use strict';
// pg-boss peer harness for `herald bench`. See bench/peers/README.md.
//
// Best configuration, from pg-boss's worker docs (https://pgboss.io/api/workers,
// JobPollingOptions in pg-boss's types): batch fetch (`batchSize: 100`), the shortest supported
// polling interval (`pollingIntervalSeconds: 0.5`, the documented minimum), `burstWhenBatchFull`
// (fetch again at once while batches come back full), several local workers
// (`localConcurrency`), and LISTEN/NOTIFY (`useListenNotify` + queue `notify: true`) so an
// idle worker wakes on insert instead of waiting for its poll.

const crypto = require('crypto');
const { PgBoss } = require('pg-boss');
const common = require('./common');

const PEER = 'pg-boss';
const SCHEMA = 'herald_peer_pg_boss';
const VERSION = common.packageVersion('pg-boss');
const QUEUE = 'herald_peer_noop';
const TIMEOUT_MS = 600_000;
const WORKERS = 4;

const WORK = {
  batchSize: 100,
  pollingIntervalSeconds: 0.5,
  burstWhenBatchFull: true,
  localConcurrency: WORKERS,
};
const CONFIG = `batchSize 100, pollingIntervalSeconds 0.5 (minimum), burstWhenBatchFull, localConcurrency ${WORKERS}, `
  + 'useListenNotify + queue notify, standard queue policy, dedup by a custom job id derived from the key (insert ON CONFLICT DO NOTHING)';

// Deduplication: a job `id` the caller chooses. pg-boss inserts with ON CONFLICT DO NOTHING, so
// a second send() with the same id inserts nothing and returns null. pg-boss ids are UUIDs, so
// the key is mapped to a name-based (SHA-1, version 5 layout) UUID.
const NAMESPACE = 'herald-bench-peer:';
function keyId(i) {
  const hash = crypto.createHash('sha1').update(`${NAMESPACE}herald-peer-${i}`).digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function makeBoss(db, extra) {
  const boss = new PgBoss({
    connectionString: db,
    schema: SCHEMA,
    schedule: false, // no cron in this benchmark
    registerInstance: false,
    ...extra,
  });
  boss.on('error', (error) => process.stderr.write(`[pg-boss error] ${error && error.stack ? error.stack : error}\n`));
  boss.on('warning', (warning) => process.stderr.write(`[pg-boss warning] ${JSON.stringify(warning)}\n`));
  return boss;
}

/** Installs pg-boss's tables with its own migration (start() with migrate on) and the queue. */
async function freshSchema(db) {
  await common.dropSchema(db, SCHEMA);
  const boss = makeBoss(db, { supervise: false, max: 2 });
  await boss.start();
  await boss.createQueue(QUEUE, { policy: 'standard', notify: true });
  await boss.stop({ graceful: false, close: true });
}

const countSql = (state) => `SELECT count(*) AS n FROM ${common.quoteIdent(SCHEMA)}.job WHERE name = '${QUEUE}'${state ? ` AND state = '${state}'` : ''}`;

async function phaseInsert(args) {
  const { db, n, clients } = args;
  const boss = makeBoss(db, { supervise: false, migrate: false, max: clients });
  await boss.start();
  let next = 0;
  let duplicates = 0;
  try {
    await Promise.all(Array.from({ length: clients }, () => boss.getDb().executeSql('SELECT 1')));
    const begin = common.nowMs();
    await Promise.all(Array.from({ length: clients }, async () => {
      for (let i = next++; i < n; i = next++) {
        const id = await boss.send(QUEUE, { seq: i }, { id: keyId(i) });
        if (id === null) duplicates += 1;
      }
    }));
    const seconds = (common.nowMs() - begin) / 1000;
    const rows = await common.pollUntil(db, countSql(null), () => true, 0);
    if (rows !== n || duplicates !== 0) throw new Error(`expected ${n} jobs, found ${rows} (${duplicates} deduplicated)`);
    return {
      peer: PEER, version: VERSION, phase: 'insert',
      config: `send() per job with a custom id derived from the key (duplicate = no-op), ${clients} concurrent callers over a ${clients}-connection pool, queue notify on`,
      count: n, seconds: common.round(seconds, 4), per_sec: common.round(n / seconds, 1),
    };
  } finally {
    await boss.stop({ graceful: false, close: true });
  }
}

async function bulkInsert(db, n) {
  const boss = makeBoss(db, { supervise: false, migrate: false, max: 2 });
  await boss.start();
  try {
    for (let i = 0; i < n; i += 1000) {
      const jobs = [];
      for (let j = i; j < Math.min(n, i + 1000); j += 1) jobs.push({ id: keyId(j), data: { seq: j } });
      await boss.insert(QUEUE, jobs);
    }
  } finally {
    await boss.stop({ graceful: false, close: true });
  }
}

async function startWorker(db, onBatch) {
  const boss = makeBoss(db, { migrate: false, useListenNotify: true, max: WORKERS + 4 });
  await boss.start();
  await boss.work(QUEUE, WORK, async (jobs) => { onBatch(jobs); });
  return boss;
}

async function phaseDrain(args) {
  const { db, n } = args;
  await bulkInsert(db, n);
  const queued = await common.pollUntil(db, countSql('created'), () => true, 0);
  await common.analyzeSchema(db, SCHEMA);
  if (queued !== n) throw new Error(`expected ${n} queued jobs after the bulk insert, found ${queued}`);
  let handled = 0;
  const begin = common.nowMs();
  const boss = await startWorker(db, (jobs) => { handled += jobs.length; });
  try {
    await common.waitFor(() => handled >= n, TIMEOUT_MS, `${n} jobs to be handled (${handled} so far)`);
    const completed = await common.pollUntil(db, countSql('completed'), (v) => v >= n, TIMEOUT_MS);
    const seconds = (common.nowMs() - begin) / 1000;
    if (completed !== n || handled !== n) throw new Error(`expected ${n} completed jobs; ${handled} handled, ${completed} completed in the table`);
    return {
      peer: PEER, version: VERSION, phase: 'drain', config: CONFIG,
      count: n, seconds: common.round(seconds, 4), per_sec: common.round(n / seconds, 1),
    };
  } finally {
    await boss.stop({ graceful: true, close: true, timeout: 5000 });
  }
}

async function phaseLatency(args) {
  const { db, n, rate, clients } = args;
  const committed = new Float64Array(n);
  const started = new Float64Array(n);
  let handled = 0;
  const worker = await startWorker(db, (jobs) => {
    const at = common.nowMs();
    for (const job of jobs) {
      if (started[job.data.seq] === 0) started[job.data.seq] = at;
    }
    handled += jobs.length;
  });
  const producers = Math.min(Math.max(clients, 1), 64);
  const boss = makeBoss(db, { supervise: false, migrate: false, max: producers });
  await boss.start();
  try {
    await Promise.all(Array.from({ length: producers }, () => boss.getDb().executeSql('SELECT 1')));
    await common.sleep(1000);
    const first = await common.paced(n, rate, async (i) => {
      await boss.send(QUEUE, { seq: i }, { id: keyId(i) });
      committed[i] = common.nowMs();
    });
    const insertSeconds = (common.nowMs() - first) / 1000;
    await common.waitFor(() => handled >= n, TIMEOUT_MS, `${n} jobs to be handled (${handled} so far)`);
    const completed = await common.pollUntil(db, countSql('completed'), (v) => v >= n, TIMEOUT_MS);
    if (completed !== n) throw new Error(`expected ${n} completed jobs, found ${completed}`);
    return {
      peer: PEER, version: VERSION, phase: 'latency',
      config: `${CONFIG}; ${producers} insert connections, target rate ${rate}/s`,
      count: n, seconds: common.round(insertSeconds, 4), per_sec: common.round(n / insertSeconds, 1),
      ...common.latencySummary(committed, started),
    };
  } finally {
    await boss.stop({ graceful: false, close: true });
    await worker.stop({ graceful: true, close: true, timeout: 5000 });
  }
}

// End to end: the worker (drain's configuration) runs while C callers send() N jobs one per
// call (as in insert); timed from the first insert until N jobs are completed in the table.
async function phaseE2e(args) {
  const { db, n, clients } = args;
  let handled = 0;
  let duplicates = 0;
  const worker = await startWorker(db, (jobs) => { handled += jobs.length; });
  const boss = makeBoss(db, { supervise: false, migrate: false, max: clients });
  try {
    await boss.start();
    await Promise.all(Array.from({ length: clients }, () => boss.getDb().executeSql('SELECT 1')));
    await common.sleep(1000); // let the worker settle (as in latency)
    const begin = common.nowMs();
    await common.concurrently(n, clients, async (i) => {
      const id = await boss.send(QUEUE, { seq: i }, { id: keyId(i) });
      if (id === null) duplicates += 1;
    });
    if (duplicates !== 0) throw new Error(`${duplicates} inserts were deduplicated`);
    await common.waitFor(() => handled >= n, TIMEOUT_MS, `${n} jobs to be handled (${handled} so far)`);
    const completed = await common.pollUntil(db, countSql('completed'), (v) => v >= n, TIMEOUT_MS);
    const seconds = (common.nowMs() - begin) / 1000;
    if (completed !== n || handled !== n) throw new Error(`expected ${n} completed jobs; ${handled} handled, ${completed} completed in the table`);
    return {
      peer: PEER, version: VERSION, phase: 'e2e',
      config: `${CONFIG}; send() per job, ${clients} concurrent callers over a ${clients}-connection pool`,
      count: n, seconds: common.round(seconds, 4), per_sec: common.round(n / seconds, 1),
    };
  } finally {
    await boss.stop({ graceful: false, close: true });
    await worker.stop({ graceful: true, close: true, timeout: 5000 });
  }
}

common.main(PEER, async (args) => {
  await freshSchema(args.db);
  try {
    if (args.phase === 'insert') return await phaseInsert(args);
    if (args.phase === 'drain') return await phaseDrain(args);
    if (args.phase === 'e2e') return await phaseE2e(args);
    return await phaseLatency(args);
  } finally {
    await common.dropSchema(args.db, SCHEMA);
  }
});
