// herald's operator dashboard: one script, no framework, no build step.
//
// Everything a tenant or a receiver wrote (operation keys, recipients, payloads, error
// bodies) reaches the page through text nodes only: `el()` never parses markup, and no
// line here assigns innerHTML. The session is an HttpOnly cookie the script cannot read;
// the key typed at sign-in is sent once and dropped. Actions carry the session's CSRF
// token, which the server gives to this page only (a same-origin read).
'use strict';

(() => {
  const STATES = ['pending', 'sending', 'sent', 'failed', 'cancelled'];
  const SERIES = ['sent', 'retried', 'failed', 'lost'];
  const REFRESH_MS = { overview: 5000, incidents: 3000, deliveries: 1000, delivery: 1000, quotas: 5000, sessions: 5000, audit: 5000 };

  const app = { me: null, tenants: [], tenant: '', view: 0, timer: null };
  const $ = (id) => document.getElementById(id);
  /** The admin and the read-only viewer see every tenant; a tenant its own. */
  const overAll = () => app.me && (app.me.role === 'admin' || app.me.role === 'viewer');

  // ---- building the page ------------------------------------------------------------

  /** An element: `attrs` are properties of our own (class, text, on*), or attributes. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    return dress(node, attrs, children);
  }

  /** An SVG element, as `el`. */
  function svg(tag, attrs, ...children) {
    const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
    return dress(node, attrs, children);
  }

  function dress(node, attrs, children) {
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === 'class') node.setAttribute('class', value);
      else if (name === 'text') node.textContent = String(value);
      else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
      else if (name === 'style') throw new Error('inline style is refused by the CSP');
      else node.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function badge(value) {
    return el('span', { class: `badge ${value || ''}`, text: value || '—' });
  }

  function fmtNum(n) {
    return typeof n === 'number' ? n.toLocaleString('en-US') : '—';
  }

  /** An instant in the browser's zone, the zone named, the date only when not today:
   * "11:14:37 PM UTC", "Dec 3, 11:14:37 PM UTC", "Dec 3, 2025, 11:14:37 PM UTC". */
  function fmtTime(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return iso;
    const now = new Date();
    const shown = { hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' };
    if (d.toDateString() !== now.toDateString()) Object.assign(shown, { month: 'short', day: 'numeric' });
    if (d.getFullYear() !== now.getFullYear()) shown.year = 'numeric';
    return d.toLocaleString(undefined, shown);
  }

  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });

  /** How long ago (or how soon) an instant is: "3 minutes ago", "in 2 hours". */
  function fmtRelative(iso) {
    const ms = new Date(iso).getTime() - Date.now();
    if (Number.isNaN(ms)) return '';
    const s = Math.round(ms / 1000);
    for (const [unit, size] of [['day', 86400], ['hour', 3600], ['minute', 60]]) {
      if (Math.abs(s) >= size) return relative.format(Math.round(s / size), unit);
    }
    return relative.format(s, 'second');
  }

  /** An instant: how long ago, then when, in the browser's named zone (the UTC text on hover). */
  function time(iso) {
    if (!iso) return el('time', { text: '—' });
    return el('time', { datetime: iso, title: iso, text: `${fmtRelative(iso)} · ${fmtTime(iso)}` });
  }

  /** A delivery id as the list shows it: its random tail, which differs from row to row
   * (a UUIDv7 begins with its creation time, the same for a minute's deliveries). */
  function shortId(id) {
    return id.slice(-12);
  }

  function fmtAge(ms) {
    if (ms === null || ms === undefined) return '—';
    const s = ms / 1000;
    if (s < 1) return `${Math.round(ms)} ms`;
    if (s < 120) return `${s.toFixed(1)} s`;
    if (s < 7200) return `${Math.round(s / 60)} min`;
    return `${(s / 3600).toFixed(1)} h`;
  }

  function flash(message, bad) {
    const box = $('flash');
    box.textContent = message;
    box.className = bad ? 'flash bad' : 'flash';
    box.hidden = false;
    clearTimeout(flash.timer);
    flash.timer = setTimeout(() => { box.hidden = true; }, 5000);
  }

  // ---- talking to the server ----------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message || `HTTP ${status}`);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const init = { method, credentials: 'same-origin', headers: { accept: 'application/json' } };
    if (body !== undefined) {
      init.headers['content-type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    if (method !== 'GET' && app.me) init.headers['x-herald-csrf'] = app.me.csrf;
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      // No answer at all: the server is down or unreachable, said plainly until it answers.
      if ($('lost').hidden) {
        $('lost').textContent = `Lost contact with herald at ${new Date().toLocaleTimeString()}: what this page shows may be stale; it keeps trying.`;
        $('lost').hidden = false;
      }
      throw new ApiError(0, 'unreachable', 'herald did not answer');
    }
    $('lost').hidden = true;
    const text = await response.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (!response.ok) {
      const e = (data && data.error) || {};
      if (response.status === 401 && path !== '/ui/api/session') signedOut('Your session ended; sign in again.');
      throw new ApiError(response.status, e.code, e.message || text);
    }
    return data;
  }

  /** Runs a confirmed bulk action as a job of the server, showing its progress through
   *  `show(counts)` until it is done; its result. */
  async function runBulk(body, show) {
    const { job } = await api('POST', '/ui/api/bulk', { ...body, background: true });
    for (;;) {
      await new Promise((r) => setTimeout(r, 300));
      const j = await api('GET', `/ui/api/bulk/${job}`);
      show(j);
      if (j.done) {
        if (j.error) throw new Error(j.error);
        return j.result;
      }
    }
  }

  /** "12 of at most 40 replayed, 1 skipped" */
  function bulkProgress(verb, j) {
    return `${fmtNum(j.changed)} of at most ${fmtNum(j.expected)} ${verb} so far, ${fmtNum(j.skipped)} skipped…`;
  }

  /** A query string: the chosen tenant (an admin's) and the given parameters. */
  function query(params, withTenant = true) {
    const q = new URLSearchParams();
    if (withTenant && app.me && overAll() && app.tenant) q.set('tenant', app.tenant);
    for (const [k, v] of Object.entries(params || {})) if (v) q.set(k, v);
    const s = q.toString();
    return s ? `?${s}` : '';
  }

  // ---- signing in and out -------------------------------------------------------------

  function signedOut(message) {
    app.me = null;
    stopRefresh();
    $('nav').hidden = true;
    $('who').hidden = true;
    $('view').hidden = true;
    $('view').replaceChildren();
    $('sign-in').hidden = false;
    $('sign-in-error').textContent = message || '';
    $('key').focus();
  }

  async function signedIn(me) {
    app.me = me;
    const list = await api('GET', '/ui/api/tenants');
    app.tenants = list.tenants;
    const picker = $('tenant');
    const options = app.tenants.map((t) => el('option', { value: t.id, text: t.name }));
    if (me.role === 'admin' || me.role === 'viewer') {
      picker.replaceChildren(el('option', { value: '', text: 'All tenants' }), ...options);
      const kept = sessionStorage.getItem('herald.tenant') || '';
      app.tenant = app.tenants.some((t) => t.id === kept) ? kept : '';
      picker.disabled = false;
    } else {
      picker.replaceChildren(...options);
      app.tenant = me.tenant.id;
      picker.disabled = true;
    }
    picker.value = app.tenant;
    // The header is shown once it is whole: who, and the tenant picker as it will stay.
    $('identity').textContent = me.role === 'tenant' ? `tenant ${me.tenant.name}` : me.role === 'viewer' ? 'viewer (read-only)' : 'admin';
    document.body.classList.toggle('read-only', me.role === 'viewer');
    $('sign-in').hidden = true;
    $('nav').hidden = false;
    $('who').hidden = false;
    render();
  }

  $('sign-in-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const input = $('key');
    const key = input.value;
    input.value = '';
    $('sign-in-error').textContent = '';
    try {
      const me = await api('POST', '/ui/api/session', { key });
      await signedIn(me);
    } catch (e) {
      $('sign-in-error').textContent = e.status === 401 ? 'That key is not valid.' : e.message;
    }
  });

  $('sign-out').addEventListener('click', async () => {
    try { await api('DELETE', '/ui/api/session'); } catch (_) { /* signed out either way */ }
    signedOut('Signed out.');
  });

  $('tenant').addEventListener('change', (event) => {
    app.tenant = event.target.value;
    sessionStorage.setItem('herald.tenant', app.tenant);
    const route = parseRoute();
    // Another tenant's delivery is not this tenant's: back to the list.
    if (route.page === 'delivery') location.hash = '#/deliveries';
    else render();
  });

  // ---- routing ------------------------------------------------------------------------

  function parseRoute() {
    const raw = location.hash.replace(/^#\/?/, '');
    const [path, search] = raw.split('?');
    const parts = path.split('/').filter(Boolean);
    const params = Object.fromEntries(new URLSearchParams(search || ''));
    if (parts[0] === 'deliveries' && parts[1]) return { page: 'delivery', id: decodeURIComponent(parts[1]), params };
    if (['overview', 'incidents', 'deliveries', 'quotas', 'sessions', 'audit'].includes(parts[0])) return { page: parts[0], params };
    return { page: 'overview', params };
  }

  function stopRefresh() {
    clearInterval(app.timer);
    app.timer = null;
  }

  /** Runs `load` now and every `ms` while this view is the one shown and the tab visible. */
  function refresh(view, ms, load) {
    stopRefresh();
    const tick = async () => {
      if (view !== app.view || document.hidden) return;
      try {
        await load();
      } catch (e) {
        if (view === app.view && e.status !== 401) flash(e.message, true);
      }
    };
    app.timer = setInterval(tick, ms);
    return tick();
  }

  function render() {
    if (!app.me) return;
    app.view += 1;
    const view = app.view;
    const route = parseRoute();
    for (const a of document.querySelectorAll('nav a')) {
      const page = route.page === 'delivery' ? 'deliveries' : route.page;
      a.classList.toggle('active', a.dataset.page === page);
    }
    const root = $('view');
    root.hidden = false;
    root.replaceChildren();
    const pages = { overview, incidents, deliveries, delivery, quotas, sessions, audit };
    pages[route.page](root, view, route);
  }

  window.addEventListener('hashchange', render);

  /** An admin holding only a delivery's id needs no tenant: the server finds it. */
  function openById() {
    const lookup = el('form', { class: 'actions', id: 'open-delivery' },
      el('label', { for: 'delivery-id', text: 'Or open a delivery by id' }),
      el('input', { id: 'delivery-id', name: 'id', placeholder: 'delivery id', required: true }),
      el('button', { type: 'submit', text: 'Open' }));
    lookup.addEventListener('submit', (event) => {
      event.preventDefault();
      const id = new FormData(lookup).get('id');
      if (id) location.hash = `#/deliveries/${encodeURIComponent(String(id).trim())}`;
    });
    return lookup;
  }

  function needTenant(root) {
    if (app.tenant) return false;
    stopRefresh();
    root.append(el('div', { class: 'card' },
      el('h1', { text: 'Choose a tenant' }),
      el('p', { class: 'muted', text: 'This page shows one tenant at a time: pick one in the Tenant selector above.' }),
      openById()));
    return true;
  }

  // ---- overview -----------------------------------------------------------------------

  function overview(root, view) {
    const tiles = el('div', { class: 'tiles' });
    const chart = el('div', { class: 'card' });
    const rate = el('div', { class: 'card' });
    const channels = el('div', { class: 'card' });
    const alerts = el('div', { class: 'card' });
    const counted = el('p', { class: 'muted', id: 'counted' });
    root.append(el('h1', { text: 'Overview' }), tiles, counted,
      el('div', { class: 'grid' }, chart, rate), el('div', { class: 'grid' }, channels, alerts));
    refresh(view, REFRESH_MS.overview, async () => {
      const o = await api('GET', `/ui/api/overview${query()}`);
      if (view !== app.view) return;
      const lastHour = (k) => o.series.reduce((sum, m) => sum + m[k], 0);
      tiles.replaceChildren(
        ...STATES.map((s) => tile(s, s, o.by_state[s])),
        tile('warn', 'oldest due', fmtAge(o.oldest_due_age_ms),
          o.oldest_due_age_ms === null && app.tenant ? 'the whole queue: all tenants only' : null),
        tile('failed', 'failed, last hour', lastHour('failed')),
        tile('warn', 'retried, last hour', lastHour('retried')),
        tile('lost', 'reconciler recovered, last hour', o.reconciler.lost_last_hour));
      counted.textContent = `Deliveries by state counted ${o.counted_ms_ago < 1000 ? 'just now' : `${fmtAge(o.counted_ms_ago)} ago`} (a count is shared for 10 s); outcomes per minute are written every 10 s.`;
      chart.replaceChildren(el('h2', { text: 'Outcomes per minute, last hour' }),
        throughputChart(o.series), legend(SERIES));
      rate.replaceChildren(el('h2', { text: 'Failure rate per minute (failed or retried attempts)' }),
        rateChart(o.series));
      channels.replaceChildren(el('h2', { text: 'Deliveries by channel and state' }), ...[byChannel(o.by_channel)].flat());
      alerts.replaceChildren(el('h2', { text: 'Operator alerts' }), alertList(o.alerts));
    });
  }

  function tile(kind, label, value, note) {
    return el('div', { class: `tile ${kind}`, 'data-tile': label },
      el('div', { class: 'label', text: label }),
      el('div', { class: 'n', text: typeof value === 'number' ? fmtNum(value) : value }),
      note ? el('div', { class: 'muted', text: note }) : null);
  }

  function legend(keys) {
    return el('div', { class: 'legend' }, keys.map((k) => el('span', {}, el('i', { class: k }), k)));
  }

  const W = 600;
  const H = 170;
  const PAD = { left: 34, right: 6, top: 8, bottom: 20 };

  function minuteLabel(iso) {
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  }

  function frame(maxLabel, series) {
    const g = [];
    g.push(svg('line', { class: 'axis', x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom }));
    g.push(svg('line', { class: 'axis', x1: PAD.left, x2: PAD.left, y1: PAD.top, y2: H - PAD.bottom }));
    g.push(svg('text', { x: PAD.left - 4, y: PAD.top + 8, 'text-anchor': 'end', text: maxLabel }));
    g.push(svg('text', { x: PAD.left - 4, y: H - PAD.bottom, 'text-anchor': 'end', text: '0' }));
    if (series.length) {
      g.push(svg('text', { x: PAD.left, y: H - 5, text: minuteLabel(series[0].minute) }));
      g.push(svg('text', { x: W - PAD.right, y: H - 5, 'text-anchor': 'end', text: minuteLabel(series[series.length - 1].minute) }));
    }
    return g;
  }

  function throughputChart(series) {
    const max = Math.max(1, ...series.map((m) => SERIES.reduce((s, k) => s + m[k], 0)));
    const plotH = H - PAD.top - PAD.bottom;
    const step = (W - PAD.left - PAD.right) / Math.max(1, series.length);
    const bars = [];
    series.forEach((m, i) => {
      let y = H - PAD.bottom;
      const tip = `${minuteLabel(m.minute)}: ${SERIES.map((k) => `${k} ${m[k]}`).join(', ')}`;
      for (const k of SERIES) {
        if (!m[k]) continue;
        const h = (m[k] / max) * plotH;
        y -= h;
        bars.push(svg('rect', { class: k, x: PAD.left + i * step + 0.5, y, width: Math.max(1, step - 1), height: h },
          svg('title', { text: tip })));
      }
    });
    return svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'outcomes per minute' },
      frame(fmtNum(max), series), bars);
  }

  function rateChart(series) {
    const plotH = H - PAD.top - PAD.bottom;
    const step = (W - PAD.left - PAD.right) / Math.max(1, series.length);
    const points = [];
    const dots = [];
    series.forEach((m, i) => {
      const all = m.sent + m.retried + m.failed;
      if (!all) return;
      const r = (m.retried + m.failed) / all;
      const x = PAD.left + (i + 0.5) * step;
      const y = H - PAD.bottom - r * plotH;
      points.push(`${x.toFixed(1)},${y.toFixed(1)}`);
      dots.push(svg('circle', { class: 'failed', cx: x, cy: y, r: 2.5 },
        svg('title', { text: `${minuteLabel(m.minute)}: ${(r * 100).toFixed(1)} % of ${all} attempts` })));
    });
    const body = points.length
      ? [svg('polyline', { class: 'rate', points: points.join(' ') }), dots]
      : [svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', text: 'no attempts in the last hour' })];
    return svg('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'failure rate per minute' },
      frame('100 %', series), body);
  }

  function stackBar(parts, total) {
    const bar = el('div', { class: 'stack' });
    for (const [k, n] of parts) {
      if (!n || !total) continue;
      const span = el('span', { class: k, title: `${k}: ${fmtNum(n)}` });
      span.style.width = `${(n / total) * 100}%`;
      bar.append(span);
    }
    return bar;
  }

  function byChannel(rows) {
    const channels = new Map();
    for (const r of rows) {
      if (!channels.has(r.channel)) channels.set(r.channel, {});
      channels.get(r.channel)[r.state] = r.count;
    }
    if (!channels.size) return el('p', { class: 'muted', text: 'No deliveries yet.' });
    const list = el('div', { class: 'rows' });
    for (const [channel, counts] of [...channels].sort()) {
      const total = STATES.reduce((s, k) => s + (counts[k] || 0), 0);
      list.append(el('div', { class: 'row', 'data-channel': channel },
        el('span', { class: 'mono', text: channel }),
        stackBar(STATES.map((s) => [s, counts[s] || 0]), total),
        el('span', { class: 'num', text: fmtNum(total) })));
    }
    return [list, legend(STATES)];
  }

  function alertList(alerts) {
    if (!overAll()) return el('p', { class: 'muted', text: 'Operator alerts are shown to the admin.' });
    if (!alerts.length) return el('p', { class: 'muted', text: 'None raised by this server.' });
    return el('ul', { class: 'alerts' }, alerts.map((a) => el('li', {},
      el('strong', { text: a.reason }), ` × ${fmtNum(a.count)}, last `, time(a.last_at))));
  }

  // ---- deliveries ---------------------------------------------------------------------

  function toIso(local) {
    if (!local) return '';
    const d = new Date(local);
    return Number.isNaN(d.getTime()) ? '' : d.toISOString();
  }

  function toLocal(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return '';
    const pad = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
  }

  function select(name, label, values, current) {
    return el('div', { class: 'field' }, el('label', { for: `f-${name}`, text: label }),
      el('select', { id: `f-${name}`, name },
        el('option', { value: '', text: 'any' }),
        values.map((v) => el('option', { value: v, text: v, selected: v === current }))));
  }

  function input(name, label, type, value, placeholder) {
    return el('div', { class: 'field' }, el('label', { for: `f-${name}`, text: label }),
      el('input', { id: `f-${name}`, name, type, value: value || '', placeholder: placeholder || null }));
  }

  function deliveries(root, view, route) {
    // The admin with no tenant chosen lists every tenant's (an incident across tenants).
    const all = overAll() && !app.tenant;
    const p = route.params;
    const form = el('form', { class: 'filters', id: 'filters' },
      input('q', 'Id or operation key', 'search', p.q, all ? 'exact id' : 'exact id or key'),
      select('state', 'State', STATES, p.state),
      select('channel', 'Channel', app.me.channels || [], p.channel),
      input('error_code', 'Latest error code', 'search', p.error_code, 'e.g. http_503'),
      input('key_prefix', 'Key starts with', 'search', p.key_prefix, 'order-17'),
      input('to_prefix', 'To starts with', 'search', p.to_prefix, 'https://hooks.example.com'),
      input('failed_since', 'Failed since', 'datetime-local', toLocal(p.failed_since)),
      input('from', 'Created from', 'datetime-local', toLocal(p.from)),
      input('to', 'Created before', 'datetime-local', toLocal(p.to)),
      el('div', { class: 'actions' },
        el('button', { type: 'submit', text: 'Apply' }),
        el('button', { type: 'button', class: 'secondary', text: 'Clear', onclick: () => { location.hash = '#/deliveries'; } })));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const f = new FormData(form);
      const next = new URLSearchParams();
      for (const k of ['q', 'state', 'channel', 'error_code', 'key_prefix', 'to_prefix']) if (f.get(k)) next.set(k, String(f.get(k)).trim());
      for (const k of ['from', 'to', 'failed_since']) if (toIso(f.get(k))) next.set(k, toIso(f.get(k)));
      const s = next.toString();
      location.hash = s ? `#/deliveries?${s}` : '#/deliveries';
    });

    const table = el('div', { class: 'scroll' });
    const pager = el('div', { class: 'pager' });
    const summary = el('p', { class: 'muted' });
    root.append(el('h1', { text: all ? 'Deliveries of every tenant' : 'Deliveries' }),
      ...(all ? [el('div', { class: 'card' }, openById())] : []),
      el('div', { class: 'card' }, form),
      el('div', { class: 'card' }, summary, table, pager), bulkCard(p));

    const filter = { q: p.q, state: p.state, channel: p.channel, from: p.from, to: p.to,
      error_code: p.error_code, key_prefix: p.key_prefix, to_prefix: p.to_prefix, failed_since: p.failed_since };
    const cursors = [];
    let cursor = '';
    const load = async () => {
      const page = await api('GET', `/ui/api/deliveries${query({ ...filter, cursor, limit: '50' })}`);
      if (view !== app.view) return;
      table.replaceChildren(deliveryTable(page.deliveries, all));
      summary.textContent = p.q
        ? `${page.deliveries.length} found for “${p.q}”`
        : `${page.deliveries.length} shown, newest first${cursors.length ? ` (page ${cursors.length + 1})` : ''}`;
      pager.replaceChildren(
        el('button', { type: 'button', class: 'secondary', text: '← Newer', disabled: !cursors.length,
          onclick: () => { cursor = cursors.pop() || ''; turn(); } }),
        el('button', { type: 'button', class: 'secondary', text: 'Older →', disabled: !page.next_cursor,
          onclick: () => { cursors.push(cursor); cursor = page.next_cursor; turn(); } }));
    };
    // The first page follows new deliveries; an older page stays still.
    const turn = () => refresh(view, cursor ? 3600000 : REFRESH_MS.deliveries, load);
    turn();
  }

  function deliveryTable(rows, withTenant) {
    if (!rows.length) return el('p', { class: 'muted', text: 'No deliveries match.' });
    const tenantOf = (id) => (app.tenants.find((t) => t.id === id) || {}).name || id.slice(-12);
    return el('table', { id: 'deliveries' },
      el('thead', {}, el('tr', {},
        ...(withTenant ? [el('th', { text: 'Tenant' })] : []),
        ['Created', 'Id', 'Operation key', 'Channel', 'To', 'State', 'Attempts', 'Last error']
          .map((t, i) => el('th', { text: t, class: i === 6 ? 'num' : ([1, 3, 4, 7].includes(i) ? 'hide-narrow' : null) })))),
      el('tbody', {}, rows.map((d) => el('tr', { 'data-id': d.id, 'data-state': d.state },
        ...(withTenant ? [el('td', { class: 'clip', text: tenantOf(d.tenant) })] : []),
        el('td', {}, time(d.created_at)),
        el('td', { class: 'mono hide-narrow' }, el('a', { href: `#/deliveries/${encodeURIComponent(d.id)}`, title: d.id, text: shortId(d.id) })),
        el('td', { class: 'clip' }, el('a', { href: `#/deliveries/${encodeURIComponent(d.id)}`, text: d.operation_key })),
        el('td', { class: 'hide-narrow', text: d.channel }),
        el('td', { class: 'clip hide-narrow', text: d.to, title: d.to }),
        el('td', {}, badge(d.held ? 'held' : d.state)),
        el('td', { class: 'num', text: `${d.attempts}/${d.max_attempts}` }),
        el('td', { class: 'clip hide-narrow', text: d.last_error || '', title: d.last_error || null })))));
  }

  function bulkCard(p) {
    if (p.key_prefix || p.to_prefix || p.failed_since) {
      // A bulk action takes only what it can bound exactly: never more than the list shows.
      return el('div', { class: 'card', id: 'bulk' },
        el('h2', { text: 'Bulk replay or cancel' }),
        el('p', { class: 'muted', text: 'Bulk actions filter by state, channel, time and error code (and, on the Incidents page, destination): clear the key and recipient prefixes and the failure time to use them.' }));
    }
    const result = el('p', { class: 'muted', id: 'bulk-result', role: 'status' });
    const action = el('select', { id: 'bulk-action', name: 'action' },
      el('option', { value: 'replay', text: 'replay' }), el('option', { value: 'cancel', text: 'cancel' }));
    const code = el('input', { id: 'bulk-error-code', name: 'error_code', placeholder: 'e.g. http_503' });
    const confirmButton = el('button', { type: 'button', class: 'danger', id: 'bulk-confirm', hidden: true });
    // What the dry run counted: the confirmation acts on those deliveries only (none
    // created since, never more than the count), whatever matches by then.
    let counted = null;
    const body = (dryRun) => ({
      action: action.value, state: p.state || null, channel: p.channel || null, from: p.from || null,
      to: p.to || null, error_code: code.value.trim() || p.error_code || null, dry_run: dryRun,
      tenant: overAll() ? app.tenant : null,
      through: dryRun ? null : counted.through, max: dryRun ? null : counted.matched,
    });
    const count = el('button', { type: 'button', class: 'secondary', id: 'bulk-count', text: 'Count matches (dry run)' });
    const reset = () => { confirmButton.hidden = true; result.textContent = ''; };
    action.addEventListener('change', reset);
    code.addEventListener('input', reset);
    count.addEventListener('click', async () => {
      reset();
      try {
        const r = await api('POST', '/ui/api/bulk', body(true));
        counted = r;
        result.textContent = `${fmtNum(r.matched)}${r.more ? '+' : ''} deliveries match; nothing changed yet.`;
        if (r.matched) {
          const tenant = !overAll() ? 'this tenant'
            : app.tenant ? `tenant ${$('tenant').selectedOptions[0]?.textContent || app.tenant}` : 'every tenant';
          confirmButton.textContent = `${action.value === 'replay' ? 'Replay' : 'Cancel'} at most ${fmtNum(r.matched)} deliveries of ${tenant}`;
          confirmButton.hidden = false;
        }
      } catch (e) {
        result.textContent = e.message;
      }
    });
    confirmButton.addEventListener('click', async () => {
      confirmButton.disabled = true;
      try {
        const verb = action.value === 'replay' ? 'replayed' : 'cancelled';
        const r = await runBulk(body(false), (j) => { result.textContent = bulkProgress(verb, j); });
        result.textContent = `${fmtNum(r.changed)} ${verb}, ${fmtNum(r.skipped)} skipped (their state had changed)` +
          (r.more ? '; more match: run it again for the rest.' : '.');
        confirmButton.hidden = true;
        flash(`${fmtNum(r.changed)} deliveries ${verb}`);
      } catch (e) {
        result.textContent = e.message;
      } finally {
        confirmButton.disabled = false;
      }
    });
    const scope = [p.state && `state ${p.state}`, p.channel && `channel ${p.channel}`,
      p.from && `from ${fmtTime(p.from)}`, p.to && `before ${fmtTime(p.to)}`].filter(Boolean);
    return el('div', { class: 'card', id: 'bulk' },
      el('h2', { text: 'Bulk replay or cancel' }),
      el('p', { class: 'muted', text: `Takes every delivery the filter above matches (${scope.length ? scope.join(', ') : 'all of this tenant’s'}; the id or key search is not used), up to 10,000 a call. Count first; then confirm.` }),
      el('div', { class: 'filters' },
        el('div', { class: 'field' }, el('label', { for: 'bulk-action', text: 'Action' }), action),
        el('div', { class: 'field' }, el('label', { for: 'bulk-error-code', text: 'Latest error code' }), code)),
      el('div', { class: 'actions' }, count, confirmButton), result);
  }

  // ---- one delivery -------------------------------------------------------------------

  function delivery(root, view, route) {
    const facts = el('dl', { class: 'facts' });
    const buttons = el('div', { class: 'actions' });
    const payload = el('pre', { id: 'payload' });
    const timeline = el('ol', { class: 'timeline', id: 'attempts' });
    const title = el('h1', { text: 'Delivery' });
    root.append(el('p', {}, el('a', { href: '#/deliveries', text: '← Deliveries' })), title,
      el('div', { class: 'grid' },
        el('div', { class: 'card' }, facts, buttons),
        el('div', { class: 'card' }, el('h2', { text: 'Attempts' }), timeline)),
      el('div', { class: 'card' }, el('h2', { text: 'Payload' }), payload));
    const path = `/ui/api/deliveries/${encodeURIComponent(route.id)}`;
    const load = async () => {
      let d;
      try {
        d = await api('GET', `${path}${query()}`);
      } catch (e) {
        if (e.status !== 404 && e.status !== 400) throw e;
        stopRefresh();
        title.textContent = 'No such delivery';
        facts.replaceChildren(el('p', { class: 'muted', text: e.message }));
        return;
      }
      if (view !== app.view) return;
      show(d);
      // Settled deliveries change only by an action: stop asking.
      if (!['pending', 'sending'].includes(d.delivery.state)) stopRefresh();
    };
    const act = async (verb) => {
      try {
        const r = await api('POST', `${path}/${verb}${query()}`, {});
        flash(`${verb === 'replay' ? 'Replayed' : 'Cancelled'}: now ${r.delivery.state}`);
        refresh(view, REFRESH_MS.delivery, load);
      } catch (e) {
        flash(e.message, true);
      }
    };
    const show = ({ delivery: d, payload: body, attempts }) => {
      title.replaceChildren('Delivery ', badge(d.state));
      const rows = [
        ['Id', el('span', { class: 'mono', text: d.id })],
        ['Operation key', d.operation_key], ['Channel', d.channel], ['To', d.to],
        ['Attempts', `${d.attempts} of ${d.max_attempts}`],
        ['Quota', `${d.cost} × ${d.quota_key}`],
        ['Next attempt', d.state === 'pending' ? time(d.next_attempt_at) : '—'],
        ['Created', time(d.created_at)], ['Updated', time(d.updated_at)], ['Sent', time(d.sent_at)],
        ['Last error', d.last_error || '—'],
      ];
      if (overAll()) rows.splice(1, 0, ['Tenant', tenantName(d.tenant)]);
      facts.replaceChildren(...rows.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)]));
      buttons.replaceChildren(
        el('button', { type: 'button', id: 'replay', text: 'Replay', disabled: !['failed', 'cancelled'].includes(d.state),
          onclick: () => act('replay') }),
        el('button', { type: 'button', id: 'cancel', class: 'danger', text: 'Cancel', disabled: d.state !== 'pending',
          onclick: () => act('cancel') }));
      payload.textContent = pretty(body);
      timeline.replaceChildren(...(attempts.length ? folded(attempts).map((run, i, all) =>
        attemptItem(run, d.state === 'failed' && i === all.length - 1))
        : [el('li', { class: 'muted', text: 'No attempt yet.' })]));
    };
    refresh(view, REFRESH_MS.delivery, load);
  }

  function tenantName(id) {
    const t = app.tenants.find((x) => x.id === id);
    return t ? `${t.name} (${id})` : id;
  }

  function pretty(body) {
    if (body === null || body === undefined) return '';
    if (typeof body !== 'string') return JSON.stringify(body, null, 2);
    try { return JSON.stringify(JSON.parse(body), null, 2); } catch (_) { return body; }
  }

  /** Consecutive attempts that ended alike (outcome, error code and message) as one run:
   * [{...the first attempt, last: the last of the run, count}]. */
  function folded(attempts) {
    const runs = [];
    for (const a of attempts) {
      const prev = runs[runs.length - 1];
      const alike = prev && a.outcome && a.outcome !== 'sent' && prev.outcome === a.outcome
        && prev.error_code === a.error_code && prev.error_message === a.error_message;
      if (alike) {
        prev.last = a;
        prev.count += 1;
      } else {
        runs.push({ ...a, last: a, count: 1 });
      }
    }
    return runs;
  }

  /** One run of attempts; `exhausted`: the delivery failed after it (its attempts ran out). */
  function attemptItem(a, exhausted) {
    const end = a.last || a;
    const took = end.finished_at ? new Date(end.finished_at) - new Date(a.started_at) : null;
    const name = a.count > 1 ? `Attempts ${a.n}–${end.n}` : `Attempt ${a.n}`;
    return el('li', { class: a.outcome || 'running', 'data-n': a.n, 'data-outcome': a.outcome || '' },
      el('div', { class: 'head' }, el('strong', { text: name }), badge(a.outcome || 'running'),
        a.count > 1 ? el('span', { class: 'folded', 'data-folded': a.count, text: `× ${a.count}, the same error` }) : null,
        exhausted && end.outcome !== 'terminal'
          ? el('span', { class: 'badge failed', 'data-exhausted': '', text: 'failed: attempts exhausted' }) : null,
        a.error_code ? el('code', { text: a.error_code }) : null),
      el('div', { class: 'meta' },
        'worker ', el('span', { class: 'mono', text: a.worker }),
        ' · release ', el('span', { class: 'mono release', text: a.release || 'unrecorded' })),
      el('div', { class: 'meta' }, time(a.started_at),
        end.finished_at ? [' → ', time(end.finished_at), ` (${fmtAge(took)})`] : ' → running'),
      a.error_message ? el('pre', { class: 'error-message', text: a.error_message }) : null);
  }

  // ---- quotas -------------------------------------------------------------------------

  function quotas(root, view) {
    if (needTenant(root)) return;
    const accounts = el('div', { class: 'scroll' });
    const journal = el('div', { class: 'scroll' });
    root.append(el('h1', { text: 'Quotas' }),
      el('div', { class: 'card' }, el('h2', { text: 'Accounts' }), accounts,
        legend(['sent', 'reserved', 'available']), el('p', { class: 'muted', text: 'Spent, reserved and available, as shares of what was granted.' })),
      el('div', { class: 'card' }, el('h2', { text: 'Journal (newest 100)' }), journal));
    refresh(view, REFRESH_MS.quotas, async () => {
      const q = await api('GET', `/ui/api/quotas${query()}`);
      if (view !== app.view) return;
      accounts.replaceChildren(q.quotas.length ? el('table', { id: 'quotas' },
        el('thead', {}, el('tr', {}, ['Quota key', 'Granted', 'Available', 'Reserved', 'Spent', '']
          .map((t, i) => el('th', { text: t, class: i && i < 5 ? 'num' : null })))),
        el('tbody', {}, q.quotas.map((a) => el('tr', { 'data-quota-key': a.quota_key },
          el('td', { class: 'mono', text: a.quota_key }),
          ['granted', 'available', 'reserved', 'spent'].map((k) => el('td', { class: 'num', 'data-field': k, text: fmtNum(a[k]) })),
          el('td', {}, stackBar([['sent', a.spent], ['reserved', a.reserved], ['available', a.available]], a.granted))))))
        : el('p', { class: 'muted', text: 'No quota granted yet.' }));
      journal.replaceChildren(q.journal.length ? el('table', { id: 'journal' },
        el('thead', {}, el('tr', {}, ['At', 'Quota key', 'Kind', 'Amount', 'Delivery']
          .map((t, i) => el('th', { text: t, class: i === 3 ? 'num' : null })))),
        el('tbody', {}, q.journal.map((j) => el('tr', {},
          el('td', {}, time(j.at)), el('td', { class: 'mono', text: j.quota_key }),
          el('td', { text: j.kind }), el('td', { class: 'num', text: fmtNum(j.amount) }),
          el('td', { class: 'mono' }, j.delivery_id
            ? el('a', { href: `#/deliveries/${encodeURIComponent(j.delivery_id)}`, title: j.delivery_id, text: shortId(j.delivery_id) }) : '—')))))
        : el('p', { class: 'muted', text: 'Nothing in the journal yet.' }));
    });
  }

  // ---- sessions -----------------------------------------------------------------------

  /** The live sessions: every one for the admin, the tenant's own for a tenant; each can be ended. */
  function sessions(root, view) {
    const list = el('div', { class: 'scroll' });
    root.append(el('h1', { text: 'Sessions' }),
      el('div', { class: 'card' }, list,
        el('p', { class: 'muted', text: 'Signed-in dashboard sessions. A session ends when it signs out, is ended here, signs in again, or goes unused for the idle timeout.' })));
    const load = async () => {
      const q = await api('GET', `/ui/api/sessions${query(undefined, false)}`);
      if (view !== app.view) return;
      list.replaceChildren(q.sessions.length ? el('table', { id: 'sessions' },
        el('thead', {}, el('tr', {}, ['Who', 'Signed in', 'Last seen', 'Address', 'Browser', '']
          .map((t) => el('th', { text: t })))),
        el('tbody', {}, q.sessions.map((s) => el('tr', { 'data-session': s.id },
          el('td', { class: 'mono', text: s.role === 'tenant' ? `tenant ${s.tenant.slice(-12)}` : s.role }),
          el('td', {}, time(s.created_at)), el('td', {}, time(s.seen_at)),
          el('td', { class: 'mono', text: s.address || '—' }), el('td', { text: s.agent || '—' }),
          el('td', {}, s.current ? el('span', { class: 'muted', text: 'this one' })
            : el('button', { type: 'button', class: 'secondary', 'data-end': s.id, text: 'End',
              onclick: async () => {
                try {
                  await api('DELETE', `/ui/api/sessions/${encodeURIComponent(s.id)}`);
                  flash('Session ended.');
                } catch (e) { flash(e.message, true); }
                await load();
              } }))))))
        : el('p', { class: 'muted', text: 'No sessions.' }));
    };
    refresh(view, REFRESH_MS.sessions, load);
  }

  // ---- incidents ----------------------------------------------------------------------

  /** Whose deliveries an incident action takes: the chosen tenant's, or (the admin with
   *  none chosen) every tenant's. */
  function incidentScope() {
    if (!overAll()) return { tenant: null, label: 'this tenant' };
    if (!app.tenant) return { tenant: null, label: 'every tenant' };
    return { tenant: app.tenant, label: `tenant ${$('tenant').selectedOptions[0]?.textContent || app.tenant}` };
  }

  /** What is failing, grouped, with the holds that pause it: find the failing
   *  destination, pause it, replay what failed once it is fixed, resume. */
  function incidents(root, view) {
    const holds = el('div', { class: 'card', id: 'holds' });
    const health = el('div', { class: 'card', id: 'endpoint-health' });
    const destinations = el('div', { class: 'card', id: 'failing-destinations' });
    const errors = el('div', { class: 'card', id: 'failing-errors' });
    const tenants = el('div', { class: 'card', id: 'failing-tenants' });
    const result = el('p', { class: 'muted', id: 'incident-result', role: 'status' });
    const note = el('p', { class: 'muted', id: 'incident-scope' });
    root.append(el('h1', { text: 'Incidents' }), note, result, holds, health, destinations,
      el('div', { class: 'grid' }, errors, tenants));
    // A dry run's count, per destination: the confirmation acts on those only.
    const counted = new Map();
    const scoped = (extra) => ({ ...extra, tenant: incidentScope().tenant });
    const change = async (path, body, done) => {
      try {
        const r = await api('POST', path, scoped(body));
        result.textContent = done(r);
        flash(result.textContent);
        await load();
      } catch (e) {
        result.textContent = e.message;
      }
    };
    const pause = (kind, value) => change('/ui/api/holds', { kind, value },
      (r) => `Paused ${kind} ${value}: ${fmtNum(r.deliveries)} pending deliveries wait, no attempt spent.`);
    const resume = (h) => change('/ui/api/holds/release', { kind: h.kind, value: h.value, tenant: h.tenant },
      (r) => `Resumed ${h.kind} ${h.value}: ${fmtNum(r.deliveries)} deliveries due again.`);
    const replayButtons = (d) => {
      const cell = el('td', { class: 'actions' });
      const key = d.key;
      const c = counted.get(key);
      if (c && c.matched) {
        const confirm = el('button', { type: 'button', class: 'danger', 'data-confirm': key,
          text: `Replay at most ${fmtNum(c.matched)} failed deliveries to ${key} of ${incidentScope().label}` });
        confirm.addEventListener('click', async () => {
          counted.delete(key);
          confirm.disabled = true;
          try {
            const r = await runBulk(scoped({ action: 'replay', state: 'failed', destination: key, dry_run: false,
              through: c.through, max: c.matched }), (j) => { result.textContent = bulkProgress('replayed', j); });
            result.textContent = `${fmtNum(r.changed)} deliveries to ${key} replayed, ${fmtNum(r.skipped)} skipped.`;
            flash(result.textContent);
            await load();
          } catch (e) {
            result.textContent = e.message;
          }
        });
        cell.append(confirm);
      } else if (d.failed) {
        const count = el('button', { type: 'button', class: 'secondary', 'data-count': key, text: 'Count failed to replay' });
        count.addEventListener('click', async () => {
          try {
            const r = await api('POST', '/ui/api/bulk', scoped({ action: 'replay', state: 'failed', destination: key, dry_run: true }));
            counted.set(key, r);
            result.textContent = `${fmtNum(r.matched)}${r.more ? '+' : ''} failed deliveries to ${key} match; nothing changed yet.`;
            await load();
          } catch (e) {
            result.textContent = e.message;
          }
        });
        cell.append(count);
      }
      if (!d.paused) {
        const b = el('button', { type: 'button', 'data-pause': key, text: `Pause ${key}` });
        b.addEventListener('click', () => pause('destination', key));
        cell.append(b);
      }
      return cell;
    };
    const seen = (g) => [el('td', {}, g.first_seen ? time(g.first_seen) : '—'), el('td', {}, g.last_seen ? time(g.last_seen) : '—')];
    const counts = (g) => [el('td', { class: 'num', text: fmtNum(g.failed) }), el('td', { class: 'num', text: fmtNum(g.retrying) }),
      el('td', { class: 'num', text: fmtNum(g.held) })];
    async function load() {
      const f = await api('GET', `/ui/api/failures${query()}`);
      if (view !== app.view) return;
      note.textContent = `${incidentScope().label === 'every tenant' ? 'Every tenant' : `Only ${incidentScope().label}`}: failed in the last ${f.hours} h, or pending after a failed attempt` +
        `${f.truncated ? ' (the most recent 5,000 of each; more exist)' : ''}.`;
      const paused = new Set(f.holds.filter((h) => h.kind === 'destination').map((h) => h.value));
      const pauseForm = el('form', { class: 'actions', id: 'pause-form' },
        el('select', { id: 'pause-kind', name: 'kind' }, ['destination', 'channel', 'tenant'].map((k) => el('option', { value: k, text: k }))),
        el('input', { id: 'pause-value', name: 'value', placeholder: 'hooks.example.com, email, or a tenant id', required: true }),
        el('button', { type: 'submit', text: 'Pause' }));
      pauseForm.addEventListener('submit', (event) => {
        event.preventDefault();
        const data = new FormData(pauseForm);
        pause(String(data.get('kind')), String(data.get('value')).trim());
      });
      holds.replaceChildren(el('h2', { text: 'Paused' }),
        f.holds.length ? el('table', { id: 'hold-list' },
          el('thead', {}, el('tr', {}, ['Kind', 'What', 'Tenant', 'Since', 'By', ''].map((t) => el('th', { text: t })))),
          el('tbody', {}, f.holds.map((h) => {
            const b = el('button', { type: 'button', 'data-resume': `${h.kind}:${h.value}`, text: `Resume ${h.value}` });
            b.addEventListener('click', () => resume(h));
            return el('tr', { 'data-hold': `${h.kind}:${h.value}` }, el('td', { text: h.kind }), el('td', { class: 'mono', text: h.value }),
              el('td', { class: 'mono', text: h.tenant ? tenantName(h.tenant) : 'every tenant' }), el('td', {}, time(h.created_at)),
              el('td', { class: 'mono', text: h.actor }), el('td', {}, b));
          })))
          : el('p', { class: 'muted', text: 'Nothing is paused.' }),
        pauseForm);
      // Lanes (a tenant's sends to one destination) whose sends fail, and the limits set.
      health.replaceChildren(el('h2', { text: 'Endpoint health' }),
        f.circuits.length ? el('table', { id: 'circuits' },
          el('thead', {}, el('tr', {}, ['Destination', 'Tenant', 'Circuit', 'Failures', 'Failing since', 'Waits until', '']
            .map((t, i) => el('th', { text: t, class: i === 3 ? 'num' : null })))),
          el('tbody', {}, f.circuits.map((c) => {
            const cell = el('td', { class: 'actions' });
            if (c.circuit !== 'closed') {
              const b = el('button', { type: 'button', 'data-enable': `${c.tenant}:${c.destination}`, text: `Enable ${c.destination}` });
              b.addEventListener('click', () => change('/ui/api/circuits/enable', { destination: c.destination, tenant: c.tenant },
                (r) => r.enabled ? `${c.destination} sends again: what waited is due now.` : `${c.destination} had no failures.`));
              cell.append(b);
            }
            return el('tr', { 'data-circuit': `${c.tenant}:${c.destination}` }, el('td', { class: 'mono', text: c.destination }),
              el('td', { class: 'mono', text: c.name || tenantName(c.tenant) }), el('td', { text: c.circuit }),
              el('td', { class: 'num', text: fmtNum(c.failures) }), el('td', {}, c.failing_since ? time(c.failing_since) : '—'),
              el('td', {}, c.waits_until ? time(c.waits_until) : '—'), cell);
          })))
          : el('p', { class: 'muted', text: 'Every lane sends.' }),
        f.limits.length ? el('table', { id: 'limits' },
          el('thead', {}, el('tr', {}, ['Limited destination', 'Tenant', 'In flight', 'Per second', 'By'].map((t) => el('th', { text: t })))),
          el('tbody', {}, f.limits.map((l) => el('tr', { 'data-limit': l.destination },
            el('td', { class: 'mono', text: l.destination }), el('td', { class: 'mono', text: l.tenant ? tenantName(l.tenant) : 'every tenant' }),
            el('td', { text: l.max_in_flight == null ? '—' : fmtNum(l.max_in_flight) }),
            el('td', { text: l.per_second == null ? '—' : String(l.per_second) }), el('td', { class: 'mono', text: l.actor })))))
          : el('p', { class: 'muted', text: 'No destination is limited.' }));
      destinations.replaceChildren(el('h2', { text: 'Failing destinations' }),
        f.destinations.length ? el('table', { id: 'destinations' },
          el('thead', {}, el('tr', {}, ['Destination', 'Failed', 'Retrying', 'Held', 'Tenants', 'Top error', 'First seen', 'Last seen', '']
            .map((t, i) => el('th', { text: t, class: i >= 1 && i <= 4 ? 'num' : null })))),
          el('tbody', {}, f.destinations.map((d) => el('tr', { 'data-destination': d.key },
            el('td', { class: 'mono', text: d.key }), ...counts(d), el('td', { class: 'num', text: fmtNum(d.tenants) }),
            el('td', { class: 'mono', text: d.top_error || '—' }), ...seen(d),
            replayButtons({ ...d, paused: paused.has(d.key) })))))
          : el('p', { class: 'muted', text: 'Nothing is failing.' }));
      errors.replaceChildren(el('h2', { text: 'Top error codes' }),
        f.errors.length ? el('table', { id: 'errors' },
          el('thead', {}, el('tr', {}, ['Code', 'Failed', 'Retrying', 'Held', 'First seen', 'Last seen']
            .map((t, i) => el('th', { text: t, class: i >= 1 && i <= 3 ? 'num' : null })))),
          el('tbody', {}, f.errors.map((g) => el('tr', { 'data-error': g.key },
            el('td', { class: 'mono', text: g.key }), ...counts(g), ...seen(g)))))
          : el('p', { class: 'muted', text: 'No errors.' }));
      tenants.replaceChildren(el('h2', { text: 'By tenant and channel' }),
        el('table', { id: 'failing-by-tenant' },
          el('thead', {}, el('tr', {}, ['Tenant or channel', 'Failed', 'Retrying', 'Held', 'Top error']
            .map((t, i) => el('th', { text: t, class: i >= 1 && i <= 3 ? 'num' : null })))),
          el('tbody', {}, [...f.tenants.map((g) => ({ ...g, label: g.name || g.key })),
            ...f.channels.map((g) => ({ ...g, label: `channel ${g.key}` }))].map((g) => el('tr', {},
            el('td', { text: g.label }), ...counts(g), el('td', { class: 'mono', text: g.top_error || '—' }))))));
    }
    refresh(view, REFRESH_MS.incidents, load);
  }

  // ---- audit ---------------------------------------------------------------------------

  /** The audit log, newest 100: who did what to which tenant, how many, from where. */
  function audit(root, view) {
    const list = el('div', { class: 'scroll' });
    root.append(el('h1', { text: 'Audit log' }), el('div', { class: 'card' }, list));
    refresh(view, REFRESH_MS.audit, async () => {
      const q = await api('GET', `/ui/api/audit${query()}`);
      if (view !== app.view) return;
      list.replaceChildren(q.entries.length ? el('table', { id: 'audit' },
        el('thead', {}, el('tr', {}, ['At', 'Who', 'Action', 'Tenant', 'Target', 'Count', 'Address']
          .map((t, i) => el('th', { text: t, class: i === 5 ? 'num' : null })))),
        el('tbody', {}, q.entries.map((e) => el('tr', { 'data-action': e.action },
          el('td', {}, time(e.at)),
          el('td', { class: 'mono', text: e.key_id ? `${e.actor} ${e.key_id}` : e.actor }),
          el('td', { text: e.action }),
          el('td', { class: 'mono', text: e.tenant ? e.tenant.slice(-12) : '—' }),
          el('td', { class: 'mono', text: e.target || '—' }),
          el('td', { class: 'num', text: e.count === null ? '' : fmtNum(e.count) }),
          el('td', { class: 'mono', text: e.address || '—' })))))
        : el('p', { class: 'muted', text: 'Nothing in the audit log yet.' }));
    });
  }

  // ---- start --------------------------------------------------------------------------

  document.addEventListener('visibilitychange', () => { if (!document.hidden && app.me) render(); });

  (async () => {
    try {
      const me = await api('GET', '/ui/api/session');
      if (me && me.role) await signedIn(me);
      else signedOut(me && me.problem);
    } catch (e) {
      signedOut(e.message);
    }
  })();
})();
