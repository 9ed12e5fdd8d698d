// The operator dashboard in a real browser: Debian's chromium, driven by playwright-core,
// against a real `herald serve` (SQLite) sending to a real webhook receiver on loopback.
// Run by scripts/test-ui (HERALD_BIN names the binary). Screenshots go to screenshots/.
//
// Each step is one thing an operator does; the whole run fails on the first step that
// does not hold, and on any console error or uncaught exception in any page.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SHOTS = path.join(HERE, 'screenshots');
const BIN = process.env.HERALD_BIN;
const CHROMIUM = process.env.HERALD_CHROMIUM || '/usr/bin/chromium';
const ADMIN_KEY = 'ui-test-admin-key-4f9a2c7e1b08d35a6c91e2f7b4d0a8';
const VIEWER_KEY = 'ui-test-viewer-key-9c3e5a1d7f2b4086e1a3c5b7d9f0e2';
const RELEASE = 'ui-test-release-7';
// Hostile text, as a tenant or a receiver might write it: it must show as these characters.
const HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 1">';

assert.ok(BIN, 'HERALD_BIN names the herald binary (scripts/test-ui sets it)');

// ---- the receiver: a real HTTP server that answers as told ------------------------------

const seen = new Map(); // path -> requests so far
let outage = true; // /outage/* answers 503 until the test ends the outage
const receiver = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    const n = (seen.get(req.url) || 0) + 1;
    seen.set(req.url, n);
    const answer = (status, body = '') => {
      res.writeHead(status, { 'content-type': 'text/html', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    if (req.url.startsWith('/flaky/')) return n === 1 ? answer(503, 'warming up') : answer(204);
    if (req.url.startsWith('/refuse-once/')) return n === 1 ? answer(400, HOSTILE) : answer(204);
    if (req.url.startsWith('/outage/')) return outage ? answer(503, 'down for maintenance') : answer(204);
    return answer(204);
  });
});

// A second destination, 127.0.0.2: down for every tenant until the operator fixes it.
let brokenDown = true;
const brokenSeen = new Map(); // path -> 2xx answers
const broken = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    const ok = !brokenDown;
    if (ok) brokenSeen.set(req.url, (brokenSeen.get(req.url) || 0) + 1);
    res.writeHead(ok ? 204 : 503, { 'content-length': 0 });
    res.end();
  });
});

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, check, ms = 15000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try {
      last = await check();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}: ${last instanceof Error ? last.message : JSON.stringify(last)}`);
}

// ---- herald serve ---------------------------------------------------------------------

const dir = mkdtempSync(path.join(os.tmpdir(), 'herald-ui-'));
const receiverPort = await freePort();
await new Promise((r) => receiver.listen(receiverPort, '127.0.0.1', r));
const port = await freePort();
const BASE = `http://127.0.0.1:${port}`;
const hook = (p) => `http://127.0.0.1:${receiverPort}${p}`;
await new Promise((r) => broken.listen(receiverPort, '127.0.0.2', r));
const brokenHook = (p) => `http://127.0.0.2:${receiverPort}${p}`;

const server = spawn(BIN, ['serve'], {
  env: {
    ...process.env,
    HERALD_DB: path.join(dir, 'herald.db'),
    HERALD_LISTEN: `127.0.0.1:${port}`,
    HERALD_ADMIN_KEY: ADMIN_KEY,
    HERALD_VIEWER_KEY: VIEWER_KEY,
    HERALD_RELEASE: RELEASE,
    HERALD_ALLOW_PRIVATE_TARGETS: 'true',
    HERALD_BACKOFF_BASE: '200ms',
    // The outage steps retry into a receiver that is down on purpose; circuits, which
    // would hold those retries 30 s, have their own test (herald-cli circuits.rs).
    HERALD_CIRCUIT_FAILURES: '1000',
    HERALD_BACKOFF_MAX: '500ms',
    HERALD_POLL_INTERVAL: '200ms',
    HERALD_LOG_FORMAT: 'text',
  },
  stdio: ['ignore', 'inherit', 'pipe'],
});
let serverLog = '';
server.stderr.on('data', (b) => { serverLog += b; });
let browser;

