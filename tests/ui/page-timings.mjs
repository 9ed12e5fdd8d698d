// Each dashboard page's time in a real browser (Debian's chromium, playwright-core), from
// navigation to the page drawn with its data, against a running herald: the second half
// of scripts/ui-timings, which starts the server and fills it.
//
//   node tests/ui/page-timings.mjs BASE_URL ADMIN_KEY TENANT_ID DELIVERY_ID [REPEAT]
//
// Prints one JSON object: {page: {median_ms, p95_ms}}.
import { chromium } from 'playwright-core';

const [base, adminKey, tenant, delivery, repeatArg] = process.argv.slice(2);
if (!delivery) {
  console.error('usage: page-timings.mjs BASE_URL ADMIN_KEY TENANT_ID DELIVERY_ID [REPEAT]');
  process.exit(2);
}
const repeat = Number(repeatArg || 10);

const browser = await chromium.launch({
  executablePath: process.env.HERALD_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const errors = [];
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(`${base}/ui`);
  await page.locator('#key').fill(adminKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#nav').waitFor({ state: 'visible' });
  await page.evaluate((t) => sessionStorage.setItem('herald.tenant', t), tenant);

  const pages = [
    ['overview', '#/overview', 'svg[aria-label="outcomes per minute"]'],
    ['deliveries', '#/deliveries', '#deliveries tbody tr'],
    ['deliveries, failed', '#/deliveries?state=failed', '#deliveries tbody tr'],
    ['deliveries, search by key', '#/deliveries?q=order-4242', '#deliveries tbody tr'],
    ['delivery', `#/deliveries/${delivery}`, '#attempts li'],
    ['quotas', '#/quotas', '#journal tbody tr'],
  ];
  const out = {};
  for (const [name, hash, ready] of pages) {
    const times = [];
    for (let i = 0; i < repeat; i += 1) {
      await page.goto('about:blank');
      const t0 = performance.now();
      await page.goto(`${base}/ui${hash}`);
      await page.locator(ready).first().waitFor({ timeout: 60000 });
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    out[name] = {
      median_ms: Math.round(times[Math.floor(times.length / 2)] * 10) / 10,
      p95_ms: Math.round(times[Math.max(0, Math.ceil(times.length * 0.95) - 1)] * 10) / 10,
    };
  }
  if (errors.length) throw new Error(`console errors: ${errors.join('; ')}`);
  console.log(JSON.stringify(out));
} finally {
  await browser.close();
}
