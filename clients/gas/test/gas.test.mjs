// Apps Script client (clients/gas/Ichido.gs) and the Apps Script examples, run in the GasRuntime
// shim (real HTTP, concurrent executions as worker threads) against a live ichido (node --test).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import net from 'node:net';
import { Server, LossyProxy, seededRandom, flakyForKeys, mailMessageIds, repoRoot } from '../../testing/harness.mjs';
import { GasRuntime, ichidoGs, ichidoLibrary } from '../shim/gas_runtime.mjs';

let server;
before(async () => {
  server = await new Server().start();
});
after(async () => {
  if (server) await server.stop();
});

const examples = join(repoRoot, 'examples');
const gs = (name, source) => ({ name, source });

async function props(ns) {
  return { ICHIDO_URL: server.url, ICHIDO_TOKEN: await server.token('writer', ns), ICHIDO_NS: ns };
}

function assertOk(r) {
  assert.equal(r.ok, true, JSON.stringify(r.error));
  return r.value;
}

// --- the shim behaves like Apps Script -----------------------------------------------------------

// A notify meant for one call once woke the next call before its reply was posted: that call threw
// "no reply", and every later call of the execution got the answer to the one before (CI, stop 36:
// a fetch got a Script Property's value). Failed 1 to 3 executions of 20 in each of 3 runs before.
test('shim: 20 executions making 5000 synchronous service calls each get each call its own answer', async () => {
  const properties = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, `v${i}`]));
  const gas = new GasRuntime({
    files: [
      gs('t.gs', `
      function spin(n) {
        var store = PropertiesService.getScriptProperties();
        var wrong = [];
        for (var i = 0; i < n; i++) {
          var v;
          try { v = store.getProperty('k' + (i % 10)); } catch (e) { v = e.message; }
          if (v !== 'v' + (i % 10) && wrong.length < 3) wrong.push(i + ': ' + v);
        }
        return wrong;
      }`),
    ],
    properties,
  });
  const runs = await Promise.all(Array.from({ length: 20 }, () => gas.run('spin', [5000])));
  for (const r of runs) assert.deepEqual(assertOk(r), []);
});

test('shim: UrlFetchApp throws on >= 400 unless muted, on network errors always; no Node globals', async () => {
  const closed = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const gas = new GasRuntime({
    files: [
      gs('t.gs', `
      function probe(url, closedUrl) {
        var out = {};
        var r = UrlFetchApp.fetch(url, { muteHttpExceptions: true });
        out.mutedCode = r.getResponseCode();
        out.mutedBody = JSON.parse(r.getContentText()).error.code;
        try { UrlFetchApp.fetch(url); } catch (e) { out.unmuted = e.message; }
        try { UrlFetchApp.fetch(closedUrl, { muteHttpExceptions: true }); } catch (e) { out.network = e.message; }
        out.globals = [typeof require, typeof process, typeof fetch, typeof setTimeout, typeof Buffer].join(',');
        var t0 = Date.now(); Utilities.sleep(120); out.slept = Date.now() - t0 >= 110;
        PropertiesService.getScriptProperties().setProperty('n', 7);
        out.prop = PropertiesService.getScriptProperties().getProperty('n');
        out.missing = PropertiesService.getScriptProperties().getProperty('nope');
        return out;
      }`),
    ],
  });
  const out = assertOk(await gas.run('probe', [`${server.url}/v1/ns/x/counters/none`, `http://127.0.0.1:${closed}/`]));
  assert.equal(out.mutedCode, 401);
  assert.equal(out.mutedBody, 'unauthenticated');
  assert.match(out.unmuted, /^Request failed for http:\/\/127\.0\.0\.1:\d+\/v1\/ns\/x\/counters\/none returned code 401\. Truncated server response: .* \(use muteHttpExceptions option to examine full response\)$/);
  assert.match(out.network, /^Address unavailable: http:\/\/127\.0\.0\.1:\d+\/$/);
  assert.equal(out.globals, 'undefined,undefined,undefined,undefined,undefined');
  assert.equal(out.slept, true);
  assert.equal(out.prop, '7', 'properties are strings');
  assert.equal(out.missing, null);
  assert.equal(gas.scriptProperties().n, '7', 'shared with the project');
});

