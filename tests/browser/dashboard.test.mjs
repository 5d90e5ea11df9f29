// The dashboard in a real browser: Debian's chromium, headless, driven by playwright-core,
// against a live `ichido serve` on port 0 with a fresh data directory.
//
// What it proves: an admin signs in with a pasted token, finds a dead once record and resets it,
// force-releases a lock, voids an issued number (each confirmed in a dialog, each checked through
// the API and found in the audit log); the UI switches to Japanese, where an admin creates a
// fiscal-year counter, is told what a force-release and the reset of a completed record mean,
// and reads in Japanese that the server did not answer; a reader token is offered no admin
// action; a phone-sized screen fits in English and in Japanese. Any console error, page error or Content-Security-Policy violation fails the
// test. Screenshots go to $ICHIDO_TEST_OUTPUT. The browser and the server are stopped whatever
// happens (after() hooks and a process exit handler).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';  // resolved from the copy's node_modules (run)

const BINARY = process.env.ICHIDO_BINARY;
const OUT = process.env.ICHIDO_TEST_OUTPUT || tmpdir();
const CHROMIUM = process.env.ICHIDO_CHROMIUM || '/usr/bin/chromium';

let server = null;
let base = '';
let adminToken = '';
let readerToken = '';
let browser = null;
let dataDir = '';
const problems = [];  // console errors, page errors, CSP violations: any of them fails the test

function stopAll() {
  if (server && server.exitCode === null) server.kill('SIGKILL');
}
process.on('exit', stopAll);

function startServer() {
  return new Promise((resolve, reject) => {
    dataDir = mkdtempSync(join(tmpdir(), 'ichido-browser-'));
    server = spawn(BINARY, ['serve', '--listen', '127.0.0.1:0', '--data', join(dataDir, 'data'),
      '--default-timezone', 'Asia/Tokyo'],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => reject(new Error('the server did not start:\n' + log)), 20000);
    server.stderr.on('data', (d) => { log += d; });
    server.stdout.on('data', (d) => {
      log += d;
      const m = /listening on [^\s]+:(\d+)/.exec(log);
      if (m && !base) {
        clearTimeout(timer);
        base = 'http://127.0.0.1:' + m[1];
        resolve();
      }
    });
    server.on('exit', (code) => {
      writeFileSync(join(OUT, 'server.log'), log);
      if (!base) reject(new Error('the server exited with ' + code + ':\n' + log));
    });
  });
}

async function api(method, path, body, tok = adminToken) {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: 'Bearer ' + tok, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

async function ok(method, path, body) {
  const r = await api(method, path, body);
  assert.ok(r.status >= 200 && r.status < 300, method + ' ' + path + ': ' + JSON.stringify(r.json));
  return r.json;
}

// A page in a fresh context. lang 'ja': the dashboard starts in Japanese (as it does for a
// browser set to Japanese). While page.expectNetErrors is set, the browser's own report of a
// request that could not be sent (net::ERR_…) is expected, not a problem.
async function newPage(viewport, lang) {
  const context = await browser.newContext({ viewport: viewport || { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(10000);
  page.expectNetErrors = false;
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (page.expectNetErrors && /net::ERR_/.test(m.text())) return;
    problems.push('console error: ' + m.text());
  });
  if (lang) await page.addInitScript((l) => localStorage.setItem('ichido.lang', l), lang);
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  // CSP violations also reach the console in Chromium; this catches them even when they do not.
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI);
    });
  });
  return page;
}

async function signIn(page, tok) {
  await page.goto(base + '/');
  await page.fill('#token-input', tok);
  await page.press('#token-input', 'Enter');  // keyboard only
  await page.waitForSelector('#nav:not([hidden])');
}

async function shot(page, name) {
  await page.screenshot({ path: join(OUT, name + '.png'), fullPage: true });
}

// Confirms the open dialog (optionally typing a reason) with the keyboard.
async function confirmDialog(page, reason) {
  await page.waitForSelector('dialog#confirm[open]');
  if (reason !== undefined) await page.fill('#confirm-fields input', reason);
  await page.click('#confirm-ok');
  await page.waitForSelector('dialog#confirm', { state: 'hidden' });
}

