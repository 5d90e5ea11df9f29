// Test harness shared by the Node and Apps Script client tests: a live ichido and a lossy proxy.
//
// startServer() runs the ichido binary under test ($ICHIDO_BINARY, else build/ichido) on
// 127.0.0.1:0 with a fresh data directory, through tether.sh so that the server dies with this
// process even if it is killed; stop() ends it (SIGTERM) and removes the directory. Every test
// file calls stop() in an after() hook, so it runs when a test fails too.
//
// LossyProxy sits between a client and the server and makes failures real: "drop_answer" forwards
// the request, waits for the server's whole answer (so the server did commit) and then cuts the
// client's connection instead of relaying it; "drop_request" cuts the connection before anything
// reaches the server; "hang" never answers (the client's timeout must fire); an object answers
// {status, body, headers} itself (a 503 from "the store", a 429) without forwarding.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import http from 'node:http';

const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, '..', '..');

export function ichidoBinary() {
  const bin = process.env.ICHIDO_BINARY || join(repoRoot, 'build', 'ichido');
  if (!existsSync(bin)) throw new Error(`ichido binary not found at ${bin}; build it or set ICHIDO_BINARY`);
  return bin;
}

const live = new Set();
process.on('exit', () => {
  for (const s of live) s.kill9();
});

export class Server {
  // listen: --listen (default 127.0.0.1:0); "localhost:0" serves 127.0.0.1 and ::1 on one port.
  constructor({ auth = true, args = [], dataDir, listen = '127.0.0.1:0' } = {}) {
    this.auth = auth;
    this.args = args;
    this.listen = listen;
    this.dir = dataDir ? null : mkdtempSync(join(tmpdir(), 'ichido-client-test-'));
    this.dataDir = dataDir || join(this.dir, 'data');
    this.proc = null;
    this.pid = 0;
    this.port = 0;
    this.log = '';
  }

