// The Node client's calls and retry rules against a live ichido (node --test): locks (exclusion,
// renewal, timeout, loss), once (failure and retry, dead, fingerprint, a lost complete answer, an
// unreachable complete, the expired sweeper list), the retry rule (503/429/timeouts retried with
// backoff, 4xx never), request_id replays of lost acquire/begin answers, errors, HTTPS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { Server, LossyProxy } from '../../testing/harness.mjs';
import { Ichido, IchidoError, backoffBaseMs } from '../index.js';

const here = dirname(fileURLToPath(import.meta.url));
let server;
let writer;
let scratch;
const ns = 'node';

before(async () => {
  server = await new Server().start();
  writer = await server.token('writer', ns);
  scratch = mkdtempSync(join(tmpdir(), 'ichido-node-client-'));
});

after(async () => {
  if (server) await server.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const client = (options = {}) => new Ichido({ url: server.url, token: writer, ns, ...options });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function withProxy(policy, fn) {
  const proxy = await new LossyProxy(server.port, policy).start();
  try {
    return await fn(proxy);
  } finally {
    await proxy.close();
  }
}

test('withLock: 10 concurrent read-modify-writes of one file never overlap; tokens increase', async () => {
  const file = join(scratch, 'counter.txt');
  writeFileSync(file, '0');
  const tokens = [];
  await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      client({ owner: `task-${i}` }).withLock(
        'file-counter',
        async (token) => {
          tokens.push(token);
          const v = Number(readFileSync(file, 'utf8'));
          await sleep(20);
          writeFileSync(file, String(v + 1));
        },
        { waitMs: 30000, leaseMs: 5000 },
      ),
    ),
  );
  assert.equal(readFileSync(file, 'utf8'), '10');
  assert.deepEqual([...tokens].sort((a, b) => a - b), tokens, 'fencing tokens in grant order');
  assert.equal((await server.admin('GET', `/v1/ns/${ns}/locks/file-counter`)).body.held, false, 'released');
});

test('withLock: renews the lease while the work outlasts it, and returns what fn returns', async () => {
  const ichido = client();
  const out = await ichido.withLock(
    'long-work',
    async (token) => {
      await sleep(2600); // longer than twice the lease
      const lock = await server.admin('GET', `/v1/ns/${ns}/locks/long-work?token=${token}`);
      assert.equal(lock.body.holder, true, 'still the holder after 2.6 s with a 1 s lease');
      return 'done';
    },
    { leaseMs: 1000 },
  );
  assert.equal(out, 'done');
});

test('withLock: lock_timeout with the holder when the wait ends; the lock stays with its holder', async () => {
  const a = client({ owner: 'holder-A' });
  const b = client({ owner: 'waiter-B' });
  await a.withLock('busy', async () => {
    await assert.rejects(b.withLock('busy', async () => assert.fail('must not run'), { waitMs: 200 }), (err) => {
      assert.equal(err.code, 'lock_timeout');
      assert.equal(err.details.holder.owner, 'holder-A');
      return true;
    });
  });
});

test('withLock: a lease lost to force-release aborts the signal and throws lock_lost', async () => {
  const ichido = client();
  let aborted = false;
  await assert.rejects(
    ichido.withLock(
      'stolen',
      async (token, { signal }) => {
        await server.admin('POST', `/v1/ns/${ns}/locks/stolen/force-release`, {});
        await new Promise((r) => {
          signal.addEventListener('abort', r);
          setTimeout(r, 5000);
        });
        aborted = signal.aborted;
      },
      { leaseMs: 1000 },
    ),
    (err) => err.code === 'lock_lost',
  );
  assert.equal(aborted, true);
});

test('once: a failing fn fails the item (retryable) and rethrows; the next call runs it again', async () => {
  await withProxy(
    () => 'pass',
    async (proxy) => {
      const ichido = new Ichido({ url: proxy.url, token: writer, ns });
      await assert.rejects(ichido.once('flaky-1', async () => { throw new Error('smtp timeout'); }), /smtp timeout/);
      const rec = await ichido.getOnce('flaky-1');
      assert.equal(rec.state, 'pending');
      assert.match(rec.last_error, /smtp timeout/);
      assert.deepEqual(await ichido.once('flaky-1', async ({ attempt }) => ({ attempt })), { attempt: 2 });
      assert.equal(proxy.requests('/once/fail').length, 1);
    },
  );
});

test('once: dead after max attempts, fingerprint mismatch, in_progress', async () => {
  const ichido = client();
  await assert.rejects(ichido.once('fragile', async () => { throw new Error('boom'); }, { maxAttempts: 1 }), /boom/);
  await assert.rejects(ichido.once('fragile', async () => 1), (err) => err.code === 'dead' && err.details.attempts === 1);
  await ichido.once('doc-1', async () => 1, { fingerprint: 'sha256:aaa' });
  await assert.rejects(ichido.once('doc-1', async () => 1, { fingerprint: 'sha256:bbb' }), (err) => {
    assert.equal(err.code, 'fingerprint_mismatch');
    assert.equal(err.status, 422);
    return true;
  });
  const slow = ichido.once('busy-item', () => sleep(800).then(() => 'first'), { owner: 'A' });
  await sleep(200);
  await assert.rejects(client({ owner: 'B' }).once('busy-item', async () => 'second'), (err) => err.code === 'in_progress' && err.details.owner === 'A');
  assert.equal(await slow, 'first');
  assert.equal(await client().once('busy-item', async () => 'third'), 'first', 'duplicates get the stored result');
});