test('shim: LockService.getScriptLock() excludes concurrent executions', async () => {
  const gas = new GasRuntime({
    files: [
      gs('t.gs', `
      function bump() {
        var lock = LockService.getScriptLock();
        if (!lock.tryLock(20000)) throw new Error('no lock');
        try {
          var p = PropertiesService.getScriptProperties();
          var v = Number(p.getProperty('v') || '0');
          Utilities.sleep(5);
          p.setProperty('v', String(v + 1));
        } finally { lock.releaseLock(); }
      }`),
    ],
  });
  await Promise.all(Array.from({ length: 10 }, () => gas.run('bump')));
  assert.equal(gas.scriptProperties().v, '10');
});

test('shim: code loaded as a library reads and writes its own Script Properties, not the project\'s', async () => {
  const gas = new GasRuntime({
    files: [gs('main.gs', 'function probe() { return { mine: PropertiesService.getScriptProperties().getProperty("k"), lib: Lib.read(), libSeesMine: Lib.readGiven(PropertiesService.getScriptProperties()) }; }')],
    libraries: [{
      identifier: 'Lib',
      properties: { k: 'library' },
      timeZone: 'UTC',
      files: [gs('lib.gs', 'function read() { PropertiesService.getScriptProperties().setProperty("w", "x"); return PropertiesService.getScriptProperties().getProperty("k") + "@" + Session.getScriptTimeZone(); }\n' +
        'function readGiven(store) { return store.getProperty("k"); }\nfunction hidden_() { return 1; }')],
    }],
    properties: { k: 'project' },
  });
  assert.deepEqual(assertOk(await gas.run('probe')), { mine: 'project', lib: 'library@UTC', libSeesMine: 'project' });
  assert.equal(gas.libraryProperties('Lib').w, 'x');
  assert.equal(gas.scriptProperties().w, undefined);
  assert.equal(assertOk(await gas.run('(function () { return typeof Lib.hidden_; })')), 'undefined', 'names ending in _ stay private');
});

test('Ichido.gs pasted defines one global, Ichido: a project\'s own connect, backoffBaseMs, … are untouched', async () => {
  const names = 'function probe() { return Object.getOwnPropertyNames(globalThis).filter(function (n) { return n !== "probe"; }); }';
  const bare = assertOk(await new GasRuntime({ files: [gs('p.gs', names)] }).run('probe'));
  const withIchido = assertOk(await new GasRuntime({ files: [ichidoGs, gs('p.gs', names)] }).run('probe'));
  assert.deepEqual(withIchido.filter((n) => !bare.includes(n)), ['Ichido']);
  const gas = new GasRuntime({
    files: [gs('mine.gs', 'function connect() { return "my connect"; }\nvar VERSION = "mine";\nfunction backoffBaseMs() { return -1; }'), ichidoGs,
      gs('t.gs', 'function probe() { return [connect(), VERSION, backoffBaseMs(), typeof Ichido.connect, Ichido.backoffBaseMs(1)]; }')],
  });
  assert.deepEqual(assertOk(await gas.run('probe')), ['my connect', 'mine', -1, 'function', 1000]);
});

test('library mode: Ichido.connect({properties}) reads the calling project\'s properties, one token per project', async () => {
  const ns = 'gas-library';
  await server.admin('PUT', `/v1/ns/${ns}/counters/receipts`, { require_key: true, format: 'R-{seq:4}' });
  const gas = new GasRuntime({
    files: [gs('t.gs', `
      function plain() { try { return Ichido.connect().nextNumber('receipts', 'k'); } catch (e) { return { code: e.code, message: e.message }; } }
      function given() { return Ichido.connect({ properties: PropertiesService.getScriptProperties() }).nextNumber('receipts', 'k').formatted; }
      function errorType() { try { Ichido.connect({ properties: PropertiesService.getScriptProperties() }).nextNumber('nope', 'k'); } catch (e) { return [e instanceof Ichido.IchidoError, e.code, e.name]; } }`)],
    libraries: [ichidoLibrary],
    properties: await props(ns),
  });
  const plain = assertOk(await gas.run('plain'));
  assert.equal(plain.code, 'invalid_argument', 'the library has no ICHIDO_URL of its own');
  assert.match(plain.message, /PropertiesService\.getScriptProperties\(\)/, 'the message says how to pass them');
  assert.equal(assertOk(await gas.run('given')), 'R-0001');
  assert.deepEqual(assertOk(await gas.run('errorType')), [true, 'counter_not_found', 'IchidoError']);
  assert.deepEqual(gas.libraryProperties('Ichido'), {}, 'nothing was put into the library');
});