  // Starts the server; resolves once it listens (bounded: 20 s).
  async start() {
    const args = ['serve', '--listen', this.listen, '--data', this.dataDir, ...this.args];
    if (!this.auth) args.push('--no-auth');
    this.proc = spawn(join(here, 'tether.sh'), [ichidoBinary(), ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    live.add(this);
    const onData = (chunk) => {
      this.log += chunk.toString();
    };
    this.proc.stdout.on('data', onData);
    this.proc.stderr.on('data', onData);
    const deadline = Date.now() + 20000;
    while (Date.now() < deadline) {
      const pid = /tether: pid (\d+)/.exec(this.log);
      const port = /ichido listening on 127\.0\.0\.1:(\d+)/.exec(this.log);
      if (pid && port) {
        this.pid = Number(pid[1]);
        this.port = Number(port[1]);
        this.url = `http://127.0.0.1:${this.port}`;
        if (this.auth) this.adminToken = readFileSync(join(this.dataDir, 'admin.token'), 'utf8').trim();
        return this;
      }
      if (this.proc.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    this.kill9();
    throw new Error(`ichido did not start:\n${this.log}`);
  }

  // SIGTERM and wait for the exit.
  async stop() {
    if (this.proc && this.proc.exitCode === null && this.pid) {
      const exited = new Promise((r) => this.proc.once('exit', r));
      try {
        process.kill(this.pid, 'SIGTERM');
      } catch {}
      await exited;
    }
    live.delete(this);
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  kill9() {
    if (this.pid) {
      try {
        process.kill(this.pid, 'SIGKILL');
      } catch {}
    }
    if (this.proc && this.proc.stdin) this.proc.stdin.destroy();
  }

  // One call with the admin token: {status, body}.
  async admin(method, path, body) {
    const res = await fetch(this.url + path, {
      method,
      headers: { Authorization: `Bearer ${this.adminToken}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  // A new token of `role` scoped to `ns`.
  async token(role, ns) {
    const r = await this.admin('POST', '/v1/admin/tokens', { role, ns });
    if (r.status !== 201) throw new Error(`token create: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.token;
  }
}

// Reads one HTTP/1.1 message (head + Content-Length body) from `buf` starting at 0.
// Returns {head, body, length} or null when incomplete.
function parseMessage(buf) {
  const end = buf.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const head = buf.subarray(0, end).toString('latin1');
  const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  const bodyLength = m ? Number(m[1]) : 0;
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) throw new Error('chunked bodies are not supported by the test proxy');
  const total = end + 4 + bodyLength;
  if (buf.length < total) return null;
  return { head, body: buf.subarray(end + 4, total), length: total };
}

export class LossyProxy {
  // `policy(req)` decides per request; req = {method, path, body (parsed JSON or null), n}.
  constructor(upstreamPort, policy = () => 'pass') {
    this.upstreamPort = upstreamPort;
    this.policy = policy;
    this.log = []; // {method, path, body, action}
    this.sockets = new Set();
    this.n = 0;
  }

  async start() {
    this.server = net.createServer((client) => this.#serve(client));
    await new Promise((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = this.server.address().port;
    this.url = `http://127.0.0.1:${this.port}`;
    return this;
  }

  dropped(pathPart) {
    return this.log.filter((e) => e.action === 'drop_answer' && e.path.includes(pathPart));
  }

  requests(pathPart) {
    return this.log.filter((e) => e.path.includes(pathPart));
  }

  async close() {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }

  #serve(client) {
    this.sockets.add(client);
    let inbuf = Buffer.alloc(0);
    let upstream = null;
    let upbuf = Buffer.alloc(0);
    let waiting = null; // resolve of the pending upstream answer
    let busy = false;
    const closeAll = () => {
      client.destroy();
      if (upstream) upstream.destroy();
    };
    client.on('close', () => {
      this.sockets.delete(client);
      if (upstream) upstream.destroy();
    });
    client.on('error', () => {});
    const connectUpstream = () =>
      new Promise((resolveConn, reject) => {
        upstream = net.connect(this.upstreamPort, '127.0.0.1', () => resolveConn());
        this.sockets.add(upstream);
        upstream.on('error', reject);
        upstream.on('data', (d) => {
          upbuf = Buffer.concat([upbuf, d]);
          const msg = parseMessage(upbuf);
          if (msg && waiting) {
            upbuf = upbuf.subarray(msg.length);
            const w = waiting;
            waiting = null;
            w(Buffer.from(msg.head + '\r\n\r\n', 'latin1'), msg.body);
          }
        });
        upstream.on('close', () => {
          this.sockets.delete(upstream);
          upstream = null;
          if (waiting) client.destroy();
        });
      });
    const pump = async () => {
      if (busy) return;
      busy = true;
      try {
        for (;;) {
          const msg = parseMessage(inbuf);
          if (!msg) break;
          inbuf = inbuf.subarray(msg.length);
          const [method, path] = msg.head.split(' ', 2);
          let body = null;
          try {
            body = msg.body.length ? JSON.parse(msg.body.toString('utf8')) : null;
          } catch {}
          const n = ++this.n;
          const action = this.policy({ method, path, body, n });
          const tag = typeof action === 'object' ? 'fake_' + action.status : action;
          this.log.push({ method, path, body, action: tag });
          if (action === 'drop_request') return closeAll();
          if (action === 'hang') return; // never answers; the client times out and closes
          if (typeof action === 'object') {
            const text = JSON.stringify(action.body ?? {});
            const headers = Object.entries(action.headers || {})
              .map(([k, v]) => `${k}: ${v}\r\n`)
              .join('');
            client.write(
              `HTTP/1.1 ${action.status} X\r\nContent-Type: application/json\r\n${headers}` +
                `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
            );
            continue;
          }
          if (!upstream) await connectUpstream();
          const answer = new Promise((r) => {
            waiting = (head, b) => r([head, b]);
          });
          upstream.write(Buffer.concat([Buffer.from(msg.head + '\r\n\r\n', 'latin1'), msg.body]));
          const [head, b] = await answer;
          if (action === 'drop_answer') return closeAll(); // the server has answered: it committed
          client.write(Buffer.concat([head, b]));
        }
      } catch {
        closeAll();
      } finally {
        busy = false;
      }
      if (parseMessage(inbuf)) pump();
    };
    client.on('data', (d) => {
      inbuf = Buffer.concat([inbuf, d]);
      pump();
    });
  }
}

// A proxy policy for requests whose path ends with `suffix`: each one fails (answer lost after the
// commit, request lost before it, or a fake 503 "store unavailable") with the given chances, but
// the same key never fails more than `maxPerKey` times in all, so a client that retries 4 times
// always gets through, even while other clients send the same key: the test is about what the
// client does, not about luck. (Counted in a row, one client's success reset the count between
// another's failures; ichido_testing.py's flaky_for_keys is the same.)
export function flakyForKeys(rand, suffix, { dropAnswer = 0.15, dropRequest = 0.05, fake503 = 0.05, maxPerKey = 2 } = {}) {
  const failures = new Map();
  return ({ path, body }) => {
    if (!path.endsWith(suffix)) return 'pass';
    const key = body && body.key;
    const n = failures.get(key) || 0;
    if (n >= maxPerKey) return 'pass';
    const r = rand();
    let action = 'pass';
    if (r < dropAnswer) action = 'drop_answer';
    else if (r < dropAnswer + dropRequest) action = 'drop_request';
    else if (r < dropAnswer + dropRequest + fake503) action = { status: 503, body: { error: { code: 'store_unavailable', message: 'the store is unavailable (test proxy)', details: {} } } };
    if (action !== 'pass') failures.set(key, n + 1);
    return action;
  };
}

// The README's code blocks marked <!-- recipe: NAME --> (the line before the fence), by NAME: the
// tests run them as written.
export function readmeRecipes(path = join(repoRoot, 'README.md')) {
  const text = readFileSync(path, 'utf8');
  const out = {};
  for (const m of text.matchAll(/<!-- recipe: (\S+) -->\n```\w*\n([\s\S]*?)\n```/g)) out[m[1]] = m[2];
  return out;
}

// A seeded pseudo-random generator (mulberry32), so a failing run can be repeated.
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// 100 Message-IDs as shared mailboxes see them: <, @, /, +, spaces, Japanese, '=' and quotes.
export function mailMessageIds(count = 100) {
  const ids = [];
  for (let i = 0; i < count; i++) {
    const kinds = [
      `<CAF=x/y+z${i}@mail.example.co.jp>`,
      `<${i}.受付.請求書@社内.example.jp>`,
      `<reply ${i} "quoted" +tag/path@example.com>`,
      `<ｆｕｌｌ＿ｗｉｄｔｈ-${i}@例え.jp>`,
    ];
    ids.push(kinds[i % kinds.length]);
  }
  return ids;
}

export { http };