async function call(method, p, key, body, headers = {}) {
  const r = await fetch(`${BASE}${p}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  const json = text ? JSON.parse(text) : null;
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${text}`);
  return json;
}

const steps = [];
async function step(name, fn) {
  const started = Date.now();
  await fn();
  steps.push(name);
  console.log(`ok ${steps.length} - ${name} (${Date.now() - started} ms)`);
}

const consoleErrors = [];
function watch(page, who) {
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(`${who}: ${m.text()}`); });
  page.on('pageerror', (e) => consoleErrors.push(`${who}: uncaught ${e.message}`));
  return page;
}

async function shot(page, name) {
  const file = path.join(SHOTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  console.log(`  screenshot: ${path.relative(path.join(HERE, '..', '..'), file)}`);
}

async function signIn(page, key) {
  await page.goto(`${BASE}/ui`);
  await page.locator('#key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#nav').waitFor({ state: 'visible' });
}

async function main() {
  rmSync(SHOTS, { recursive: true, force: true });
  mkdirSync(SHOTS, { recursive: true });
  await until('herald serve to be ready', async () => (await fetch(`${BASE}/readyz`).catch(() => ({ ok: false }))).ok, 30000);

  const acme = await call('POST', '/v1/tenants', ADMIN_KEY, { name: 'acme' });
  const other = await call('POST', '/v1/tenants', ADMIN_KEY, { name: 'other' });
  for (const t of [acme, other]) {
    await call('POST', `/v1/tenants/${t.id}/quotas/webhook/grant`, ADMIN_KEY, { amount: 1000 }, { 'idempotency-key': `grant-${t.id}` });
  }
  const submit = (t, body) => call('POST', '/v1/deliveries', t.api_key, { channel: 'webhook', ...body });
  const theirs = await submit(other, { operation_key: 'other-1', to: hook('/ok/other'), payload: { n: 1 } });

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const admin = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = watch(await admin.newPage(), 'admin');

  await step('the admin signs in; the key is in no storage, no cookie the page can read, no DOM', async () => {
    await signIn(page, ADMIN_KEY);
    assert.equal(await page.locator('#identity').textContent(), 'admin');
    const kept = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })
      + document.cookie + document.documentElement.outerHTML);
    assert.ok(!kept.includes(ADMIN_KEY), 'the key is kept nowhere in the page');
    const cookies = await admin.cookies();
    // On a loopback host the browser keeps Secure cookies: a __Host- cookie, which no
    // page on a sibling subdomain can set (cookie tossing).
    const session = cookies.find((c) => c.name === '__Host-herald_ui');
    assert.ok(session && session.httpOnly && session.sameSite === 'Strict', JSON.stringify(cookies));
    assert.ok(session.secure && session.path === '/', JSON.stringify(session));
    assert.ok(!session.value.includes(ADMIN_KEY));
  });

  await step('every /ui answer carries a strict Content-Security-Policy', async () => {
    const r = await page.request.get(`${BASE}/ui`);
    const csp = r.headers()['content-security-policy'];
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe/);
  });

  await step('the admin, over every tenant, opens a delivery by its id alone', async () => {
    await page.goto(`${BASE}/ui#/deliveries`);
    await page.locator('#delivery-id').fill(theirs.id);
    await page.locator('#open-delivery button').click();
    await page.locator('#view h1 .badge').waitFor();
    assert.match(await page.locator('dl.facts').textContent(), /Tenantother \(/);
  });

  await step('the admin picks a tenant', async () => {
    await page.goto(`${BASE}/ui#/overview`);
    await page.locator('#tenant').selectOption({ label: 'acme' });
    await page.locator('[data-tile="pending"]').waitFor();
  });

  let flaky;
  await step('a submitted delivery appears in the list within 2 s', async () => {
    await page.goto(`${BASE}/ui#/deliveries`);
    await page.locator('#filters').waitFor();
    flaky = await submit(acme, { operation_key: 'order-1-ready', to: hook(`/flaky/${Date.now()}`), payload: { order: 1 } });
    const started = Date.now();
    await page.locator(`tr[data-id="${flaky.id}"]`).waitFor({ timeout: 2000 });
    console.log(`  appeared after ${Date.now() - started} ms`);
  });

  await step('its attempts show a transient, then sent, each with its worker and release', async () => {
    await page.locator(`tr[data-id="${flaky.id}"] a`).first().click();
    await page.locator('#attempts li[data-outcome="sent"]').waitFor({ timeout: 10000 });
    const outcomes = await page.locator('#attempts li').evaluateAll((li) => li.map((x) => x.dataset.outcome));
    assert.deepEqual(outcomes, ['transient', 'sent']);
    const releases = await page.locator('#attempts .release').allTextContents();
    assert.deepEqual(releases, [RELEASE, RELEASE]);
    assert.match(await page.locator('#attempts li').first().textContent(), /http_503/);
    assert.match(await page.locator('#view h1').textContent(), /sent/);
    await shot(page, 'delivery');
  });

  let refused;
  await step('a failed delivery shows what the receiver and the tenant wrote as text, and is replayed', async () => {
    refused = await submit(acme, {
      operation_key: `refused-${HOSTILE}`, to: hook(`/refuse-once/${Date.now()}`), payload: { note: HOSTILE },
    });
    await page.goto(`${BASE}/ui#/deliveries/${refused.id}`);
    await page.locator('#view h1 .badge.failed').waitFor({ timeout: 10000 });
    assert.match(await page.locator('#payload').textContent(), /<script>window.__pwned = 1<\/script>/);
    assert.match(await page.locator('#attempts .error-message').textContent(), /<img src=x onerror=/);
    assert.match(await page.locator('dl.facts').textContent(), /refused-<script>/);
    assert.equal(await page.locator('#view script, #view img').count(), 0, 'nothing written became markup');
    assert.equal(await page.evaluate(() => window.__pwned), undefined, 'nothing written ran');
    await shot(page, 'delivery-failed');
    await page.locator('#replay').click();
    await page.locator('#attempts li[data-outcome="sent"]').waitFor({ timeout: 10000 });
    const d = await call('GET', `/v1/deliveries/${refused.id}`, acme.api_key);
    assert.equal(d.state, 'sent');
    assert.equal(d.id, refused.id, 'the same delivery');
  });

  await step('replay and cancel refuse a request without the page\'s CSRF token, or from another site', async () => {
    const url = `${BASE}/ui/api/deliveries/${refused.id}/cancel`;
    assert.equal((await page.request.post(url, { data: {} })).status(), 403);
    const me = await (await page.request.get(`${BASE}/ui/api/session`)).json();
    const forged = await page.request.post(url, { data: {}, headers: { 'x-herald-csrf': me.csrf, origin: 'http://evil.example' } });
    assert.equal(forged.status(), 403);
  });

  let outageIds;
  await step('a bulk replay of a filter: dry run counts, confirm replays, all are sent', async () => {
    outageIds = [];
    for (let i = 0; i < 5; i += 1) {
      const d = await submit(acme, { operation_key: `outage-${i}`, to: hook(`/outage/${i}`), payload: { i }, max_attempts: 1 });
      outageIds.push(d.id);
    }
    await until('the outage deliveries to fail', async () => {
      const states = await Promise.all(outageIds.map((id) => call('GET', `/v1/deliveries/${id}`, acme.api_key)));
      return states.every((d) => d.state === 'failed');
    });
    outage = false;
    await page.goto(`${BASE}/ui#/deliveries?state=failed`);
    await page.locator('tr[data-state="failed"]').first().waitFor();
    assert.equal(await page.locator('tr[data-state="failed"]').count(), 5);
    await page.locator('#bulk-error-code').fill('http_503');
    await page.locator('#bulk-count').click();
    await page.locator('#bulk-result', { hasText: '5 deliveries match' }).waitFor();
    assert.match(await page.locator('#bulk-confirm').textContent(), /^Replay at most 5 deliveries of tenant acme$/);
    await shot(page, 'deliveries-bulk');
    // One more fails the same way between the count and the confirmation: the confirmed
    // 5 are a bound, so it is not taken (it was created after the dry run's newest match).
    outage = true;
    const late = await submit(acme, { operation_key: 'outage-late', to: hook('/outage/late'), payload: { late: true }, max_attempts: 1 });
    await until('the late delivery to fail', async () => (await call('GET', `/v1/deliveries/${late.id}`, acme.api_key)).state === 'failed');
    outage = false;
    await page.locator('#bulk-confirm').click();
    await page.locator('#bulk-result', { hasText: '5 replayed, 0 skipped' }).waitFor();
    assert.equal((await call('GET', `/v1/deliveries/${late.id}`, acme.api_key)).state, 'failed', 'not counted, not replayed');
    // Its one attempt was a retryable 503, and the attempts ran out: the timeline says so.
    await page.goto(`${BASE}/ui#/deliveries/${late.id}`);
    await page.locator('#attempts li[data-outcome="transient"] [data-exhausted]').waitFor();
    await until('the replayed deliveries to be sent', async () => {
      const states = await Promise.all(outageIds.map((id) => call('GET', `/v1/deliveries/${id}`, acme.api_key)));
      return states.every((d) => d.state === 'sent');
    });
    await page.goto(`${BASE}/ui#/deliveries`);
    await page.locator(`tr[data-id="${outageIds[0]}"][data-state="sent"]`).waitFor({ timeout: 3000 });
    await shot(page, 'deliveries');
  });

  await step('the quota page shows what the API says', async () => {
    await page.goto(`${BASE}/ui#/quotas`);
    await page.locator('#quotas tr[data-quota-key="webhook"]').waitFor();
    const api = (await call('GET', '/v1/quotas', acme.api_key)).quotas.find((q) => q.quota_key === 'webhook');
    for (const field of ['granted', 'available', 'reserved', 'spent']) {
      const text = await page.locator(`#quotas tr[data-quota-key="webhook"] td[data-field="${field}"]`).textContent();
      assert.equal(Number(text.replace(/,/g, '')), api[field], `${field}: page ${text}, API ${api[field]}`);
    }
    assert.ok(await page.locator('#journal tbody tr').count() >= 3, 'grant, reserves, spends');
    await shot(page, 'quotas');
  });

  await step('the overview charts the last hour from the rollup', async () => {
    await page.goto(`${BASE}/ui#/overview`);
    // The rollup is written every 10 s: wait for this run's outcomes to reach it.
    // and the shared count (up to 10 s old) to be counted again.
    await until('the rollup to hold the sends, and the count to be recent', async () => {
      await page.reload();
      await page.locator('[data-tile="sent"]').waitFor();
      return (await page.locator('svg[aria-label="outcomes per minute"] rect.sent').count()) > 0
        && (await page.locator('[data-tile="sent"] .n').textContent()) === '7';
    }, 30000);
    assert.match(await page.locator('#counted').textContent(), /counted/);
    assert.ok(await page.locator('[data-channel="webhook"]').count() === 1);
    await shot(page, 'overview');
  });

  await step('a tenant session sees its own tenant only', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tp = watch(await ctx.newPage(), 'tenant');
    await signIn(tp, other.api_key);
    assert.equal(await tp.locator('#identity').textContent(), 'tenant other');
    assert.equal(await tp.locator('#tenant').isDisabled(), true);
    assert.deepEqual(await tp.locator('#tenant option').allTextContents(), ['other']);
    await tp.goto(`${BASE}/ui#/deliveries`);
    await tp.locator(`tr[data-id="${theirs.id}"]`).waitFor();
    assert.equal(await tp.locator('#deliveries tbody tr').count(), 1, 'only its own delivery');
    for (const p of [`/ui/api/deliveries/${flaky.id}`, `/ui/api/deliveries?tenant=${acme.id}`, `/ui/api/quotas?tenant=${acme.id}`]) {
      assert.equal((await tp.request.get(`${BASE}${p}`)).status(), 404, p);
    }
    await tp.goto(`${BASE}/ui#/quotas`);
    await tp.locator('#quotas tr[data-quota-key="webhook"]').waitFor();
    await shot(tp, 'tenant-quotas');
    await ctx.close();
  });

  await step('the admin lists the sessions and ends one: that browser is signed out', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tp = watch(await ctx.newPage(), 'ended');
    await signIn(tp, other.api_key);
    const own = await (await tp.request.get(`${BASE}/ui/api/sessions`)).json();
    const mine = own.sessions.find((x) => x.current);
    assert.ok(mine && mine.role === 'tenant', JSON.stringify(own));
    await page.goto(`${BASE}/ui#/sessions`);
    await page.locator(`#sessions tr[data-session="${mine.id}"]`).waitFor();
    await shot(page, 'sessions');
    await page.locator(`button[data-end="${mine.id}"]`).click();
    await page.locator(`#sessions tr[data-session="${mine.id}"]`).waitFor({ state: 'detached' });
    await tp.goto(`${BASE}/ui`);
    await tp.locator('#sign-in').waitFor({ state: 'visible' });
    assert.equal((await tp.request.get(`${BASE}/ui/api/overview`)).status(), 401);
    await ctx.close();
  });

  await step('the audit log shows the tenant\'s grant and the replay made from the page', async () => {
    await page.goto(`${BASE}/ui#/audit`);
    await page.locator('#audit tr[data-action="replay"]').first().waitFor();
    await page.locator('#audit tr[data-action="grant"]').first().waitFor();
    assert.match(await page.locator('#audit tr[data-action="replay"]').first().textContent(), /admin/);
    await shot(page, 'audit');
  });

  await step('a second session cookie tossed in by another page is named, not read', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const tp = watch(await ctx.newPage(), 'tossed');
    await signIn(tp, other.api_key);
    // What a page on another port of this host could set: a plain cookie under /ui.
    await ctx.addCookies([{ name: 'herald_ui', value: 'v1.a.1.x.y', domain: '127.0.0.1', path: '/ui', httpOnly: true }]);
    await tp.goto(`${BASE}/ui`);
    await tp.locator('#sign-in').waitFor({ state: 'visible' });
    assert.match(await tp.locator('#sign-in-error').textContent(), /2 herald session cookies/);
    await ctx.close();
  });

  await step('at a phone\'s width every page fits the screen', async () => {
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    const phone = watch(await ctx.newPage(), 'phone');
    await signIn(phone, ADMIN_KEY);
    await phone.locator('#tenant').selectOption({ label: 'acme' });
    for (const [hash, ready, name] of [
      ['#/overview', '[data-tile="sent"]', 'phone-overview'],
      ['#/deliveries', '#deliveries', 'phone-deliveries'],
      [`#/deliveries/${flaky.id}`, '#attempts li[data-outcome="sent"]', 'phone-delivery'],
      ['#/quotas', '#quotas', 'phone-quotas'],
      ['#/sessions', '#sessions', 'phone-sessions'],
      ['#/audit', '#audit', 'phone-audit'],
    ]) {
      await phone.goto(`${BASE}/ui${hash}`);
      await phone.locator(ready).first().waitFor();
      const [scroll, inner] = await phone.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      assert.ok(scroll <= inner, `${hash}: the page is ${scroll}px wide on a ${inner}px screen`);
      await shot(phone, name);
    }
    await ctx.close();
  });

  await step('signing out ends the session', async () => {
    await page.locator('#sign-out').click();
    await page.locator('#sign-in').waitFor({ state: 'visible' });
    assert.equal((await page.request.get(`${BASE}/ui/api/overview`)).status(), 401);
  });

  await step('an incident: one destination failing for three tenants is found, paused, fixed, replayed exactly, resumed', async () => {
    const third = await call('POST', '/v1/tenants', ADMIN_KEY, { name: 'third' });
    await call('POST', `/v1/tenants/${third.id}/quotas/webhook/grant`, ADMIN_KEY, { amount: 100 }, { 'idempotency-key': `grant-${third.id}` });
    const tenants = [acme, other, third];
    const failing = [];
    for (const t of tenants) {
      for (const n of [1, 2]) {
        const d = await submit(t, { operation_key: `incident-${n}`, to: brokenHook(`/orders/${t.id}/${n}`), payload: { n }, max_attempts: 1 });
        failing.push([t, d]);
      }
      await submit(t, { operation_key: 'incident-healthy', to: hook(`/ok/incident-${t.id}`), payload: { n: 0 } });
    }
    await until('six deliveries to 127.0.0.2 failed', async () => {
      const states = await Promise.all(failing.map(([t, d]) => call('GET', `/v1/deliveries/${d.id}`, t.api_key)));
      return states.every((d) => d.state === 'failed');
    });
    await signIn(page, ADMIN_KEY); // signed out by the step before
    await page.locator('#tenant').selectOption({ label: 'All tenants' });
    await page.locator('nav a[data-page="incidents"]').click();
    const row = page.locator('#destinations tr[data-destination="127.0.0.2"]');
    await row.waitFor();
    const cells = await row.locator('td').allTextContents();
    assert.equal(cells[1], '6', `failed: ${cells}`);
    assert.equal(cells[4], '3', `tenants: ${cells}`);
    assert.equal(cells[5], 'http_503', `top error: ${cells}`);
    const codes = await page.locator('#errors tr[data-error="http_503"] td').allTextContents();
    assert.ok(Number(codes[1]) >= 6, `http_503 among the top error codes: ${codes}`);
    await shot(page, 'incident-found');

    await row.locator('button[data-pause="127.0.0.2"]').click();
    await page.locator('#hold-list tr[data-hold="destination:127.0.0.2"]').waitFor();
    // Submitted while paused: held, no attempt spent.
    const late = await submit(other, { operation_key: 'incident-late', to: brokenHook('/orders/late'), payload: { late: true } });
    await until('the late delivery held', async () => (await call('GET', `/v1/deliveries/${late.id}`, other.api_key)).held);
    assert.equal((await call('GET', `/v1/deliveries/${late.id}`, other.api_key)).attempts, 0);

    brokenDown = false; // the receiver is fixed
    await row.locator('button[data-count="127.0.0.2"]').click();
    const confirm = page.locator('button[data-confirm="127.0.0.2"]');
    await confirm.waitFor();
    assert.equal(await confirm.textContent(), 'Replay at most 6 failed deliveries to 127.0.0.2 of every tenant');
    await shot(page, 'incident-paused');
    await confirm.click();
    // It runs as a job of the server; the page shows its progress, then what it did.
    await until('the replay reported', async () => /6 deliveries to 127\.0\.0\.2 replayed/.test(await page.locator('#incident-result').textContent()));
    await sleep(600);
    assert.equal(brokenSeen.size, 0, 'replayed but still paused: nothing sent yet');

    await page.locator('button[data-resume="destination:127.0.0.2"]').click();
    await until('every delivery to 127.0.0.2 sent', async () => {
      const all = [...failing, [other, late]];
      const states = await Promise.all(all.map(([t, d]) => call('GET', `/v1/deliveries/${d.id}`, t.api_key)));
      return states.every((d) => d.state === 'sent');
    });
    assert.equal(brokenSeen.size, 7, 'each of the seven arrived');
    assert.ok([...brokenSeen.values()].every((n) => n === 1), 'exactly once each');
    await page.locator('#holds').getByText('Nothing is paused.').waitFor();
    const log = await call('GET', '/v1/audit', ADMIN_KEY);
    const actions = log.entries.map((e) => e.action);
    for (const a of ['hold', 'bulk_replay', 'hold_release']) assert.ok(actions.includes(a), `${a} in the audit log`);
    await shot(page, 'incident-resolved');
    // The list over every tenant, filtered by where the deliveries went and their key.
    await page.goto(`${BASE}/ui#/deliveries?state=sent&to_prefix=${encodeURIComponent('http://127.0.0.2')}&key_prefix=incident-`);
    await until('the seven across three tenants listed', async () => (await page.locator('#deliveries tbody tr').count()) === 7);
    const shown = await page.locator('#deliveries tbody tr td:first-child').allTextContents();
    assert.deepEqual([...new Set(shown)].sort(), ['acme', 'other', 'third']);
    await shot(page, 'incident-all-tenants');
    // Signed out, so this page polls no server that the next step kills.
    await page.locator('#sign-out').click();
    await page.locator('#sign-in').waitFor({ state: 'visible' });
  });

  await step('the read-only viewer sees every tenant and the incident console, and no control that acts', async () => {
    await signIn(page, VIEWER_KEY);
    assert.equal(await page.locator('#identity').textContent(), 'viewer (read-only)');
    await page.locator('#tenant').selectOption({ label: 'All tenants' });
    await page.locator('nav a[data-page="incidents"]').click();
    await page.locator('#destinations, #failing-destinations p').first().waitFor();
    assert.equal(await page.locator('#pause-form').isVisible(), false);
    assert.equal(await page.locator('[data-pause]:visible, [data-count]:visible').count(), 0);
    await page.locator('nav a[data-page="deliveries"]').click();
    await page.locator('#deliveries').waitFor();
    assert.equal(await page.locator('#bulk').isVisible(), false);
    await page.locator('#deliveries tbody tr a').first().click();
    await page.locator('#view h1 .badge').waitFor();
    assert.equal(await page.locator('#replay').isVisible(), false);
    // The server refuses an action from this session whatever the page shows.
    const id = page.url().split('/').pop();
    const csrf = await page.evaluate(async () => (await (await fetch('/ui/api/session')).json()).csrf);
    const r = await page.request.post(`${BASE}/ui/api/deliveries/${id}/replay`, { headers: { 'x-herald-csrf': csrf } });
    assert.equal(r.status(), 403);
    assert.equal((await r.json()).error.code, 'read_only');
    await shot(page, 'viewer');
    await page.locator('#sign-out').click();
    await page.locator('#sign-in').waitFor({ state: 'visible' });
  });

  await step('a lost server is said plainly, not shown as a page that is still fresh', async () => {
    // A page of its own, not watched: its failed requests are the point, not errors.
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const lost = await ctx.newPage();
    await signIn(lost, ADMIN_KEY);
    await lost.locator('#tenant').selectOption({ label: 'acme' });
    await lost.goto(`${BASE}/ui#/deliveries`);
    await lost.locator('#deliveries').waitFor();
    assert.equal(await lost.locator('#lost').isHidden(), true);
    server.kill('SIGKILL');
    await lost.locator('#lost').waitFor({ state: 'visible', timeout: 5000 });
    assert.match(await lost.locator('#lost').textContent(), /Lost contact with herald/);
    await shot(lost, 'lost');
    await ctx.close();
  });

  assert.deepEqual(consoleErrors, [], 'no console errors in any page');
  console.log(`all ${steps.length} steps passed; screenshots in ${path.relative(process.cwd(), SHOTS)}`);
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  console.error(`not ok - ${e.stack || e}`);
  if (consoleErrors.length) console.error(`console errors:\n  ${consoleErrors.join('\n  ')}`);
  console.error(`herald serve's log (last 3000 bytes):\n${serverLog.slice(-3000)}`);
} finally {
  await browser?.close().catch(() => {});
  server.kill('SIGTERM');
  receiver.close();
  broken.close();
  await sleep(200);
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