before(async () => {
  assert.ok(BINARY, 'ICHIDO_BINARY is not set (run tests/browser/run)');
  await startServer();
  adminToken = readFileSync(join(dataDir, 'data', 'admin.token'), 'utf8').trim();
  // Data to act on: a counter with three numbers, a dead once record, a held lock.
  await ok('PUT', '/v1/ns/shop/counters/receipts', { start: 0, max: 9999, format: 'R-{seq:4}' });
  for (const k of ['a', 'b', 'c']) await ok('POST', '/v1/ns/shop/counters/receipts/next', { key: 'form-' + k });
  const key = '<CAF=x/y+z@mail.example.co.jp>';
  const begun = await ok('POST', '/v1/ns/shop/once/begin', { key, owner: 'outlook-A', lease_ms: 60000 });
  await ok('POST', '/v1/ns/shop/once/fail', { key, token: begun.token, error: 'SMTP 550 mailbox unavailable', retry: false });
  await ok('POST', '/v1/ns/shop/once/begin', { key: 'still-running', owner: 'gas-1', lease_ms: 600000 });
  const mail = await ok('POST', '/v1/ns/shop/once/begin', { key: 'invoice-mail-42', owner: 'gas-2', lease_ms: 60000 });
  await ok('POST', '/v1/ns/shop/once/complete', { key: 'invoice-mail-42', token: mail.token, result: { sent: true } });
  await ok('POST', '/v1/ns/shop/locks/nightly-export/acquire', { owner: 'cron@host-1', lease_ms: 600000 });
  await ok('POST', '/v1/ns/shop/locks/month-end/acquire', { owner: 'excel@pc-7', lease_ms: 600000 });
  readerToken = (await ok('POST', '/v1/admin/tokens', { role: 'reader', ns: 'shop', label: 'viewer' })).token;

  // launch() gives the browser a fresh, empty profile directory of its own (playwright refuses
  // --user-data-dir here and removes that directory on close).
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  try { if (browser) await browser.close(); } finally {
    if (server && server.exitCode === null) {
      const exited = new Promise((r) => server.on('exit', r));
      server.kill('SIGTERM');
      await exited;
    }
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  }
});

test('static files: strict CSP, no inline script, caching by ETag, no token needed', async () => {
  const res = await fetch(base + '/');
  assert.equal(res.status, 200);
  const csp = res.headers.get('content-security-policy');
  assert.match(csp, /default-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
  const html = await res.text();
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'an inline <script>');
  assert.doesNotMatch(html, /\sstyle=|\son[a-z]+=/i, 'an inline style or event handler');
  const js = await fetch(base + '/app.js');
  assert.equal(js.headers.get('content-type'), 'text/javascript; charset=utf-8');
  const etag = js.headers.get('etag');
  assert.ok(etag);
  const again = await fetch(base + '/app.js', { headers: { 'If-None-Match': etag } });
  assert.equal(again.status, 304);
});

