// ichido dashboard: sign-in, navigation and the six views. Plain DOM, no framework; all text
// from i18n.js; every value from the API is put in the page with textContent (never as HTML),
// so keys such as "<msg-id@example.com>" are shown, not interpreted.
import { call, send, metricsText, token, setToken, nsPath, enc } from './api.js';
import { t, translate, setLang, lang, fmtTime, monthName } from './i18n.js';
import { Sparkline, parseMetrics, sumOf } from './chart.js';
import { leaseSeconds } from './lease.js';

const $ = (sel) => document.querySelector(sel);
const state = { me: null, ns: '', namespaces: [], timers: [], view: '' };

// --- small DOM helpers ----------------------------------------------------------------------

// h('td', {class: 'num'}, 'text', child…): an element; attributes starting with "on" are listeners.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function table(headers, rows, emptyText) {
  if (!rows.length) return h('p', { class: 'muted' }, emptyText || t('none'));
  return h('div', { class: 'table-wrap' },
    h('table', {},
      h('thead', {}, h('tr', {}, headers.map((x) =>
        h('th', { scope: 'col', class: x.num ? 'num' : null }, x.label || x)))),
      h('tbody', {}, rows)));
}

let toastTimer = null;
function toast(msg, isError) {
  const el = $('#toast');
  el.className = isError ? 'error' : '';
  el.textContent = msg;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.textContent = ''; }, isError ? 8000 : 3000);
}
function showError(e) { toast(t('error', { message: e.message || String(e) }), true); }

const isAdmin = () => state.me && state.me.role === 'admin';

// Asks for confirmation in a modal dialog (Esc or Cancel: no). `fields` are extra inputs
// ({name, label, required}); resolves with their values, or null when cancelled.
function confirmAction(title, text, okLabel, fields) {
  const dlg = $('#confirm');
  $('#confirm-title').textContent = title;
  $('#confirm-text').textContent = text;
  $('#confirm-ok').textContent = okLabel;
  const box = $('#confirm-fields');
  box.replaceChildren();
  const inputs = {};
  for (const f of fields || []) {
    const input = h('input', { name: f.name, required: f.required || null, maxlength: 1024 });
    inputs[f.name] = input;
    box.append(h('label', {}, f.label, input));
  }
  return new Promise((resolve) => {
    const cancel = $('#confirm-cancel');
    const form = $('#confirm-form');
    const finish = (ok) => {
      cancel.removeEventListener('click', onCancel);
      form.removeEventListener('submit', onSubmit);
      dlg.removeEventListener('cancel', onEsc);
      if (dlg.open) dlg.close();
      if (!ok) return resolve(null);
      const values = {};
      for (const [k, v] of Object.entries(inputs)) values[k] = v.value;
      resolve(values);
    };
    const onCancel = () => finish(false);
    const onEsc = (ev) => { ev.preventDefault(); finish(false); };
    const onSubmit = (ev) => { ev.preventDefault(); finish(true); };
    cancel.addEventListener('click', onCancel);
    form.addEventListener('submit', onSubmit);
    dlg.addEventListener('cancel', onEsc);
    dlg.showModal();
    (Object.values(inputs)[0] || cancel).focus();
  });
}

// Lease countdowns: every element with data-expires is refreshed once a second.
function leaseCell(iso) {
  return h('td', { 'data-expires': iso || '' }, leaseText(iso));
}
function leaseText(iso) {
  if (!iso) return '';
  const { live, s } = leaseSeconds(new Date(iso).getTime(), Date.now());
  return t(live ? 'lease.left' : 'lease.lapsed', { s });
}
setInterval(() => {
  for (const el of document.querySelectorAll('[data-expires]')) {
    if (el.dataset.expires) el.textContent = leaseText(el.dataset.expires);
  }
}, 1000);

function every(ms, fn) {
  fn();
  state.timers.push(setInterval(fn, ms));
}
function stopTimers() {
  for (const id of state.timers) clearInterval(id);
  state.timers = [];
}

// --- sign-in and chrome ---------------------------------------------------------------------

