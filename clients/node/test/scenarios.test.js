// The three seed scenarios, on the Node client against a live ichido (node --test).
//   000: 20 concurrent executions number 200 form responses through a proxy that loses answers
//        after the server committed, then re-run; exhaustion at max.
//   001: an AppSheet row fired 3 times, the first execution crashing mid-work (SIGKILL).
//   002: 3 shared-mailbox clients (processes) on 100 mails with <, @, /, +, spaces and Japanese in
//        the Message-IDs, one client killed while it holds a claim.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Server, LossyProxy, seededRandom, flakyForKeys, mailMessageIds } from '../../testing/harness.mjs';
import { Ichido, IchidoError } from '../index.js';

const here = dirname(fileURLToPath(import.meta.url));
const tether = join(here, '..', '..', 'testing', 'tether.sh');
let server;
let scratch;
const children = new Set();

before(async () => {
  server = await new Server().start();
  scratch = mkdtempSync(join(tmpdir(), 'ichido-node-scenarios-'));
});

after(async () => {
  for (const c of children) c.kill('SIGKILL');
  if (server) await server.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

// Runs a fixture script as its own process (tethered to this one); resolves to its exit and the
// JSON lines it printed. onLine(line, child) sees each line as it arrives.
function runWorker(script, args, env, onLine = () => {}) {
  const child = spawn(tether, [process.execPath, join(here, 'fixtures', script), ...args], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  let err = '';
  let pid = 0;
  child.stderr.on('data', (d) => {
    err += d;
    const m = /tether: pid (\d+)/.exec(err);
    if (m) pid = Number(m[1]);
  });
  child.stdout.on('data', (d) => {
    const before = out;
    out += d;
    const lines = out.split('\n');
    const done = before.split('\n').length - 1;
    for (const line of lines.slice(done, -1)) onLine(line, { kill: () => process.kill(pid, 'SIGKILL') });
  });
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      children.delete(child);
      const lines = out.split('\n').filter(Boolean);
      resolve({ code, signal, lines, err, last: lines.length ? safeJson(lines[lines.length - 1]) : null });
    });
  });
}

function safeJson(s) {
  try {
    return JSON.parse(s);
  } catch {
    return null;
  }
}

test('the test proxy fails a key at most maxPerKey times, even when several clients send it', () => {
  // Client A fails, B (same key) gets through, A fails, C gets through, then A twice more: counted
  // in a row per key, A saw four failures and gave up after its four attempts.
  const scripted = [0.0, 0.99, 0.0, 0.99, 0.0, 0.0];
  const policy = flakyForKeys(() => scripted.shift(), '/next');
  const req = { method: 'POST', path: '/v1/ns/n/counters/c/next', body: { key: 'k' } };
  const actions = Array.from({ length: 6 }, () => policy(req));
  assert.equal(actions.filter((a) => a !== 'pass').length, 2, JSON.stringify(actions));
});

test('seed 000: 20 concurrent executions number 200 form responses, answers lost, re-runs', async () => {
  const ns = 'forms';
  const created = await server.admin('PUT', `/v1/ns/${ns}/counters/receipts`, {
    start: 0,
    max: 200,
    format: 'R-{seq:4}',
    require_key: true,
  });
  assert.equal(created.status, 201);
  const token = await server.token('writer', ns);
  // Answers lost after the commit, requests lost before it, 503s; at most 2 in a row per key.
  const proxy = await new LossyProxy(server.port, flakyForKeys(seededRandom(20260401), '/counters/receipts/next')).start();
  try {
    const responses = Array.from({ length: 200 }, (_, i) => `form-response-${String(i + 1).padStart(3, '0')}`);
    // 20 executions, each a client of its own, each numbering every 20th response.
    const firstRun = new Map();
    await Promise.all(
      Array.from({ length: 20 }, async (_, e) => {
        const ichido = new Ichido({ url: proxy.url, token, ns, owner: `execution-${e}` });
        for (let i = e; i < 200; i += 20) firstRun.set(responses[i], await ichido.nextNumber('receipts', responses[i]));
      }),
    );
    // No duplicate, no gap.
    const values = [...firstRun.values()].map((n) => n.value).sort((a, b) => a - b);
    assert.deepEqual(values, Array.from({ length: 200 }, (_, i) => i + 1));
    for (const n of firstRun.values()) assert.equal(n.formatted, `R-${String(n.value).padStart(4, '0')}`);
    // Same number on retry: exactly the responses whose answer was lost came back replayed.
    const lost = new Set(proxy.dropped('/next').map((e) => e.body.key));
    assert.ok(lost.size >= 10, `the proxy lost ${lost.size} answers; the test needs some`);
    const replayed = new Set([...firstRun].filter(([, n]) => n.replayed).map(([k]) => k));
    assert.deepEqual(replayed, lost);

    // Re-runs (a second trigger, a colleague running it again): same numbers, nothing new issued.
    const rerun = new Ichido({ url: proxy.url, token, ns, owner: 'rerun' });
    for (const key of responses.filter((_, i) => i % 7 === 0)) {
      const n = await rerun.nextNumber('receipts', key);
      assert.equal(n.value, firstRun.get(key).value, key);
      assert.equal(n.replayed, true);
    }
    const counter = await server.admin('GET', `/v1/ns/${ns}/counters/receipts`);
    assert.equal(counter.body.last_value, 200);
    assert.equal(counter.body.issued_count, 200);

    // Exhaustion at max: the 201st response is refused (409, not retried), and numbered responses
    // still get their number.
    const direct = new Ichido({ url: server.url, token, ns });
    await assert.rejects(direct.nextNumber('receipts', 'form-response-201'), (err) => {
      assert.ok(err instanceof IchidoError);
      assert.equal(err.code, 'counter_exhausted');
      assert.equal(err.status, 409);
      return true;
    });
    const again = await direct.nextNumber('receipts', responses[41]);
    assert.equal(again.value, firstRun.get(responses[41]).value);
    assert.equal(again.replayed, true);
  } finally {
    await proxy.close();
  }
});

