'use strict';
// graphile-worker peer harness for `herald bench`. See bench/peers/README.md.
//
// Best configuration, from graphile-worker's performance page
// (https://worker.graphile.org/docs/performance): concurrentJobs 24, maxPoolSize 25,
// localQueue { size: 500 }, completeJobBatchDelay 0, failJobBatchDelay 0. Prepared statements
// (the default) and LISTEN/NOTIFY (always on in graphile-worker) are kept.

const { run, makeWorkerUtils } = require('graphile-worker');
const common = require('./common');

const PEER = 'graphile-worker';
const SCHEMA = 'herald_peer_graphile_worker';
const VERSION = common.packageVersion('graphile-worker');
const TASK = 'herald_peer_noop';
const TIMEOUT_MS = 600_000;

const WORKER = {
  concurrentJobs: 24,
  maxPoolSize: 25,
  localQueue: { size: 500 },
  completeJobBatchDelay: 0,
  failJobBatchDelay: 0,
  preparedStatements: true,
  pollInterval: 2000, // default; new jobs arrive by LISTEN/NOTIFY, polling is only a fallback
};
const CONFIG = 'concurrentJobs 24, maxPoolSize 25, localQueue.size 500, completeJobBatchDelay 0, '
  + 'failJobBatchDelay 0, preparedStatements on, LISTEN/NOTIFY, pollInterval 2000ms (default), '
  + "jobKey per job with jobKeyMode 'unsafe_dedupe'";

// graphile-worker logs through @graphile/logger; send everything to stderr.
const { Logger } = require('graphile-worker');
const logger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') process.stderr.write(`[graphile-worker ${level}] ${message}\n`);
});

const key = (i) => `herald-peer-${i}`;

async function freshSchema(db) {
  await common.dropSchema(db, SCHEMA);
  // graphile-worker creates its schema itself when it migrates.
  const utils = await makeWorkerUtils({ connectionString: db, schema: SCHEMA, logger });
  try {
    await utils.migrate();
  } finally {
    await utils.release();
  }
}

async function startWorker(db, onJob) {
  const runner = await run({
    connectionString: db,
    schema: SCHEMA,
    logger,
    noHandleSignals: true,
    taskList: {
      [TASK]: async (payload) => { onJob(payload); },
    },
    // The batching options exist only as preset options (not legacy runner options).
    preset: { worker: { ...WORKER } },
  });
  return runner;
}

const jobsLeftSql = `SELECT count(*) AS n FROM ${common.quoteIdent(SCHEMA)}._private_jobs`;

async function phaseInsert(args) {
  const { db, n, clients } = args;
  const utils = await makeWorkerUtils({ connectionString: db, schema: SCHEMA, logger, maxPoolSize: clients });
  let next = 0;
  let duplicates = 0;
  try {
    // Open every pooled connection before timing.
    await Promise.all(Array.from({ length: clients }, () => utils.withPgClient((c) => c.query('SELECT 1'))));
    const begin = common.nowMs();
    await Promise.all(Array.from({ length: clients }, async () => {
      for (let i = next++; i < n; i = next++) {
        const job = await utils.addJob(TASK, { seq: i }, { jobKey: key(i), jobKeyMode: 'unsafe_dedupe' });
        if (Number(job.payload.seq) !== i) duplicates += 1;
      }
    }));
    const seconds = (common.nowMs() - begin) / 1000;
    const rows = await utils.withPgClient((c) => c.query(jobsLeftSql));
    if (Number(rows.rows[0].n) !== n || duplicates !== 0) throw new Error(`expected ${n} jobs, found ${rows.rows[0].n} (${duplicates} deduplicated)`);
    return {
      peer: PEER, version: VERSION, phase: 'insert',
      config: `WorkerUtils.addJob per job with jobKey (jobKeyMode 'unsafe_dedupe'), ${clients} concurrent callers over a ${clients}-connection pool, preparedStatements on`,
      count: n, seconds: common.round(seconds, 4), per_sec: common.round(n / seconds, 1),
    };
  } finally {
    await utils.release();
  }
}

async function bulkInsert(db, n) {
  const utils = await makeWorkerUtils({ connectionString: db, schema: SCHEMA, logger });
  try {
    for (let i = 0; i < n; i += 1000) {
      const specs = [];
      for (let j = i; j < Math.min(n, i + 1000); j += 1) specs.push({ identifier: TASK, payload: { seq: j }, jobKey: key(j) });
      await utils.addJobs(specs);
    }
  } finally {
    await utils.release();
  }
}