async function signIn(tok) {
  setToken(tok);
  try {
    state.me = await call('GET', '/v1/whoami');
  } catch (e) {
    setToken('');
    state.me = null;
    throw e;
  }
  await loadNamespaces();
}

async function loadNamespaces() {
  let items = [];
  let cap = 0;
  try {
    const answer = await call('GET', '/v1/namespaces');
    items = answer.items;
    cap = answer.count_cap;
  } catch (e) {
    showError(e);
  }
  state.namespaces = items.map((x) => x.ns);
  if (state.me.ns !== '*' && !state.namespaces.includes(state.me.ns)) {
    state.namespaces.unshift(state.me.ns);
  }
  const saved = sessionStorage.getItem('ichido.ns');
  if (!state.namespaces.includes(state.ns)) {
    state.ns = state.namespaces.includes(saved) ? saved : (state.namespaces[0] || '');
  }
  const sel = $('#ns-select');
  sel.replaceChildren(...state.namespaces.map((n) => h('option', { value: n }, n)));
  sel.value = state.ns;
  return { items, cap };
}

function renderChrome() {
  const signedIn = !!state.me;
  translate(document);
  $('#lang').textContent = t('lang');
  $('#signin').hidden = signedIn;
  $('#nav').hidden = !signedIn;
  $('#signout').hidden = !signedIn;
  $('#ns-label').hidden = !signedIn;
  $('#who').hidden = !signedIn;
  if (!signedIn) {
    $('#content').replaceChildren();
    $('#token-input').focus();
    return;
  }
  $('#who').textContent = t('who', { role: t('role.' + state.me.role), ns: state.me.ns });
  for (const a of document.querySelectorAll('#nav a')) {
    a.hidden = a.hasAttribute('data-admin') && !isAdmin();
    if (a.dataset.view === state.view) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

const views = {};

async function show() {
  stopTimers();
  const [, name, ...rest] = (location.hash || '#/overview').split('/');
  state.view = views[name] ? name : 'overview';
  if ((state.view === 'tokens' || state.view === 'audit') && !isAdmin()) state.view = 'overview';
  renderChrome();
  if (!state.me) return;
  const content = $('#content');
  content.replaceChildren(h('p', { class: 'muted' }, t('loading')));
  try {
    await views[state.view](content, rest.map(decodeURIComponent));
  } catch (e) {
    content.replaceChildren(h('p', { class: 'error', role: 'alert' },
      t('error', { message: e.message })));
  }
}

function needNs(content) {
  if (state.ns) return false;
  content.replaceChildren(h('p', { class: 'muted' }, state.namespaces.length ? t('choose_ns') : t('no_ns')));
  return true;
}

// --- overview -------------------------------------------------------------------------------

views.overview = async (content) => {
  const charts = h('div', { class: 'charts' });
  const note = h('p', { class: 'muted' });
  const alarm = h('p', { class: 'error', role: 'alert', hidden: true }, t('ov.store_failed'));
  const nsBox = h('div', {});
  content.replaceChildren(h('h1', {}, t('ov.title')), alarm,
    h('h2', {}, t('ov.live')), charts, note, h('h2', {}, t('ov.namespaces')), nsBox);
  const rate = new Sparkline(charts, t('ov.rate'));
  const batch = new Sparkline(charts, t('ov.batch'));
  const fsync = new Sparkline(charts, t('ov.fsync'), (v) => (v === null ? '–' : v.toFixed(2)));
  const waiters = new Sparkline(charts, t('ov.waiters'), (v) => String(v));
  let prev = null;
  every(2000, async () => {
    try {
      const m = parseMetrics(await metricsText());
      const now = performance.now();
      const cur = {
        at: now,
        responses: sumOf(m, 'ichido_http_responses_total'),
        commits: sumOf(m, 'ichido_store_commits_total'),
        commands: sumOf(m, 'ichido_store_committed_commands_total'),
        commitSeconds: sumOf(m, 'ichido_store_commit_seconds_total'),
      };
      alarm.hidden = !sumOf(m, 'ichido_store_write_failed');
      waiters.push(sumOf(m, 'ichido_lock_waiters') + sumOf(m, 'ichido_once_waiters'));
      if (prev) {
        const dt = (cur.at - prev.at) / 1000;
        const commits = cur.commits - prev.commits;
        rate.push(Math.max(0, (cur.responses - prev.responses) / dt));
        batch.push(commits > 0 ? (cur.commands - prev.commands) / commits : null);
        fsync.push(commits > 0 ? ((cur.commitSeconds - prev.commitSeconds) / commits) * 1000 : null);
      }
      prev = cur;
      note.textContent = '';
    } catch (e) {
      note.textContent = t('ov.metrics_off', { message: e.message });
    }
  });
  const { items, cap } = await loadNamespaces();
  const cols = ['col.ns', 'col.counters', 'col.locks', 'col.processing', 'col.expired',
    'col.pending', 'col.dead', 'col.completed'].map((k, i) => ({ label: t(k), num: i > 0 }));
  cols.push({ label: t('col.oldest_expired') });
  const num = (v, cls) => h('td', { class: 'num' }, v > 0 && cls ? h('span', { class: 'badge ' + cls }, v) : v);
  nsBox.replaceChildren(table(cols, items.map((x) => h('tr', {},
    h('td', {}, h('a', { href: '#/once/expired', onclick: () => selectNs(x.ns) }, x.ns)),
    num(x.counters), num(x.locks_held), num(x.once.processing),
    num(x.once.expired, 'expired'), num(x.once.pending, 'pending'), num(x.once.dead, 'dead'),
    h('td', { class: 'num' }, x.once.capped && x.once.completed >= cap ? '≥ ' + x.once.completed : x.once.completed),
    h('td', {}, x.oldest_expired_at ? fmtTime(x.oldest_expired_at) : ''))), t('no_ns')));
};

function selectNs(ns) {
  state.ns = ns;
  sessionStorage.setItem('ichido.ns', ns);
  $('#ns-select').value = ns;
}

// --- counters -------------------------------------------------------------------------------

// A counter's period kind in the user's language ("fiscal year (from April)", "年度 (4月始まり)").
function periodText(c) {
  if (c.period === 'fiscal_year') {
    return t('period.fiscal_year_from', { month: monthName(c.fiscal_year_start) });
  }
  return t('period.' + c.period);
}

views.counters = async (content, [name]) => {
  if (needNs(content)) return;
  const list = await call('GET', nsPath(state.ns) + '/counters');
  const detail = h('div', {});
  const rows = list.items.map((c) => h('tr', { class: c.name === name ? 'selected' : null, 'data-counter': c.name },
    h('td', {}, h('a', { href: '#/counters/' + enc(c.name) }, c.name)),
    h('td', { class: 'num' }, c.last_value), h('td', {}, c.format),
    h('td', { 'data-period': c.period }, periodText(c)), h('td', {}, c.current_period),
    h('td', {}, c.timezone),
    h('td', { class: 'num' }, c.issued_count), h('td', { class: 'num' }, c.voided_count),
    h('td', { class: 'num' }, c.max)));
  content.replaceChildren(h('h1', {}, t('c.title')),
    table([t('c.name'), { label: t('c.last'), num: true }, t('c.format'), t('c.period'),
      t('c.current_period'), t('c.timezone'), { label: t('c.issued'), num: true },
      { label: t('c.voided'), num: true }, { label: t('c.max'), num: true }], rows), detail);
  if (isAdmin()) content.append(createCounterForm());
  const counter = list.items.find((c) => c.name === name);
  if (counter) await counterDetail(detail, counter);
};

// (admin) PUT a new counter: period kinds in the user's language, the fiscal year's first month
// when the period is fiscal_year, and the time zone an empty field means (the server's default).
function createCounterForm() {
  const name = h('input', { name: 'counter_name', required: true, size: 14, maxlength: 128,
    pattern: '[A-Za-z0-9._\\-]+' });
  const format = h('input', { name: 'format', size: 18, maxlength: 256, placeholder: 'R-{seq:4}' });
  const period = h('select', { name: 'period' }, ['none', 'year', 'month', 'day', 'fiscal_year'].map((p) =>
    h('option', { value: p }, t('period.' + p))));
  const months = [];
  for (let m = 1; m <= 12; m++) months.push(h('option', { value: m, selected: m === 4 }, monthName(m)));
  const fyStart = h('select', { name: 'fiscal_year_start' }, months);
  const fyLabel = h('label', { hidden: true }, t('c.fy_start'), fyStart);
  period.addEventListener('change', () => { fyLabel.hidden = period.value !== 'fiscal_year'; });
  const zone = h('input', { name: 'timezone', size: 16, maxlength: 64 });
  const zoneLabel = h('label', {}, t('c.timezone'), zone);
  const start = h('input', { name: 'start', type: 'number', min: 0, value: 0, size: 8 });
  const max = h('input', { name: 'max', type: 'number', min: 1, size: 8 });
  const requireKey = h('input', { name: 'require_key', type: 'checkbox' });
  call('GET', nsPath(state.ns) + '/settings').then((s) => {
    zone.placeholder = s.default_timezone;
    zone.title = t('c.tz_default', { zone: s.default_timezone });
    zoneLabel.append(h('span', { class: 'hint' }, t('c.tz_default', { zone: s.default_timezone })));
  }, () => {});
  const form = h('form', { class: 'inline', id: 'create-counter', onsubmit: async (ev) => {
    ev.preventDefault();
    const body = { start: Number(start.value || 0), period: period.value, require_key: requireKey.checked };
    if (format.value) body.format = format.value;
    if (max.value) body.max = Number(max.value);
    if (zone.value) body.timezone = zone.value;
    if (period.value === 'fiscal_year') body.fiscal_year_start = Number(fyStart.value);
    try {
      const { status, body: made } = await send('PUT', nsPath(state.ns) + '/counters/' + enc(name.value), body);
      toast(t(status === 201 ? 'c.created' : 'c.exists_same', { name: made.name }));
      location.hash = '#/counters/' + enc(made.name);
      show();
    } catch (e) { showError(e); }
  } },
  h('label', {}, t('c.name'), name), h('label', {}, t('c.format'), format),
  h('label', {}, t('c.period'), period), fyLabel, zoneLabel,
  h('label', {}, t('c.start'), start), h('label', {}, t('c.max'), max),
  h('label', { class: 'check' }, requireKey, t('c.require_key')),
  h('button', { type: 'submit' }, t('c.create_btn')));
  return h('section', { class: 'card' }, h('h2', {}, t('c.create')),
    h('p', { class: 'muted' }, t('c.create_help')), form);
}

async function counterDetail(box, c) {
  const base = nsPath(state.ns) + '/counters/' + enc(c.name);
  const keyInput = h('input', { name: 'key', 'aria-label': t('c.search_key') });
  const periodInput = h('input', { name: 'period', value: c.current_period, size: 10,
    'aria-label': t('c.period_label') });
  const trail = h('div', {});
  const pager = h('div', { class: 'pager' });
  let after = 0;
  const load = async (reset) => {
    if (reset) after = 0;
    const key = keyInput.value;
    const q = key ? '?key=' + enc(key)
      : '?limit=50&after=' + after + (c.period !== 'none' ? '&period=' + enc(periodInput.value) : '');
    const page = await call('GET', base + '/issued' + q);
    const rows = page.items.map((r) => h('tr', {},
      h('td', { class: 'num' }, r.value), h('td', {}, r.formatted), h('td', {}, r.period),
      h('td', { class: 'key' }, r.key ?? ''), h('td', {}, r.note),
      h('td', {}, fmtTime(r.issued_at)),
      h('td', { class: 'actions' }, r.voided_at
        ? h('span', { class: 'badge dead' }, t('c.voided_at', { at: fmtTime(r.voided_at), reason: r.void_reason }))
        : (isAdmin() ? h('button', { type: 'button', class: 'small danger', 'data-action': 'void',
          onclick: () => voidNumber(c, r, () => load(false)) }, t('c.void')) : ''))));
    trail.replaceChildren(table([{ label: t('c.value'), num: true }, t('c.formatted'), t('c.period'),
      t('c.key'), t('c.note'), t('c.issued_at'), ''], rows));
    pager.replaceChildren();
    if (page.next_after !== undefined && !key) {
      pager.append(h('button', { type: 'button', class: 'quiet', onclick: () => {
        after = page.next_after; load(false).catch(showError);
      } }, t('more')));
    }
  };
  const search = h('form', { class: 'inline', onsubmit: (ev) => { ev.preventDefault(); load(true).catch(showError); } },
    h('label', {}, t('c.search_key'), keyInput),
    c.period !== 'none' ? h('label', {}, t('c.period_label'), periodInput) : null,
    h('button', { type: 'submit' }, t('search')),
    h('button', { type: 'button', class: 'quiet', onclick: () => { keyInput.value = ''; load(true).catch(showError); } }, t('clear')));
  box.replaceChildren(h('h2', {}, t('c.trail', { name: c.name })), search, trail, pager);
  if (isAdmin()) box.append(casForm(c));
  await load(true);
}

async function voidNumber(c, r, reload) {
  const v = await confirmAction(t('c.void_title', { formatted: r.formatted }), t('c.void_text'),
    t('c.void'), [{ name: 'reason', label: t('c.reason'), required: true }]);
  if (!v) return;
  try {
    await call('POST', nsPath(state.ns) + '/counters/' + enc(c.name) + '/void',
      { value: r.value, period: r.period, reason: v.reason });
    toast(t('done'));
    await reload();
  } catch (e) { showError(e); }
}

function casForm(c) {
  const expected = h('input', { name: 'expected_last_value', type: 'number', min: 0, value: c.last_value });
  const next = h('input', { name: 'last_value', type: 'number', min: 0, value: c.last_value });
  return h('section', { class: 'card' }, h('h2', {}, t('c.set_title')),
    h('form', { class: 'inline', onsubmit: async (ev) => {
      ev.preventDefault();
      const from = Number(expected.value);
      const to = Number(next.value);
      const ok = await confirmAction(t('c.set_confirm', { name: c.name, from, to }),
        t('c.set_text', { next: to + 1 }), t('c.set'));
      if (!ok) return;
      try {
        await call('POST', nsPath(state.ns) + '/counters/' + enc(c.name) + '/set',
          { expected_last_value: from, last_value: to });
        toast(t('done'));
        show();
      } catch (e) { showError(e); }
    } },
    h('label', {}, t('c.expected'), expected), h('label', {}, t('c.new_last'), next),
    h('button', { type: 'submit', class: 'danger' }, t('c.set'))));
}

// --- once records ---------------------------------------------------------------------------

const STATES = ['expired', 'dead', 'pending', 'processing', 'completed'];

views.once = async (content, [stateName]) => {
  if (needNs(content)) return;
  const st = STATES.includes(stateName) ? stateName : 'expired';
  const tabs = h('div', { class: 'tabs', role: 'group', 'aria-label': t('o.state') },
    STATES.map((s) => h('button', { type: 'button', 'aria-pressed': String(s === st),
      onclick: () => { location.hash = '#/once/' + s; } }, t('state.' + s))));
  const keyInput = h('input', { name: 'key', 'aria-label': t('o.find') });
  const list = h('div', {});
  const pager = h('div', { class: 'pager' });
  const help = t('state.help.' + st);
  content.replaceChildren(h('h1', {}, t('o.title')), tabs,
    h('p', { class: 'muted', hidden: help === 'state.help.' + st }, help),
    h('form', { class: 'inline', onsubmit: async (ev) => {
      ev.preventDefault();
      if (!keyInput.value) return;
      try {
        const rec = await call('GET', nsPath(state.ns) + '/once?key=' + enc(keyInput.value));
        list.replaceChildren(onceTable([rec], st));
        pager.replaceChildren();
      } catch (e) {
        if (e.code === 'once_not_found') list.replaceChildren(h('p', { class: 'muted' }, t('o.not_found')));
        else showError(e);
      }
    } }, h('label', {}, t('o.find'), keyInput), h('button', { type: 'submit' }, t('search'))),
    list, pager, retentionBox());
  const load = async (after) => {
    const page = await call('GET', nsPath(state.ns) + '/once?state=' + st + '&limit=50' +
      (after ? '&after=' + enc(after) : ''));
    list.replaceChildren(onceTable(page.items, st));
    pager.replaceChildren();
    if (page.next_after !== undefined) {
      pager.append(h('button', { type: 'button', class: 'quiet',
        onclick: () => load(page.next_after).catch(showError) }, t('more')));
    }
  };
  await load('');
};

// How long finished records of this namespace are kept, and (admin) a way to change it.
function retentionBox() {
  const box = h('p', { class: 'muted', id: 'retention' });
  call('GET', nsPath(state.ns) + '/settings').then((s) => {
    const days = (ms) => Math.round((ms / 86400000) * 100) / 100;
    box.replaceChildren(t(s.once_retention_ms === null ? 'o.retention_default' : 'o.retention_own',
      { days: days(s.effective_once_retention_ms) }), ' ',
    isAdmin() ? h('button', { type: 'button', class: 'small quiet', 'data-action': 'retention',
      onclick: async () => {
        const v = await confirmAction(t('o.retention_title', { ns: state.ns }), t('o.retention_text'),
          t('o.retention_set'), [{ name: 'days', label: t('o.retention_days'), required: false }]);
        if (!v) return;
        const body = { once_retention_ms: v.days === '' ? null : Math.round(Number(v.days) * 86400000) };
        try {
          await call('PUT', nsPath(state.ns) + '/settings', body);
          toast(t('done'));
          show();
        } catch (e) { showError(e); }
      } }, t('o.retention_change')) : '');
  }, () => {});
  return box;
}

function onceTable(items, st) {
  const rows = [];
  for (const r of items) {
    const lapsed = r.state === 'processing' && r.lease_expires_at && new Date(r.lease_expires_at) <= new Date();
    const shown = lapsed ? 'expired' : r.state;
    const result = h('tr', { hidden: true }, h('td', { colspan: 8 },
      h('div', { class: 'muted' }, t('o.result')),
      h('pre', { class: 'result' }, r.result === null ? 'null' : JSON.stringify(r.result, null, 2))));
    rows.push(h('tr', { 'data-key': r.key },
      h('td', { class: 'key' }, r.key),
      h('td', {}, h('span', { class: 'badge ' + shown }, t('state.' + shown))),
      h('td', { class: 'num' }, r.attempt + ' / ' + r.max_attempts),
      h('td', {}, r.owner),
      r.state === 'processing' ? leaseCell(r.lease_expires_at) : h('td', {}),
      h('td', {}, r.last_error ?? ''),
      h('td', {}, fmtTime(r.updated_at)),
      h('td', { class: 'actions' },
        r.result !== null ? h('button', { type: 'button', class: 'small quiet', 'aria-expanded': 'false',
          onclick: (ev) => {
            result.hidden = !result.hidden;
            ev.currentTarget.setAttribute('aria-expanded', String(!result.hidden));
          } }, t('o.show')) : null,
        isAdmin() ? h('button', { type: 'button', class: 'small danger', 'data-action': 'reset',
          onclick: () => resetOnce(r) }, t('o.reset')) : null)));
    rows.push(result);
  }
  return table([t('o.key'), t('o.state'), { label: t('o.attempt'), num: true }, t('o.owner'),
    t('o.lease'), t('o.error'), t('o.updated'), ''], rows, st ? t('none') : undefined);
}

async function resetOnce(r) {
  // A completed item's work (a mail, an invoice) runs again after a reset: say so.
  const ok = await confirmAction(t('o.reset_title', { key: r.key }),
    t(r.state === 'completed' ? 'o.reset_text_completed' : 'o.reset_text'), t('o.reset'));
  if (!ok) return;
  try {
    await call('POST', nsPath(state.ns) + '/once/reset', { key: r.key });
    toast(t('done'));
    show();
  } catch (e) { showError(e); }
}

// --- locks ----------------------------------------------------------------------------------

views.locks = async (content) => {
  if (needNs(content)) return;
  const box = h('div', {});
  content.replaceChildren(h('h1', {}, t('l.title')), box);
  const load = async () => {
    const list = await call('GET', nsPath(state.ns) + '/locks');
    const rows = list.items.map((l) => h('tr', { 'data-lock': l.name },
      h('td', {}, l.name), h('td', {}, l.owner), h('td', { class: 'num' }, l.token),
      leaseCell(l.lease_expires_at), h('td', { class: 'num' }, l.waiters ?? ''),
      h('td', { class: 'actions' }, isAdmin() ? h('button', { type: 'button', class: 'small danger',
        'data-action': 'force-release', onclick: () => forceRelease(l) }, t('l.force')) : null)));
    box.replaceChildren(table([t('l.name'), t('l.holder'), { label: t('l.token'), num: true },
      t('l.lease'), { label: t('l.waiters'), num: true }, ''], rows, t('l.none')));
  };
  every(5000, () => load().catch(showError));
};

async function forceRelease(l) {
  const ok = await confirmAction(t('l.force_title', { name: l.name }),
    t('l.force_text', { owner: l.owner, token: l.token }), t('l.force'));
  if (!ok) return;
  try {
    await call('POST', nsPath(state.ns) + '/locks/' + enc(l.name) + '/force-release', {});
    toast(t('done'));
    show();
  } catch (e) { showError(e); }
}

// --- tokens (admin) -------------------------------------------------------------------------

views.tokens = async (content) => {
  const secretBox = h('div', {});
  const role = h('select', { name: 'role' }, ['reader', 'writer', 'admin'].map((r) =>
    h('option', { value: r }, t('role.' + r) + (lang() === 'ja' ? ' (' + r + ')' : ''))));
  const ns = h('input', { name: 'ns', required: true, value: state.ns || '', size: 12 });
  const label = h('input', { name: 'label', size: 16, maxlength: 200 });
  const days = h('input', { name: 'days', type: 'number', min: 1, size: 5 });
  const listBox = h('div', {});
  const form = h('form', { class: 'inline', onsubmit: async (ev) => {
    ev.preventDefault();
    const body = { role: role.value, ns: ns.value, label: label.value };
    if (days.value) body.expires_in_ms = Number(days.value) * 86400000;
    try {
      const made = await call('POST', '/v1/admin/tokens', body);
      const code = h('code', { id: 'new-secret' }, made.token);
      secretBox.replaceChildren(h('div', { class: 'secret', role: 'status' },
        h('span', {}, t('t.secret')), code,
        h('button', { type: 'button', class: 'small', onclick: async () => {
          try { await navigator.clipboard.writeText(made.token); toast(t('t.copied')); } catch (e) { showError(e); }
        } }, t('t.copy'))));
      label.value = '';
      await load();
    } catch (e) { showError(e); }
  } }, h('label', {}, t('t.role'), role), h('label', {}, t('t.ns'), ns),
    h('label', {}, t('t.label'), label), h('label', {}, t('t.expires_days'), days),
    h('button', { type: 'submit' }, t('t.create_btn')));
  content.replaceChildren(h('h1', {}, t('t.title')),
    h('section', { class: 'card' }, h('h2', {}, t('t.create')), form, secretBox), listBox);
  const load = async () => {
    const list = await call('GET', '/v1/admin/tokens');
    const rows = list.items.map((x) => h('tr', { 'data-token': x.id },
      h('td', { class: 'key' }, x.id), h('td', {}, t('role.' + x.role)), h('td', {}, x.ns),
      h('td', {}, x.label), h('td', {}, fmtTime(x.created_at)),
      h('td', {}, x.expires_at ? fmtTime(x.expires_at) : t('never')),
      h('td', {}, fmtTime(x.revoked_at)),
      h('td', { class: 'actions' }, x.revoked_at || x.id === state.me.id ? null
        : h('button', { type: 'button', class: 'small danger', 'data-action': 'revoke',
          onclick: () => revoke(x, load) }, t('t.revoke')))));
    listBox.replaceChildren(table([t('t.id'), t('t.role'), t('col.ns'), t('t.label'),
      t('t.created'), t('t.expires'), t('t.revoked'), ''], rows));
  };
  await load();
};

async function revoke(x, reload) {
  const ok = await confirmAction(t('t.revoke_title', { id: x.id }), t('t.revoke_text'), t('t.revoke'));
  if (!ok) return;
  try {
    await call('DELETE', '/v1/admin/tokens/' + enc(x.id));
    toast(t('done'));
    await reload();
  } catch (e) { showError(e); }
}

// --- audit log (admin) ----------------------------------------------------------------------

views.audit = async (content) => {
  const actor = h('input', { name: 'actor', size: 18 });
  const action = h('input', { name: 'action', size: 18 });
  const box = h('div', {});
  const pager = h('div', { class: 'pager' });
  const load = async (before) => {
    let q = '?order=newest&limit=50';
    if (actor.value) q += '&actor=' + enc(actor.value);
    if (action.value) q += '&action=' + enc(action.value);
    if (before) q += '&before=' + before;
    const page = await call('GET', '/v1/admin/audit' + q);
    const rows = page.items.map((e) => h('tr', {},
      h('td', { class: 'num' }, e.id), h('td', {}, fmtTime(e.at)),
      h('td', { class: 'key' }, h('a', { href: '#/audit', onclick: (ev) => {
        ev.preventDefault(); actor.value = e.actor; load(0).catch(showError);
      } }, e.actor)),
      h('td', {}, e.action), h('td', {}, e.ns), h('td', { class: 'num' }, e.status),
      h('td', {}, e.remote), h('td', { class: 'key' }, e.detail)));
    box.replaceChildren(table([{ label: t('a.id'), num: true }, t('a.at'), t('a.actor'),
      t('a.action'), t('col.ns'), { label: t('a.status'), num: true }, t('a.remote'),
      t('a.detail')], rows));
    pager.replaceChildren();
    if (before) pager.append(h('button', { type: 'button', class: 'quiet', onclick: () => load(0).catch(showError) }, t('newer')));
    if (page.next_before !== undefined) {
      pager.append(h('button', { type: 'button', class: 'quiet',
        onclick: () => load(page.next_before).catch(showError) }, t('older')));
    }
  };
  content.replaceChildren(h('h1', {}, t('a.title')),
    h('form', { class: 'inline', onsubmit: (ev) => { ev.preventDefault(); load(0).catch(showError); } },
      h('label', {}, t('a.actor'), actor), h('label', {}, t('a.action'), action),
      h('button', { type: 'submit' }, t('a.filter'))), box, pager);
  await load(0);
};

// --- start ----------------------------------------------------------------------------------

function start() {
  $('#signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const input = $('#token-input');
    $('#signin-error').textContent = '';
    try {
      await signIn(input.value.trim());
      input.value = '';
      if (!location.hash) location.hash = '#/overview';
      show();
    } catch (e) {
      $('#signin-error').textContent = t('signin.bad', { code: e.code || e.message });
    }
  });
  $('#signout').addEventListener('click', () => {
    setToken('');
    state.me = null;
    stopTimers();
    show();
  });
  $('#lang').addEventListener('click', () => {
    setLang(lang() === 'ja' ? 'en' : 'ja');
    show();
  });
  $('#ns-select').addEventListener('change', (ev) => {
    selectNs(ev.target.value);
    show();
  });
  window.addEventListener('hashchange', show);
  if (token()) {
    signIn(token()).then(show, () => show());
  } else {
    show();
  }
}

start();