test('seed 001: a row fired 3 times with a crashing worker is processed once', async () => {
  const ns = 'appsheet';
  assert.equal((await server.admin('PUT', `/v1/ns/${ns}/counters/invoices`, { format: 'INV-{seq:4}', require_key: true })).status, 201);
  const env = { ICHIDO_URL: server.url, ICHIDO_TOKEN: await server.token('writer', ns), ICHIDO_NS: ns };
  const ledger = join(scratch, 'invoices-sent.txt');
  writeFileSync(ledger, '');

  // The first execution acquires the row, numbers the invoice and dies before sending it.
  let killedAt = 0;
  let crashedInvoice = null;
  const crashing = runWorker('row_worker.mjs', ['42', ledger], { ...env, CRASH: '1' }, (line, child) => {
    const msg = safeJson(line);
    if (msg && msg.working) {
      crashedInvoice = msg.invoice.formatted;
      child.kill();
      killedAt = Date.now();
    }
  });
  const first = await crashing;
  assert.equal(first.signal ?? null, null); // tether exits normally, reporting the child's death
  assert.ok(killedAt > 0, `the crashing worker never reached the work: ${first.err}`);
  // The two other firings of the same event, at once.
  const [b, c] = await Promise.all([runWorker('row_worker.mjs', ['42', ledger], env), runWorker('row_worker.mjs', ['42', ledger], env)]);
  assert.equal(b.code, 0, b.err);
  assert.equal(c.code, 0, c.err);
  assert.deepEqual(b.last.result, c.last.result, 'the duplicate gets the stored result');
  assert.equal(b.last.result.invoiceNo, crashedInvoice, 'the crash did not burn an invoice number');
  assert.equal(b.last.result.invoiceReplayed, true);
  assert.ok(Date.now() - killedAt >= 1000, 'recovery waited for the lease to lapse');
  assert.deepEqual(readFileSync(ledger, 'utf8').trim().split('\n'), [`${crashedInvoice}\tsent for row 42`]);

  const ichido = new Ichido({ url: server.url, token: env.ICHIDO_TOKEN, ns });
  const record = await ichido.getOnce('appsheet-row-42');
  assert.equal(record.state, 'completed');
  assert.equal(record.attempt, 2);
  // A fourth firing later: the stored result, no work.
  const d = await runWorker('row_worker.mjs', ['42', ledger], env);
  assert.deepEqual(d.last.result, b.last.result);
  assert.equal(readFileSync(ledger, 'utf8').trim().split('\n').length, 1);
});

test('seed 002: 3 mailbox clients on 100 mails, one killed holding a claim: each mail once', async () => {
  const ns = 'mailbox';
  const env = { ICHIDO_URL: server.url, ICHIDO_TOKEN: await server.token('writer', ns), ICHIDO_NS: ns };
  const ids = mailMessageIds(100);
  const idsFile = join(scratch, 'message-ids.json');
  writeFileSync(idsFile, JSON.stringify(ids));
  const ledger = join(scratch, 'mailbox-ledger.txt');
  writeFileSync(ledger, '');
  let killedId = null;
  const runs = ['outlook-A', 'outlook-B', 'outlook-C'].map((client, i) =>
    runWorker('mailbox_worker.mjs', [client, idsFile, ledger, String(7 + i)], { ...env, KILL_AT: client === 'outlook-B' ? '10' : '0' }, (line, child) => {
      if (line.startsWith('KILLME ')) {
        killedId = JSON.parse(line.slice(7));
        child.kill();
      }
    }),
  );
  const [a, b, c] = await Promise.all(runs);
  assert.equal(a.code, 0, a.err);
  assert.equal(c.code, 0, c.err);
  assert.notEqual(b.code, 0, 'client B was killed');
  assert.ok(killedId, 'client B reached its 10th mail');

  const lines = readFileSync(ledger, 'utf8').trim().split('\n');
  const processed = lines.map((l) => l.slice(l.indexOf('\t') + 1));
  assert.equal(processed.length, 100, 'every mail processed exactly once');
  assert.deepEqual(new Set(processed), new Set(ids));
  assert.ok(!lines.some((l) => l.startsWith('outlook-B\t' + killedId)));
  // The survivors agree on who processed each mail (the stored result).
  for (const id of ids) assert.deepEqual(a.last.results[id], c.last.results[id], id);

  const ichido = new Ichido({ url: server.url, token: env.ICHIDO_TOKEN, ns });
  for (const id of ids) {
    const r = await ichido.getOnce(id);
    assert.equal(r.state, 'completed', id);
    assert.equal(r.attempt, id === killedId ? 2 : 1, id);
  }
});