test('once: a lost complete answer is retried (same token and result), never failed', async () => {
  let dropped = 0;
  await withProxy(
    ({ path }) => (path.endsWith('/once/complete') && dropped++ === 0 ? 'drop_answer' : 'pass'),
    async (proxy) => {
      const ichido = new Ichido({ url: proxy.url, token: writer, ns });
      let runs = 0;
      const result = await ichido.once('invoice-7', async () => ({ sent: ++runs }));
      assert.deepEqual(result, { sent: 1 });
      assert.equal(proxy.requests('/once/complete').length, 2);
      assert.equal(proxy.requests('/once/fail').length, 0);
      assert.equal((await ichido.getOnce('invoice-7')).state, 'completed');
    },
  );
});

test('once: complete unreachable until the lease ends throws complete_unconfirmed; the sweeper sees it', async () => {
  await withProxy(
    ({ path }) => (path.endsWith('/once/complete') ? 'drop_request' : 'pass'),
    async (proxy) => {
      const ichido = new Ichido({ url: proxy.url, token: writer, ns });
      const started = Date.now();
      let unconfirmed;
      await assert.rejects(ichido.once('report-2026-04', async () => ({ rows: 12 }), { leaseMs: 1500 }), (err) => {
        unconfirmed = err;
        assert.equal(err.code, 'complete_unconfirmed');
        assert.equal(err.details.key, 'report-2026-04');
        assert.deepEqual(err.details.result, { rows: 12 });
        assert.ok(Number.isInteger(err.details.token));
        return true;
      });
      assert.ok(Date.now() - started >= 1000, 'it kept trying until about the lease end');
      assert.ok(proxy.requests('/once/complete').length >= 2);
      assert.equal(proxy.requests('/once/fail').length, 0, 'fail is never sent for work that succeeded');
      await sleep(Math.max(0, 1600 - (Date.now() - started)));
      const stuck = await client().expired(10);
      assert.ok(stuck.some((r) => r.key === 'report-2026-04'), JSON.stringify(stuck));
      // The caller records it with the error's details (a lapsed holder nobody replaced may).
      const { key, token, result } = unconfirmed.details;
      await client().complete(key, token, result);
      const rec = await client().getOnce('report-2026-04');
      assert.equal(rec.state, 'completed');
      assert.deepEqual(rec.result, { rows: 12 });
    },
  );
});

test('retry rule: 503 and 429 are retried with backoff, 4xx never', async () => {
  let n503 = 0;
  await withProxy(
    ({ path }) => {
      if (path.includes('/counters/r503/next') && n503++ < 2) return { status: 503, body: { error: { code: 'store_unavailable', message: 'down', details: {} } } };
      if (path.includes('/counters/r429/next')) return { status: 429, headers: { 'Retry-After': '1' }, body: { error: { code: 'too_many_waiters', message: 'x', details: {} } } };
      return 'pass';
    },
    async (proxy) => {
      await server.admin('PUT', `/v1/ns/${ns}/counters/r503`, {});
      const retries = [];
      const ichido = new Ichido({ url: proxy.url, token: writer, ns, onRetry: (i) => retries.push(i) });
      const t0 = Date.now();
      assert.equal((await ichido.nextNumber('r503', 'k')).value, 1);
      assert.equal(retries.length, 2);
      assert.ok(retries[0].delayMs >= 250 && retries[0].delayMs <= 500, JSON.stringify(retries));
      assert.ok(retries[1].delayMs >= 500 && retries[1].delayMs <= 1000, JSON.stringify(retries));
      assert.ok(Date.now() - t0 >= 750);

      retries.length = 0;
      await assert.rejects(ichido.nextNumber('r429', 'k'), (err) => err.code === 'too_many_waiters' && err.status === 429);
      assert.equal(retries.length, 3, '4 attempts in all');
      assert.ok(retries.every((r) => r.delayMs >= 1000), 'Retry-After: 1 is honoured');

      retries.length = 0;
      await assert.rejects(ichido.nextNumber('missing', 'k'), (err) => err.code === 'counter_not_found' && err.status === 404);
      assert.equal(retries.length, 0);
      assert.equal(proxy.requests('/counters/missing/next').length, 1, '4xx is never retried');
    },
  );
  assert.deepEqual([0, 1, 2, 3, 4, 10].map(backoffBaseMs), [500, 1000, 2500, 5000, 5000, 5000]);
});