test('the examples run with Ichido added as a library', async () => {
  const ns = 'appsheet-lib';
  await server.admin('PUT', `/v1/ns/${ns}/counters/invoices`, { format: 'INV-{seq:4}', require_key: true });
  const gas = new GasRuntime({
    files: [join(examples, 'appsheet-invoice', 'Code.gs')],
    libraries: [ichidoLibrary],
    properties: { ...(await props(ns)), ADMIN_EMAIL: 'admin@example.com' },
  });
  assert.deepEqual(assertOk(await gas.run('handleRecord', ['7', 'c@example.co.jp', 100])), { invoiceNo: 'INV-0001' });
  assert.equal(gas.outbox.length, 1);
});

test('once: the default lease outlives Apps Script\'s 6-minute limit, so a running execution keeps its claim', async () => {
  const proxy = await new LossyProxy(server.port).start();
  try {
    const gas = new GasRuntime({
      files: [ichidoGs, join(examples, 'appsheet-invoice', 'Code.gs'), gs('t.gs', 'function plain() { return Ichido.connect().once("lease-default", function () { return 1; }); }')],
      properties: { ...(await props('gas-lease')), ICHIDO_URL: proxy.url },
    });
    assertOk(await gas.run('plain'));
    const limit = 6 * 60 * 1000;
    assert.ok(proxy.requests('/once/begin')[0].body.lease_ms > limit, `default lease ${proxy.requests('/once/begin')[0].body.lease_ms}`);
    assert.ok(assertOk(await gas.run('(function () { return LEASE_MS; })')) > limit, 'the AppSheet example\'s lease');
  } finally {
    await proxy.close();
  }
});

