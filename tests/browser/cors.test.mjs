// CORS in a real browser (decision 102): a page served from another origin (another port) calls
// ichido with fetch and an Authorization header, as Excel Office Scripts and other in-browser
// automations do. Debian's chromium, headless, driven by playwright-core.
//
// What it proves: with `--cors-origin <the page's origin>` the browser's preflight passes, the
// call succeeds and its answer (a 200, and an error answer such as 401 or 409 with its JSON body)
// is readable by the page; a page from an origin not on the list, and every page when the flag
// is off, cannot call ichido (the fetch fails, nothing is changed). The browser, the page server
// and the ichido servers are stopped whatever happens.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';  // resolved from the copy's node_modules (run)

const BINARY = process.env.ICHIDO_BINARY;
const OUT = process.env.ICHIDO_TEST_OUTPUT || tmpdir();
const CHROMIUM = process.env.ICHIDO_CHROMIUM || '/usr/bin/chromium';

const servers = [];  // every ichido started, killed at exit whatever happens
let pageServer = null;
let pagePort = 0;
let browser = null;

process.on('exit', () => {
  for (const s of servers) if (s.proc.exitCode === null) s.proc.kill('SIGKILL');
});

// Starts `ichido serve` (auth on) with `args`; resolves to { base, token, proc, dir }.
function startIchido(name, args) {
  return new Promise((resolve, reject) => {
    const dir = mkdtempSync(join(tmpdir(), 'ichido-cors-'));
    const proc = spawn(BINARY, ['serve', '--listen', '127.0.0.1:0', '--data', join(dir, 'data'),
      ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const s = { proc, dir, base: '', token: '', log: '' };
    servers.push(s);
    const timer = setTimeout(() => reject(new Error('the server did not start:\n' + s.log)), 20000);
    proc.stderr.on('data', (d) => { s.log += d; });
    proc.stdout.on('data', (d) => {
      s.log += d;
      const m = /listening on [^\s]+:(\d+)/.exec(s.log);
      if (m && !s.base) {
        clearTimeout(timer);
        s.base = 'http://127.0.0.1:' + m[1];
        s.token = readFileSync(join(dir, 'data', 'admin.token'), 'utf8').trim();
        resolve(s);
      }
    });
    proc.on('exit', (code) => {
      writeFileSync(join(OUT, 'cors-' + name + '.log'), s.log);
      if (!s.base) reject(new Error('the server exited with ' + code + ':\n' + s.log));
    });
  });
}

function stopIchido(s) {
  return new Promise((resolve) => {
    if (s.proc.exitCode !== null) return resolve();
    s.proc.on('exit', () => resolve());
    s.proc.kill('SIGTERM');
  });
}

// Node's fetch is not a browser: no CORS. For setting up and checking what changed.
async function direct(s, method, path, body) {
  const res = await fetch(s.base + path, {
    method,
    headers: { Authorization: 'Bearer ' + s.token, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

// Opens the page from `pageOrigin` and runs a fetch to ichido from it, as an Office Script does.
// Resolves to { ok, status, body, exposed } or { failed: message } when the browser refused.
async function fetchFromPage(pageOrigin, s, method, path, body, token = s.token) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(10000);
    await page.goto(pageOrigin + '/page.html');
    return await page.evaluate(async ({ url, method, body, token }) => {
      try {
        const res = await fetch(url, {
          method,
          headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { ok: res.ok, status: res.status, body: await res.json(),
          exposed: res.headers.get('Retry-After') };
      } catch (e) {
        return { failed: String(e) };
      }
    }, { url: s.base + path, method, body, token });
  } finally {
    await context.close();
  }
}

before(async () => {
  pageServer = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><title>another origin</title><p>An automation page.</p>');
  });
  await new Promise((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
  pagePort = pageServer.address().port;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  if (browser) await browser.close();
  for (const s of servers) {
    await stopIchido(s);
    rmSync(s.dir, { recursive: true, force: true });
  }
  if (pageServer) pageServer.close();
});

test('a page from an allowed origin calls ichido with a token and reads answers and errors',
  async () => {
    const allowed = 'http://127.0.0.1:' + pagePort;
    const s = await startIchido('allowed', ['--cors-origin', allowed]);
    assert.equal((await direct(s, 'PUT', '/v1/ns/web/counters/r', { format: 'R{seq:3}' })).status,
      201);

    const r = await fetchFromPage(allowed, s, 'POST', '/v1/ns/web/counters/r/next', { key: 'row-2' });
    assert.equal(r.failed, undefined, 'the browser refused the call: ' + r.failed);
    assert.equal(r.status, 200);
    assert.equal(r.body.formatted, 'R001');

    // Errors are readable too: the script can tell a bad token from a conflict.
    const bad = await fetchFromPage(allowed, s, 'POST', '/v1/ns/web/counters/r/next',
      { key: 'row-3' }, 'ichido_not-a-token');
    assert.equal(bad.status, 401);
    assert.equal(bad.body.error.code, 'unauthenticated');
    const held = await direct(s, 'POST', '/v1/ns/web/once/begin', { key: 'mail-1', lease_ms: 60000 });
    assert.equal(held.json.outcome, 'acquired');
    const busy = await fetchFromPage(allowed, s, 'POST', '/v1/ns/web/once/begin',
      { key: 'mail-1', lease_ms: 60000 });
    assert.equal(busy.status, 200);
    assert.equal(busy.body.outcome, 'in_progress');
    assert.ok(Number(busy.exposed) > 0, 'Retry-After is exposed to the page: ' + busy.exposed);
    const conflict = await fetchFromPage(allowed, s, 'PUT', '/v1/ns/web/counters/r',
      { format: 'X{seq}' });
    assert.equal(conflict.status, 409);
    assert.equal(conflict.body.error.code, 'counter_exists');

    // A page of another origin (localhost is not 127.0.0.1 for the browser) may not.
    const other = await fetchFromPage('http://localhost:' + pagePort, s, 'POST',
      '/v1/ns/web/counters/r/next', { key: 'row-4' });
    assert.ok(other.failed, 'a page from another origin could call ichido: ' + JSON.stringify(other));
    // Nothing was issued by the refused calls.
    assert.equal((await direct(s, 'GET', '/v1/ns/web/counters/r')).json.last_value, 1);
    await stopIchido(s);
  });

test('without --cors-origin no page of another origin can call ichido', async () => {
  const s = await startIchido('off', []);
  assert.equal((await direct(s, 'PUT', '/v1/ns/web/counters/r', { format: 'R{seq:3}' })).status,
    201);
  const r = await fetchFromPage('http://127.0.0.1:' + pagePort, s, 'POST',
    '/v1/ns/web/counters/r/next', { key: 'row-2' });
  assert.ok(r.failed, 'the call succeeded without --cors-origin: ' + JSON.stringify(r));
  assert.equal((await direct(s, 'GET', '/v1/ns/web/counters/r')).json.last_value, 0);
  await stopIchido(s);
});