test('retry rule: a request that gets no answer times out explicitly and is retried', async () => {
  let first = true;
  await withProxy(
    ({ path }) => {
      if (path.includes('/counters/slow/next') && first) {
        first = false;
        return 'hang';
      }
      return 'pass';
    },
    async (proxy) => {
      await server.admin('PUT', `/v1/ns/${ns}/counters/slow`, {});
      const ichido = new Ichido({ url: proxy.url, token: writer, ns, timeoutMs: 300 });
      assert.equal((await ichido.nextNumber('slow', 'k')).value, 1);
    },
  );
});

test('unreachable: IchidoError unreachable (status 0) after the attempts', async () => {
  const port = await new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const retries = [];
  const ichido = new Ichido({ url: `http://127.0.0.1:${port}`, token: writer, ns, maxAttempts: 3, onRetry: (i) => retries.push(i) });
  await assert.rejects(ichido.nextNumber('r', 'k'), (err) => {
    assert.ok(err instanceof IchidoError);
    assert.equal(err.code, 'unreachable');
    assert.equal(err.status, 0);
    assert.match(err.message, /after 3 attempt/);
    return true;
  });
  assert.equal(retries.length, 2);
});

test('a lost acquire answer: the retry re-sends the request_id and gets the same grant back', async () => {
  let dropped = false;
  await withProxy(
    ({ path }) => (path.endsWith('/locks/replayed-lock/acquire') && !dropped ? ((dropped = true), 'drop_answer') : 'pass'),
    async (proxy) => {
      const ichido = new Ichido({ url: proxy.url, token: writer, ns, owner: 'gas-1' });
      const grant = await ichido.acquire('replayed-lock', { waitMs: 2000, leaseMs: 30000 });
      assert.equal(grant.acquired, true, JSON.stringify(grant));
      assert.equal(grant.replayed, true);
      const sent = proxy.requests('/locks/replayed-lock/acquire');
      assert.equal(sent.length, 2);
      assert.equal(sent[0].body.request_id, sent[1].body.request_id);
      const lock = await server.admin('GET', `/v1/ns/${ns}/locks/replayed-lock?token=${grant.token}`);
      assert.equal(lock.body.holder, true);
      await ichido.release('replayed-lock', grant.token);
    },
  );
});

test('a lost begin answer: once() still runs fn once, as the replayed holder', async () => {
  let dropped = false;
  await withProxy(
    ({ path }) => (path.endsWith('/once/begin') && !dropped ? ((dropped = true), 'drop_answer') : 'pass'),
    async (proxy) => {
      const ichido = new Ichido({ url: proxy.url, token: writer, ns });
      let runs = 0;
      const result = await ichido.once('lost-begin', async ({ attempt }) => ({ runs: ++runs, attempt }));
      assert.deepEqual(result, { runs: 1, attempt: 1 });
      const begins = proxy.requests('/once/begin');
      assert.equal(begins.length, 2);
      assert.equal(begins[0].body.request_id, begins[1].body.request_id);
    },
  );
});

test('errors: IchidoError with code, status, details; bad arguments fail before any request', async () => {
  const ichido = client();
  await assert.rejects(ichido.nextNumber('receipts', ''), (err) => err.code === 'invalid_argument');
  await assert.rejects(ichido.nextNumber('no/slash', 'k'), (err) => err.code === 'invalid_argument');
  await assert.rejects(ichido.once('k', async () => 1, { leaseMs: 10 }), (err) => {
    assert.equal(err.code, 'invalid_request');
    assert.equal(err.status, 400);
    assert.equal(err.details.field, 'lease_ms');
    return true;
  });
  const reader = new Ichido({ url: server.url, token: await server.token('reader', ns), ns });
  await assert.rejects(reader.once('k2', async () => 1), (err) => err.code === 'forbidden' && err.status === 403);
  assert.throws(() => new Ichido({ url: 'ftp://x' }), (err) => err.code === 'invalid_argument');
});

test('https: the client talks to `ichido serve --tls-cert` with the CA in NODE_EXTRA_CA_CERTS', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ichido-node-tls-'));
  // On localhost (127.0.0.1 and ::1): Node 18 connects to the first address the resolver gives,
  // ::1 on Debian's /etc/hosts.
  const tls = new Server({ listen: 'localhost:0', args: ['--tls-cert', join(dir, 'cert.pem'), '--tls-key', join(dir, 'key.pem')] });
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
    await tls.start();
    const script = `
      import { Ichido } from ${JSON.stringify(join(here, '..', 'index.js'))};
      const ichido = new Ichido({ url: 'https://localhost:${tls.port}', token: ${JSON.stringify(tls.adminToken)}, ns: 'tls' });
      console.log(JSON.stringify(await ichido.once('over-tls', async () => ({ ok: true }))));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') }, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), { ok: true });
    const untrusted = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, NODE_EXTRA_CA_CERTS: '' }, encoding: 'utf8' });
    assert.notEqual(untrusted.status, 0);
    assert.match(untrusted.stderr, /unreachable/);
  } finally {
    await tls.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