test('admin: sign in, reset a dead record, force-release a lock, void a number', async () => {
  const page = await newPage();
  await signIn(page, adminToken);
  await page.waitForSelector('.charts .chart');
  await page.waitForSelector('td >> text=shop');
  // Let the live charts draw a few points (the page polls /metrics every 2 s).
  await page.waitForFunction(() => document.querySelector('.chart polyline').getAttribute('points')?.includes(','),
    null, { timeout: 10000 });
  await shot(page, '01-overview');

  // Once records, dead tab: the record, its error, and Reset.
  await page.click('nav a[data-view="once"]');
  await page.click('.tabs button:nth-child(2)');  // dead
  const row = page.locator('tr[data-key="<CAF=x/y+z@mail.example.co.jp>"]');
  await row.waitFor();
  assert.match(await row.textContent(), /SMTP 550 mailbox unavailable/);
  await shot(page, '02-once-dead');
  // Retention of the namespace: 30 days by default; set 90 through the dialog.
  await page.waitForSelector('#retention >> text=30 days (the server default)');
  await page.click('button[data-action="retention"]');
  await confirmDialog(page, '90');
  await page.waitForSelector('#retention >> text=90 days');
  assert.equal((await ok('GET', '/v1/ns/shop/settings')).once_retention_ms, 90 * 86400000);
  await row.locator('button[data-action="reset"]').click();
  await page.waitForSelector('dialog#confirm[open]');
  // A dead record's reset is a retry; only a completed one's warns that the work runs again.
  assert.match(await page.locator('#confirm-text').textContent(), /processes the item again/);
  assert.doesNotMatch(await page.locator('#confirm-text').textContent(), /runs the work again/);
  await confirmDialog(page);
  await page.waitForSelector('tr[data-key="<CAF=x/y+z@mail.example.co.jp>"]', { state: 'detached' });
  const gone = await api('GET', '/v1/ns/shop/once?key=' + encodeURIComponent('<CAF=x/y+z@mail.example.co.jp>'));
  assert.equal(gone.status, 404);

  // Locks: holder, token, countdown, and Force release.
  await page.click('nav a[data-view="locks"]');
  const lock = page.locator('tr[data-lock="nightly-export"]');
  await lock.waitFor();
  assert.match(await lock.textContent(), /cron@host-1/);
  assert.match(await lock.textContent(), /s left/);
  await shot(page, '03-locks');
  await lock.locator('button[data-action="force-release"]').click();
  await page.waitForSelector('dialog#confirm[open]');
  assert.match(await page.locator('#confirm-text').textContent(),
    /Writes the old holder makes late are refused where the fencing token is checked\./);
  await confirmDialog(page);
  await page.waitForSelector('tr[data-lock="nightly-export"]', { state: 'detached' });
  assert.equal((await ok('GET', '/v1/ns/shop/locks/nightly-export')).held, false);

  // Counters: the audit trail, search by key, and Void with a reason.
  await page.click('nav a[data-view="counters"]');
  await page.click('a[href="#/counters/receipts"]');
  await page.fill('input[name="key"]', 'form-b');
  await page.press('input[name="key"]', 'Enter');
  // The unfiltered trail shows R-0001..3: wait for the search's answer, R-0002 alone.
  await page.waitForFunction(() => document.querySelectorAll('button[data-action="void"]').length === 1);
  await page.waitForSelector('td >> text=R-0002');
  await page.click('button[data-action="void"]');
  await confirmDialog(page, 'customer cancelled');
  await page.waitForSelector('text=customer cancelled');
  await shot(page, '04-counter-voided');
  const trail = await ok('GET', '/v1/ns/shop/counters/receipts/issued?key=form-b');
  assert.equal(trail.items[0].void_reason, 'customer cancelled');

  // The audit log shows the three actions, filterable by action.
  await page.click('nav a[data-view="audit"]');
  await page.fill('input[name="action"]', 'force-release');
  await page.press('input[name="action"]', 'Enter');
  // The unfiltered page (newest first) already shows that row: wait for the filtered answer,
  // in which it is the only one.
  await page.waitForFunction(() => document.querySelectorAll('#content tbody tr').length === 1);
  assert.match(await page.locator('#content tbody tr').textContent(),
    /POST \/v1\/ns\/\{ns\}\/locks\/\{name\}\/force-release/);
  await shot(page, '05-audit');
  const audit = await ok('GET', '/v1/admin/audit?order=newest&limit=50');
  const actions = audit.items.map((e) => e.action);
  for (const a of ['PUT /v1/ns/{ns}/settings', 'POST /v1/ns/{ns}/once/reset', 'POST /v1/ns/{ns}/locks/{name}/force-release',
    'POST /v1/ns/{ns}/counters/{name}/void']) {
    assert.ok(actions.includes(a), 'audit log lacks ' + a);
  }

  // Tokens: create one; the secret is shown once and works.
  await page.click('nav a[data-view="tokens"]');
  await page.selectOption('select[name="role"]', 'writer');
  await page.fill('input[name="label"]', 'apps-script');
  await page.click('#content section.card button[type="submit"]');
  const secret = (await page.locator('#new-secret').textContent()).trim();
  assert.equal((await api('GET', '/v1/whoami', undefined, secret)).json.role, 'writer');
  await shot(page, '06-tokens');

  // Japanese.
  await page.click('#lang');
  await page.click('nav a[data-view="once"]');
  await page.waitForSelector('h1 >> text=once 記録');
  await shot(page, '07-once-ja');
  await page.click('#lang');  // back to English for the other pages of this browser
  await page.close();
});