test('connect: the url error says which schemes are accepted; lang ja gives Japanese messages, codes unchanged', async () => {
  const table = JSON.parse(readFileSync(join(repoRoot, 'clients', 'messages-ja.json'), 'utf8'));
  const ns = 'gas-ja';
  const gas = new GasRuntime({
    files: [ichidoGs, gs('t.gs', `
      function bad(url, lang) { try { Ichido.connect({ url: url, lang: lang }); return 'accepted'; } catch (e) { return [e.code, e.message]; } }
      function missing(lang) { try { Ichido.connect({ lang: lang }).nextNumber('nope', 'k'); } catch (e) { return [e.code, e.status, e.message]; } }
      function table() { var out = {}; ${JSON.stringify(Object.keys(table))}.forEach(function (c) { out[c] = Ichido.messageJa(c); }); return out; }`)],
    properties: await props(ns),
  });
  const [code, message] = assertOk(await gas.run('bad', ['ftp://x']));
  assert.equal(code, 'invalid_argument');
  assert.match(message, /https:\/\//);
  assert.match(message, /http:\/\/ only/, 'http:// is accepted, and the message says so');
  assert.equal(assertOk(await gas.run('bad', ['http://ichido.internal:7878'])), 'accepted');
  assert.deepEqual(assertOk(await gas.run('table')), table);
  const en = assertOk(await gas.run('missing', ['']));
  const ja = assertOk(await gas.run('missing', ['ja']));
  assert.deepEqual([ja[0], ja[1]], ['counter_not_found', 404]);
  assert.equal(ja[2], `${table.counter_not_found} (${en[2]})`);
  gas.setScriptProperty('ICHIDO_LANG', 'ja');
  assert.equal(assertOk(await gas.run('missing', ['']))[2], ja[2], 'the Script Property ICHIDO_LANG');
  const [, jaUrl] = assertOk(await gas.run('bad', ['ftp://x', 'ja']));
  assert.ok(jaUrl.startsWith(table.invalid_argument), jaUrl);
});

test('createCounter: a counter made from Apps Script rolls over in the script\'s time zone', async () => {
  const ns = 'gas-tz';
  const admin = await server.token('admin', ns);
  const gas = new GasRuntime({
    files: [ichidoGs, gs('t.gs', `
      function make(name, config) { return Ichido.connect().createCounter(name, config); }`)],
    properties: { ...(await props(ns)), ICHIDO_TOKEN: admin },
    timeZone: 'America/New_York',
  });
  const made = assertOk(await gas.run('make', ['daily', { period: 'day', format: 'D-{yyyy}{mm}{dd}-{seq:3}', require_key: true }]));
  assert.equal(made.timezone, 'America/New_York', 'Session.getScriptTimeZone()');
  assert.equal((await server.admin('GET', `/v1/ns/${ns}/counters/daily`)).body.timezone, 'America/New_York');
  const own = assertOk(await gas.run('make', ['tokyo', { period: 'month', timezone: 'Asia/Tokyo' }]));
  assert.equal(own.timezone, 'Asia/Tokyo', 'an explicit timezone wins');
  const again = assertOk(await gas.run('make', ['daily', { period: 'day', format: 'D-{yyyy}{mm}{dd}-{seq:3}', require_key: true }]));
  assert.equal(again.name, 'daily', 'the same config again answers the counter');
});

test('Ichido.gs uses only what Apps Script V8 has: no modules, async, optional chaining, Node APIs', () => {
  const src = readFileSync(ichidoGs, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  for (const [what, re] of [
    ['optional chaining', /\?\./],
    ['nullish coalescing', /\?\?/],
    ['async/await', /\b(async|await)\b/],
    ['modules', /^\s*(import|export)\b/m],
    ['Node/browser APIs', /(?<![.\w])(require|process|Buffer|setTimeout|setInterval|fetch|XMLHttpRequest|TextEncoder)\b/],
  ]) {
    assert.doesNotMatch(src, re, what);
  }
});

// --- the calls -----------------------------------------------------------------------------------

test('connect: defaults from Script Properties; errors are IchidoError with code/status/details', async () => {
  const ns = 'gas-basics';
  const gas = new GasRuntime({
    files: [
      ichidoGs,
      gs('t.gs', `
      function errors() {
        var out = {};
        try { Ichido.connect().nextNumber('missing', 'k'); } catch (e) {
          out.notFound = { name: e.name, code: e.code, status: e.status, isError: e instanceof Error };
        }
        try { Ichido.connect().nextNumber('missing', ''); } catch (e) { out.noKey = e.code; }
        try { Ichido.connect().once('k', function () { return 1; }, { leaseMs: 5 }); } catch (e) {
          out.field = e.details.field;
        }
        try { Ichido.connect({ url: 'ftp://x' }); } catch (e) { out.url = e.code; }
        return out;
      }
      function noUrl() { try { Ichido.connect(); } catch (e) { return e.message; } }`),
    ],
    properties: await props(ns),
  });
  const out = assertOk(await gas.run('errors'));
  assert.deepEqual(out.notFound, { name: 'IchidoError', code: 'counter_not_found', status: 404, isError: true });
  assert.equal(out.noKey, 'invalid_argument');
  assert.equal(out.field, 'lease_ms');
  assert.equal(out.url, 'invalid_argument');
  gas.setScriptProperty('ICHIDO_URL', null);
  assert.match(assertOk(await gas.run('noUrl')), /ICHIDO_URL/);
});

test('withLock: renew() keeps the lock through work longer than the lease; released on throw', async () => {
  const ns = 'gas-locks';
  let stillHolder = null;
  const gas = new GasRuntime({
    files: [
      ichidoGs,
      gs('t.gs', `
      function hold(ms) {
        return Ichido.connect().withLock('printer', function (token, lock) {
          var end = Date.now() + ms;
          while (Date.now() < end) { Utilities.sleep(300); lock.renew(); }
          __testHook('after-long-work', token);
          return token;
        }, { leaseMs: 1000 });
      }
      function tryIt() {
        return Ichido.connect().withLock('printer', function () { return 'ran'; }, { waitMs: 200 });
      }
      function boom() { Ichido.connect().withLock('printer', function () { throw new Error('paper jam'); }); }`),
    ],
    properties: await props(ns),
    onHook: async (name, token) => {
      stillHolder = (await server.admin('GET', `/v1/ns/${ns}/locks/printer?token=${token}`)).body.holder;
    },
  });
  const token = assertOk(await gas.run('hold', [2500]));
  assert.equal(stillHolder, true, 'still the holder after 2.5 s with a 1 s lease, renewed');
  assert.ok(token > 0);
  assert.equal((await server.admin('GET', `/v1/ns/${ns}/locks/printer`)).body.held, false, 'released');
  const boom = await gas.run('boom');
  assert.equal(boom.error.message, 'paper jam');
  assert.equal((await server.admin('GET', `/v1/ns/${ns}/locks/printer`)).body.held, false, 'released in finally');
  assert.equal(assertOk(await gas.run('tryIt')), 'ran');
});

test('withLock: a lease that lapsed and was taken during the work throws lock_lost after it; lapsed but free, no error', async () => {
  const ns = 'gas-locks-lost';
  const lock = `/v1/ns/${ns}/locks/ledger`;
  let takeIt = false;
  const gas = new GasRuntime({
    files: [
      ichidoGs,
      gs('t.gs', `
      function slow() {
        var ran = false;
        try {
          Ichido.connect().withLock('ledger', function () { __testHook('work'); ran = true; return 'done'; }, { leaseMs: 1000 });
          return { ran: ran, error: null };
        } catch (e) { return { ran: ran, error: e.code, status: e.status, token: e.details.token }; }
      }
      function slowAndFailing() {
        try { Ichido.connect().withLock('ledger', function () { __testHook('work'); throw new Error('paper jam'); }, { leaseMs: 1000 }); }
        catch (e) { return e.message; }
      }`),
    ],
    properties: await props(ns),
    onHook: async () => {
      // The work outlives its 1 s lease: wait until the server says the lease lapsed (GET shows
      // held: false), then, when asked, another owner takes the lock.
      for (let i = 0; (await server.admin('GET', lock)).body.held; i++) {
        assert.ok(i < 300, 'the lease never lapsed');
        await new Promise((r) => setTimeout(r, 20));
      }
      if (takeIt) {
        const got = await server.admin('POST', `${lock}/acquire`, { owner: 'other', wait_ms: 0, lease_ms: 60000 });
        assert.equal(got.body.acquired, true, JSON.stringify(got.body));
      }
      return null;
    },
  });
  assert.deepEqual(assertOk(await gas.run('slow')), { ran: true, error: null }, 'lapsed, nobody took it: released as usual');
  takeIt = true;
  const lost = assertOk(await gas.run('slow'));
  assert.equal(lost.ran, true);
  assert.equal(lost.error, 'lock_lost');
  assert.equal(lost.status, 409);
  assert.ok(lost.token > 0);
  assert.equal((await server.admin('GET', lock)).body.owner, 'other', 'the other holder keeps the lock');
  await server.admin('POST', `${lock}/force-release`, {});
  assert.equal(assertOk(await gas.run('slowAndFailing')), 'paper jam', "the work's own error is not replaced by lock_lost");
});

test('withLock: lock_timeout names the holder', async () => {
  const ns = 'gas-locks2';
  let inner;
  const gas = new GasRuntime({
    files: [
      ichidoGs,
      gs('t.gs', `
      function holdThenTry() {
        return Ichido.connect({ owner: 'first' }).withLock('ledger', function () { return __testHook('held'); });
      }
      function tryIt() {
        try { Ichido.connect({ owner: 'second' }).withLock('ledger', function () {}, { waitMs: 300 }); return 'ran'; }
        catch (e) { return { code: e.code, holder: e.details.holder.owner, status: e.status }; }
      }`),
    ],
    properties: await props(ns),
    onHook: async () => {
      inner = await gas.run('tryIt');
      return null;
    },
  });
  assertOk(await gas.run('holdThenTry'));
  assert.deepEqual(assertOk(inner), { code: 'lock_timeout', holder: 'first', status: 200 });
});

test('once: fail on throw, retry succeeds, a lost complete answer is retried and never failed', async () => {
  const ns = 'gas-once';
  let dropped = 0;
  const proxy = await new LossyProxy(server.port, ({ path }) => (path.endsWith('/once/complete') && dropped++ === 0 ? 'drop_answer' : 'pass')).start();
  try {
    const p = await props(ns);
    const gas = new GasRuntime({
      files: [
        ichidoGs,
        gs('t.gs', `
        function work(fail) {
          return Ichido.connect().once('row-1', function (ctx) {
            if (fail) throw new Error('sheet locked');
            MailApp.sendEmail('a@example.com', 'done', 'attempt ' + ctx.attempt);
            return { attempt: ctx.attempt };
          });
        }`),
      ],
      properties: { ...p, ICHIDO_URL: proxy.url },
    });
    const failed = await gas.run('work', [true]);
    assert.equal(failed.error.message, 'sheet locked');
    assert.equal(proxy.requests('/once/fail').length, 1);
    assert.deepEqual(assertOk(await gas.run('work', [false])), { attempt: 2 });
    assert.equal(proxy.requests('/once/complete').length, 2, 'the lost complete answer was retried');
    assert.equal(proxy.requests('/once/fail').length, 1, 'no fail for work that succeeded');
    assert.deepEqual(assertOk(await gas.run('work', [false])), { attempt: 2 }, 'stored result');
    assert.equal(gas.outbox.length, 1);
  } finally {
    await proxy.close();
  }
});

test('a lost begin answer: the retry re-sends the request_id and is the same claim', async () => {
  const ns = 'gas-replay';
  let dropped = false;
  const proxy = await new LossyProxy(server.port, ({ path }) => (path.endsWith('/once/begin') && !dropped ? ((dropped = true), 'drop_answer') : 'pass')).start();
  try {
    const gas = new GasRuntime({
      files: [ichidoGs, gs('t.gs', `function work() { return Ichido.connect().once('lost', function (c) { return c.attempt; }); }`)],
      properties: { ...(await props(ns)), ICHIDO_URL: proxy.url },
    });
    assert.equal(assertOk(await gas.run('work')), 1);
    const begins = proxy.requests('/once/begin');
    assert.equal(begins.length, 2);
    assert.equal(begins[0].body.request_id, begins[1].body.request_id);
  } finally {
    await proxy.close();
  }
});

// --- the seeds, on the examples ----------------------------------------------------------------

test('seed 000 (examples/receipt-numbers): 20 executions number 200 form responses; answers lost; re-runs; exhaustion', async () => {
  const ns = 'forms';
  assert.equal((await server.admin('PUT', `/v1/ns/${ns}/counters/receipts`, { max: 200, format: 'R-{seq:4}', require_key: true })).status, 201);
  const proxy = await new LossyProxy(server.port, flakyForKeys(seededRandom(7), '/counters/receipts/next')).start();
  try {
    const gas = new GasRuntime({
      files: [
        ichidoGs,
        join(examples, 'receipt-numbers', 'Code.gs'),
        // The form-submit events an installable trigger passes (test glue).
        gs('events.gs', `
        function submitAll(ids) {
          return ids.map(function (id) {
            var e = { response: { getId: function () { return id; }, getRespondentEmail: function () { return id + '@example.com'; } } };
            return [id, onFormSubmit(e)];
          });
        }
        function numberOf(id) { return Ichido.connect().nextNumber('receipts', 'form-' + id); }`),
      ],
      properties: { ...(await props(ns)), ICHIDO_URL: proxy.url },
    });
    const ids = Array.from({ length: 200 }, (_, i) => `2_ABaOnud${1000 + i}`);
    const runs = await Promise.all(Array.from({ length: 20 }, (_, e) => gas.run('submitAll', [ids.filter((_, i) => i % 20 === e)])));
    const numbers = new Map(runs.flatMap((r) => assertOk(r)));
    const sorted = [...numbers.values()].sort();
    assert.deepEqual(sorted, Array.from({ length: 200 }, (_, i) => `R-${String(i + 1).padStart(4, '0')}`));
    assert.equal(gas.outbox.length, 200, 'one mail per response');
    assert.ok(proxy.dropped('/next').length >= 10);

    // Re-runs: the trigger fired again for 30 responses, from 3 executions at once.
    const again = await Promise.all([0, 1, 2].map((k) => gas.run('submitAll', [ids.filter((_, i) => i % 20 === k).slice(0, 10)])));
    for (const [id, no] of again.flatMap((r) => assertOk(r))) assert.equal(no, numbers.get(id), id);
    assert.equal(gas.outbox.length, 200, 'no second mail');
    for (const e of proxy.dropped('/next')) {
      const id = e.body.key.slice('form-'.length);
      const n = assertOk(await gas.run('numberOf', [id]));
      assert.equal(n.formatted, numbers.get(id));
      assert.equal(n.replayed, true);
    }
    // Exhaustion at max: the 201st response is refused; numbered ones keep their number.
    const over = await gas.run('submitAll', [['2_ABaOnud9999']]);
    assert.equal(over.error.code, 'counter_exhausted');
    assert.equal(over.error.status, 409);
    assert.equal(assertOk(await gas.run('submitAll', [[ids[5]]]))[0][1], numbers.get(ids[5]));
  } finally {
    await proxy.close();
  }
});

test('seed 000 (examples/receipt-numbers): the practice number under withLock, with the seed guards', async () => {
  const ns = 'practice';
  const gas = new GasRuntime({
    files: [ichidoGs, join(examples, 'receipt-numbers', 'Code.gs'), gs('t.gs', `function ten() { var out = []; for (var i = 0; i < 10; i++) out.push(issuePracticeNumber()); return out; }`)],
    properties: await props(ns),
  });
  // Unset: an error, and still unset (never Number(null) + 1 = R-0001).
  const unset = await gas.run('issuePracticeNumber');
  assert.equal(unset.error.message, '最後の受付番号を確認してください');
  assert.equal(gas.scriptProperties()['practice.lastNumber'], undefined);
  for (const bad of ['', 'abc', '01', '-1', '1.5']) {
    gas.setScriptProperty('practice.lastNumber', bad);
    const r = await gas.run('issuePracticeNumber');
    assert.equal(r.error && r.error.message, '最後の受付番号を確認してください', bad);
    assert.equal(gas.scriptProperties()['practice.lastNumber'], bad, 'unchanged');
  }
  gas.setScriptProperty('practice.lastNumber', '9999');
  assert.equal((await gas.run('issuePracticeNumber')).error.message, '受付番号の上限を確認してください');
  // 20 executions at once, 10 numbers each: 200 distinct numbers in order, the lock released each time.
  gas.setScriptProperty('practice.lastNumber', '0');
  const runs = await Promise.all(Array.from({ length: 20 }, () => gas.run('ten')));
  const all = runs.flatMap((r) => assertOk(r)).sort();
  assert.deepEqual(all, Array.from({ length: 200 }, (_, i) => `R-${String(i + 1).padStart(4, '0')}`));
  assert.equal(gas.scriptProperties()['practice.lastNumber'], '200');
});

test('seed 001 (examples/appsheet-invoice): a row fired 3 times, the first execution killed mid-work', async () => {
  const ns = 'appsheet';
  assert.equal((await server.admin('PUT', `/v1/ns/${ns}/counters/invoices`, { format: 'INV-{yyyy}-{seq:4}', period: 'year', timezone: 'Asia/Tokyo', require_key: true })).status, 201);
  let killedAt = 0;
  let victim = null;
  const gas = new GasRuntime({
    files: [ichidoGs, join(examples, 'appsheet-invoice', 'Code.gs'), gs('test-settings.gs', 'LEASE_MS = 1500;')],
    properties: { ...(await props(ns)), ADMIN_EMAIL: 'admin@example.com' },
    onService: (op, payload, execution) => {
      // The first execution dies right before it sends the invoice mail (its time limit).
      if (op === 'mail' && execution === victim) {
        killedAt = Date.now();
        execution.kill();
      }
    },
  });
  const first = gas.start('handleRecord', ['42', 'customer@example.co.jp', 12000]);
  victim = first.execution;
  assert.equal((await first.done).killed, true);
  assert.ok(killedAt > 0);
  // The stuck row shows in the sweeper once its lease lapsed.
  await new Promise((r) => setTimeout(r, 1600));
  assert.equal(assertOk(await gas.run('sweepStuckRecords')), 1);
  assert.match(gas.outbox[0].body, /appsheet-row-42 \(attempt 1/);
  assert.equal(gas.outbox[0].to, 'admin@example.com');
  gas.outbox.length = 0;
  // The Grouped Action's other two firings, at once: one takes over, the other waits and gets its result.
  const [b, c] = await Promise.all([gas.run('handleRecord', ['42', 'customer@example.co.jp', 12000]), gas.run('handleRecord', ['42', 'customer@example.co.jp', 12000])]);
  assert.deepEqual(assertOk(b), assertOk(c));
  const year = new Intl.DateTimeFormat('en', { timeZone: 'Asia/Tokyo', year: 'numeric' }).format(new Date());
  assert.deepEqual(assertOk(b), { invoiceNo: `INV-${year}-0001` }, 'the crash did not burn a number');
  assert.equal(gas.outbox.length, 1, 'one invoice mail');
  assert.equal(gas.outbox[0].to, 'customer@example.co.jp');
  // Later firings: the stored result, no mail. Other content under the same row id: refused.
  assert.deepEqual(assertOk(await gas.run('handleRecord', ['42', 'customer@example.co.jp', 12000])), { invoiceNo: `INV-${year}-0001` });
  assert.equal((await gas.run('handleRecord', ['42', 'customer@example.co.jp', 99999])).error.code, 'fingerprint_mismatch');
  assert.equal(gas.outbox.length, 1);
  assert.equal(assertOk(await gas.run('sweepStuckRecords')), 0);
  assertOk(await gas.run('installSweeper'));
  assert.deepEqual(gas.triggers, [{ handler: 'sweepStuckRecords', everyMinutes: 10 }]);
});

test('seed 002 in Apps Script: 3 executions on 100 Message-IDs, one killed holding a claim', async () => {
  const ns = 'gas-mailbox';
  const ids = mailMessageIds(100);
  let victim = null;
  let killedId = null;
  const gas = new GasRuntime({
    files: [
      ichidoGs,
      gs('mailbox.gs', `
      function processAll(client, ids) {
        var ichido = Ichido.connect({ owner: client });
        var pending = ids, results = {};
        while (pending.length > 0) {
          var later = [];
          pending.forEach(function (id) {
            try {
              results[id] = ichido.once(id, function () {
                MailApp.sendEmail('ledger@example.com', id, client);  // the side effect
                return { by: client };
              }, { leaseMs: 1500 });
            } catch (e) {
              if (e.code === 'in_progress') later.push(id); else throw e;
            }
          });
          pending = later;
          if (pending.length) Utilities.sleep(200);
        }
        return results;
      }`),
    ],
    properties: await props(ns),
    onService: (op, payload, execution) => {
      if (op === 'mail' && execution === victim && gas.outbox.filter((m) => m.execution === execution.id).length === 9) {
        killedId = payload.subject;
        execution.kill();
      }
    },
  });
  const order = (seed) => {
    const r = seededRandom(seed);
    return [...ids].sort(() => r() - 0.5);
  };
  const runs = ['A', 'B', 'C'].map((c, i) => gas.start('processAll', [`outlook-${c}`, order(i + 1)]));
  victim = runs[1].execution;
  const [a, b, c] = await Promise.all(runs.map((r) => r.done));
  assert.equal(b.killed, true);
  const resultsA = assertOk(a);
  const resultsC = assertOk(c);
  const subjects = gas.outbox.map((m) => m.subject);
  assert.equal(subjects.length, 100, 'each mail processed exactly once');
  assert.deepEqual(new Set(subjects), new Set(ids));
  for (const id of ids) assert.deepEqual(resultsA[id], resultsC[id], id);
  const rec = await server.admin('GET', `/v1/ns/${ns}/once?key=${encodeURIComponent(killedId)}`);
  assert.equal(rec.body.state, 'completed');
  assert.equal(rec.body.attempt, 2);
});