async function phaseDrain(args) {
  const { db, n } = args;
  await bulkInsert(db, n);
  const queued = await common.pollUntil(db, jobsLeftSql, () => true, 0);
  await common.analyzeSchema(db, SCHEMA);
  if (queued !== n) throw new Error(`expected ${n} queued jobs after the bulk insert, found ${queued}`);
  let handled = 0;
  const begin = common.nowMs();
  const runner = await startWorker(db, () => { handled += 1; });
  try {
    await common.waitFor(() => handled >= n, TIMEOUT_MS, `${n} jobs to be handled (${handled} so far)`);
    // graphile-worker deletes a job when it completes; wait until the batched completions land.
    const left = await common.pollUntil(db, jobsLeftSql, (v) => v === 0, TIMEOUT_MS);
    const seconds = (common.nowMs() - begin) / 1000;
    if (left !== 0 || handled !== n) throw new Error(`expected ${n} completed jobs; ${handled} handled, ${left} still in the table`);
    return {
      peer: PEER, version: VERSION, phase: 'drain', config: CONFIG,
      count: n, seconds: common.round(seconds, 4), per_sec: common.round(n / seconds, 1),
    };
  } finally {
    await runner.stop();
  }
}

async function phaseLatency(args) {
  const { db, n, rate, clients } = args;
  const committed = new Float64Array(n);
  const started = new Float64Array(n);
  let handled = 0;
  const runner = await startWorker(db, (payload) => {
    const at = common.nowMs();
    if (started[payload.seq] === 0) started[payload.seq] = at;
    handled += 1;
  });
  const producers = Math.min(Math.max(clients, 1), 64);
  const utils = await makeWorkerUtils({ connectionString: db, schema: SCHEMA, logger, maxPoolSize: producers });
  try {
    await Promise.all(Array.from({ length: producers }, () => utils.withPgClient((c) => c.query('SELECT 1'))));
    await common.sleep(1000);
    const first = await common.paced(n, rate, async (i) => {
      await utils.addJob(TASK, { seq: i }, { jobKey: key(i), jobKeyMode: 'unsafe_dedupe' });
      committed[i] = common.nowMs();
    });
    const insertSeconds = (common.nowMs() - first) / 1000;
    await common.waitFor(() => handled >= n, TIMEOUT_MS, `${n} jobs to be handled (${handled} so far)`);
    const left = await common.pollUntil(db, jobsLeftSql, (v) => v === 0, TIMEOUT_MS);
    if (left !== 0) throw new Error(`${left} jobs still in the table`);
    return {
      peer: PEER, version: VERSION, phase: 'latency',
      config: `${CONFIG}; ${producers} insert connections, target rate ${rate}/s`,
      count: n, seconds: common.round(insertSeconds, 4), per_sec: common.round(n / insertSeconds, 1),
      ...common.latencySummary(committed, started),
    };
  } finally {
    await utils.release();
    await runner.stop();
  }
}

// End to end: the worker (drain's configuration) runs while C callers add N jobs one per
// addJob (as in insert); timed from the first insert until the jobs table is empty again.
async function phaseE2e(args) {
  const { db, n, clients } = args;
  let handled = 0;
  let duplicates = 0;
  const runner = await startWorker(db, () => { handled += 1; });
  let utils = null;
  try {
    utils = await makeWorkerUtils({ connectionString: db, schema: SCHEMA, logger, maxPoolSize: clients });
    await Promise.all(Array.from({ length: clients }, () => utils.withPgClient((c) => c.query('SELECT 1'))));
    await common.sleep(1000); // let the worker settle (as in latency)
    const begin = common.nowMs();
    await common.concurrently(n, clients, async (i) => {
      const job = await utils.addJob(TASK, { seq: i }, { jobKey: key(i), jobKeyMode: 'unsafe_dedupe' });
      if (Number(job.payload.seq) !== i) duplicates += 1;
    });
    if (duplicates !== 0) throw new Error(`${duplicates} inserts were deduplicated`);
    await common.waitFor(() => handled >= n, TIMEOUT_MS, `${n} jobs to be handled (${handled} so far)`);
    const left = await common.pollUntil(db, jobsLeftSql, (v) => v === 0, TIMEOUT_MS);
    const seconds = (common.nowMs() - begin) / 1000;
    if (left !== 0 || handled !== n) throw new Error(`expected ${n} completed jobs; ${handled} handled, ${left} still in the table`);
    return {
      peer: PEER, version: VERSION, phase: 'e2e',
      config: `${CONFIG}; WorkerUtils.addJob per job, ${clients} concurrent callers over a ${clients}-connection pool`,
      count: n, seconds: common.round(seconds, 4), per_sec: common.round(n / seconds, 1),
    };
  } finally {
    if (utils) await utils.release();
    await runner.stop();
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