test('a lease reads as the server decides it: live before its end, lapsed at it', async () => {
  const page = await newPage();
  await page.goto(base + '/');
  // The module the dashboard serves, run in the page (same origin, under its CSP).
  const read = await page.evaluate(async () => {
    const { leaseSeconds } = await import('/lease.js');
    return [10000, 9999, 8500, 8000, 10001, 11999, 12000].map((now) => leaseSeconds(10000, now));
  });
  assert.deepEqual(read, [
    { live: false, s: 0 },  // at the end: lapsed (src/core/lease.h), never "0 s left"
    { live: true, s: 1 },   // 1 ms left reads "1 s left"
    { live: true, s: 2 },
    { live: true, s: 2 },
    { live: false, s: 0 },
    { live: false, s: 1 },
    { live: false, s: 2 },
  ]);
  await page.context().close();
});

test('reader: sees the data, is offered no admin action', async () => {
  const page = await newPage();
  await signIn(page, readerToken);
  assert.equal(await page.locator('nav a[data-view="tokens"]').isVisible(), false);
  assert.equal(await page.locator('nav a[data-view="audit"]').isVisible(), false);
  for (const [view, ready] of [['once/processing', 'tr[data-key="still-running"]'],
    ['counters/receipts', 'td >> text=R-0001'], ['locks', '#content h1']]) {
    await page.goto(base + '/#/' + view);
    await page.waitForSelector(ready);
    assert.equal(await page.locator('[data-action]').count(), 0, view + ' offers an admin action');
    assert.equal(await page.locator('button.danger:visible').count(), 0, view + ' has a danger button');
    assert.doesNotMatch(await page.locator('#content').innerText(), /\bnull\b/, view);
  }
  await shot(page, '08-reader-counters');
  // Typing the admin-only address does not show it either.
  await page.goto(base + '/#/tokens');
  await page.waitForSelector('h1 >> text=Overview');
  await page.close();
});

test('in Japanese: a fiscal-year counter from the form, what force-release and reset mean, no answer', async () => {
  const page = await newPage(undefined, 'ja');
  await signIn(page, adminToken);
  assert.equal(await page.evaluate(() => document.documentElement.lang), 'ja');

  // Counters: period kinds in Japanese; create a fiscal-year (年度) counter with the form. An
  // empty time zone is the server's default, which the form names.
  await page.goto(base + '/#/counters');
  await page.waitForSelector('h1 >> text=カウンター');
  assert.equal((await page.locator('tr[data-counter="receipts"] td[data-period]').textContent()).trim(),
    'なし (通し番号)');
  await page.waitForSelector('#create-counter input[name="timezone"][placeholder="Asia/Tokyo"]');
  await page.waitForSelector('#create-counter >> text=空欄: サーバーの既定 (Asia/Tokyo)');
  const fyStart = page.locator('#create-counter select[name="fiscal_year_start"]');
  assert.equal(await fyStart.isVisible(), false);  // only for period fiscal_year
  await page.fill('#create-counter input[name="counter_name"]', 'invoices');
  await page.fill('#create-counter input[name="format"]', '{era_initial}{era_year:2}-{fy2}-{seq:4}');
  await page.selectOption('#create-counter select[name="period"]', 'fiscal_year');
  assert.equal(await fyStart.isVisible(), true);
  assert.equal(await fyStart.inputValue(), '4');  // April, the Japanese 年度
  assert.equal((await fyStart.locator('option:checked').textContent()).trim(), '4月');
  await page.click('#create-counter button[type="submit"]');
  await page.waitForSelector('#toast >> text=カウンター invoices を作成しました。');
  await page.waitForSelector('tr[data-counter="invoices"] td[data-period="fiscal_year"] >> text=年度 (4月始まり)');
  const made = await ok('GET', '/v1/ns/shop/counters/invoices');
  assert.equal(made.period, 'fiscal_year');
  assert.equal(made.fiscal_year_start, 4);
  assert.equal(made.timezone, 'Asia/Tokyo');
  assert.match(made.current_period, /^FY\d{4}$/);
  const first = await ok('POST', '/v1/ns/shop/counters/invoices/next', { key: 'order-1' });
  assert.match(first.formatted, /^R\d{2}-\d{2}-0001$/);
  assert.equal(first.period, made.current_period);
  await shot(page, '10-counters-ja');

  // Locks: the force-release dialog says what happens to the old holder's late writes.
  await page.goto(base + '/#/locks');
  const lock = page.locator('tr[data-lock="month-end"]');
  await lock.waitFor();
  await lock.locator('button[data-action="force-release"]').click();
  await page.waitForSelector('dialog#confirm[open]');
  assert.match(await page.locator('#confirm-text').textContent(),
    /元の保持者が遅れて行う書き込みは、フェンシングトークンを確認する側で拒否されます。$/);
  await shot(page, '11-force-release-ja');
  await page.click('#confirm-cancel');
  assert.equal((await ok('GET', '/v1/ns/shop/locks/month-end')).held, true);

  // Once records, completed: a reset warns that the work (a mail, an invoice) runs again.
  await page.goto(base + '/#/once/completed');
  const done = page.locator('tr[data-key="invoice-mail-42"]');
  await done.waitFor();
  await done.locator('button[data-action="reset"]').click();
  await page.waitForSelector('dialog#confirm[open]');
  assert.match(await page.locator('#confirm-text').textContent(), /処理がもう一度実行されます/);
  await shot(page, '12-reset-completed-ja');
  await page.click('#confirm-cancel');
  assert.equal((await ok('GET', '/v1/ns/shop/once?key=invoice-mail-42')).state, 'completed');

  // The server does not answer: the message is Japanese too.
  page.expectNetErrors = true;
  await page.route('**/v1/**', (route) => route.abort('connectionrefused'));
  await page.goto(base + '/#/counters');
  await page.waitForSelector('#content .error >> text=サーバーから応答がありません');
  await shot(page, '13-unreachable-ja');
  await page.unroute('**/v1/**');
  page.expectNetErrors = false;
  await page.close();
});

// Every view a user opens on a phone: readable, nothing wider than the screen but the tables.
for (const [lang, heading] of [['en', 'Counters'], ['ja', 'カウンター']]) {
  test('phone-sized screen (' + lang + '): nothing wider than the screen but the tables', async () => {
    const page = await newPage({ width: 390, height: 844 }, lang);
    await signIn(page, adminToken);
    for (const [view, ready] of [['once/processing', 'tr[data-key="still-running"]'],
      ['counters/receipts', 'td >> text=R-0001'], ['locks', 'tr[data-lock="month-end"]'],
      ['overview', '.charts .chart'], ['tokens', '#content section.card']]) {
      await page.goto(base + '/#/' + view);
      await page.waitForSelector(ready);
      // No stray text from a null child (replaceChildren(null) would print "null").
      assert.doesNotMatch(await page.locator('#content').innerText(), /\bnull\b/, view);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 1, view + ': the page is ' + overflow + ' px wider than the screen');
      await shot(page, '09-phone-' + lang + '-' + view.replace('/', '-'));
    }
    assert.equal(await page.evaluate(() => document.documentElement.lang), lang);
    await page.goto(base + '/#/counters');
    await page.waitForSelector('h1 >> text=' + heading);
    await page.close();
  });
}

test('no console error, page error or CSP violation on any page', () => {
  assert.deepEqual(problems, []);
});
