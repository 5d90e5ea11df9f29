// A test double of the Apps Script runtime that behaves like the real services where ichido's
// client depends on them, and does real work: UrlFetchApp makes real HTTP requests, Script
// Properties and the script lock are shared by all executions of the "project" (as in Apps
// Script), MailApp appends to an outbox the test can read. Each execution is a worker thread
// (gas_worker.mjs) whose synchronous service calls block it on Atomics.wait while this (main)
// thread does the work; executions therefore run truly concurrently, like simultaneous triggers.
//
//   const gas = new GasRuntime({ files: ['clients/gas/Ichido.gs', 'my-recipe.gs'],
//                                properties: { ICHIDO_URL: url, ICHIDO_TOKEN: token } });
//   const r = await gas.run('handleRecord', [42]);        // {ok, value | error, logs}
//   const rs = await Promise.all([...]);                   // concurrent executions
//
// UrlFetchApp fidelity: params method/payload/contentType/headers/muteHttpExceptions/
// followRedirects; getResponseCode/getContentText/getHeaders/getAllHeaders/getContent; without
// muteHttpExceptions a status ≥ 400 throws "Request failed for URL returned code N. Truncated
// server response: …"; a refused connection throws "Address unavailable: URL", a name that does
// not resolve "DNS error: URL", no answer within 60 s "Timeout: URL", a connection cut before
// the answer "Unexpected error: URL" — always, muted or not.
import { Worker, MessageChannel } from 'node:worker_threads';
import { readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import http from 'node:http';
import https from 'node:https';

const here = dirname(fileURLToPath(import.meta.url));
const FETCH_TIMEOUT_MS = 60000;

export class GasRuntime {
  // files: paths of .gs files (or {name, source}); properties: initial Script Properties;
  // onService(op, payload, execution): called before each service call ('fetch', 'mail',
  // 'props.get', …); it may call execution.kill() — the execution dies right there, before the
  // call takes effect, as when Apps Script stops a script at its time limit.
  // onHook(name, data, execution): called when test code calls __testHook(name, data).
  // libraries: [{identifier, files, properties, timeZone}]: projects added as libraries, each with
  // its own Script Properties (scope "library:<identifier>") and time zone.
  constructor({ files, libraries = [], properties = {}, timeZone = 'Asia/Tokyo', onHook = () => null, onService = () => {}, fetchTimeoutMs = FETCH_TIMEOUT_MS }) {
    const load = (f) => (typeof f === 'string' ? { name: basename(f), source: readFileSync(f, 'utf8') } : f);
    this.files = files.map(load);
    this.libraries = libraries.map((l) => ({ identifier: l.identifier, timeZone: l.timeZone, files: l.files.map(load) }));
    this.properties = new Map([['script', new Map(Object.entries(properties))]]);
    for (const l of libraries) this.properties.set('library:' + l.identifier, new Map(Object.entries(l.properties || {})));
    this.timeZone = timeZone;
    this.onHook = onHook;
    this.onService = onService;
    this.fetchTimeoutMs = fetchTimeoutMs;
    this.outbox = [];
    this.triggers = [];
    this.fetches = 0;
    this.locks = new Map(); // scope -> {holder, queue: [{execution, resolve, timer}]}
    this.executions = 0;
  }

  scriptProperties() {
    return Object.fromEntries(this.properties.get('script'));
  }

  libraryProperties(identifier) {
    return Object.fromEntries(this.properties.get('library:' + identifier));
  }

  setScriptProperty(key, value) {
    if (value === null) this.properties.get('script').delete(key);
    else this.properties.get('script').set(key, String(value));
  }

  // Runs `entry` (a function name, or an expression yielding a function) with `args` (JSON) as one
  // execution. Resolves to {ok, value} or {ok: false, error: {name, message, code, status,
  // details}}, plus logs; {killed: true} when it was killed.
  run(entry, args = [], options = {}) {
    return this.start(entry, args, options).done;
  }

  // Like run(), but returns {execution, done} at once: execution.kill() ends it from outside.
  start(entry, args = [], { userKey } = {}) {
    const id = ++this.executions;
    const flag = new SharedArrayBuffer(4);
    const flags = new Int32Array(flag);
    const { port1, port2 } = new MessageChannel();
    const worker = new Worker(join(here, 'gas_worker.mjs'), {
      workerData: { files: this.files, libraries: this.libraries, entry, args, port: port2, flag, userKey: userKey || `user-${id}`, timeZone: this.timeZone },
      transferList: [port2],
    });
    const execution = { id, worker, killed: false, kill: () => {} };
    const done = new Promise((resolve, reject) => {
      let finished = false;
      const finish = (outcome) => {
        if (finished) return;
        finished = true;
        this.#releaseLocks(execution);
        port1.close();
        resolve(outcome);
      };
      execution.kill = () => {
        execution.killed = true;
        worker.terminate().then(() => finish({ ok: false, killed: true, logs: [] }));
      };
      // The reply first, then the flag, then the wake-up (gas_worker.mjs's rpc relies on this order).
      const reply = (id, message) => {
        port1.postMessage({ id, ...message });
        Atomics.store(flags, 0, 1);
        Atomics.notify(flags, 0);
      };
      port1.on('message', async ({ op, payload, id }) => {
        if (op === 'done') {
          reply(id, { value: null });
          return finish(payload);
        }
        try {
          await this.onService(op, payload, execution);
          if (execution.killed) return;
          const value = await this.#serve(op, payload, execution);
          if (execution.killed) return;
          reply(id, { value });
        } catch (e) {
          if (execution.killed) return;
          reply(id, { throw: e.message });
        }
      });
      worker.on('error', (e) => (finished ? null : reject(e)));
      worker.on('exit', () => finish({ ok: false, killed: execution.killed, error: { name: 'Error', message: 'the execution ended without an outcome' }, logs: [] }));
    });
    return { execution, done };
  }

  async #serve(op, p, execution) {
    switch (op) {
      case 'fetch':
        this.fetches++;
        return this.#fetch(p);
      case 'props.get': {
        const m = this.properties.get(p.scope);
        return m && m.has(p.key) ? m.get(p.key) : null;
      }
      case 'props.set':
        this.#scope(p.scope).set(p.key, p.value);
        return null;
      case 'props.delete':
        this.#scope(p.scope).delete(p.key);
        return null;
      case 'props.all':
        return Object.fromEntries(this.#scope(p.scope));
      case 'props.setAll': {
        const m = this.#scope(p.scope);
        if (p.deleteAllOthers) m.clear();
        for (const [k, v] of Object.entries(p.props)) m.set(k, v);
        return null;
      }
      case 'lock.try':
        return this.#tryLock(p.scope, p.timeout, execution);
      case 'lock.release':
        this.#release(p.scope, execution);
        return null;
      case 'mail':
        this.outbox.push({ ...p, execution: execution.id });
        return null;
      case 'trigger':
        this.triggers.push(p);
        return null;
      case 'triggers':
        return this.triggers;
      case 'hook':
        return (await this.onHook(p.name, p.data, execution)) ?? null;
      default:
        throw new Error(`gas shim: unknown operation ${op}`);
    }
  }

  #scope(scope) {
    if (!this.properties.has(scope)) this.properties.set(scope, new Map());
    return this.properties.get(scope);
  }

  #tryLock(scope, timeout, execution) {
    let lock = this.locks.get(scope);
    if (!lock) this.locks.set(scope, (lock = { holder: null, queue: [] }));
    if (!lock.holder) {
      lock.holder = execution;
      return true;
    }
    return new Promise((resolve) => {
      const waiter = { execution, resolve };
      waiter.timer = setTimeout(() => {
        lock.queue = lock.queue.filter((w) => w !== waiter);
        resolve(false);
      }, timeout);
      lock.queue.push(waiter);
    });
  }

  #release(scope, execution) {
    const lock = this.locks.get(scope);
    if (!lock || lock.holder !== execution) return;
    const next = lock.queue.shift();
    lock.holder = next ? next.execution : null;
    if (next) {
      clearTimeout(next.timer);
      next.resolve(true);
    }
  }

  #releaseLocks(execution) {
    for (const scope of this.locks.keys()) this.#release(scope, execution);
    for (const lock of this.locks.values()) lock.queue = lock.queue.filter((w) => w.execution !== execution);
  }

  #fetch({ url, method, headers, payload, followRedirects }, redirects = 0) {
    return new Promise((resolve, reject) => {
      const u = new URL(url);
      const lib = u.protocol === 'https:' ? https : http;
      const body = payload === null ? null : Buffer.from(payload, 'utf8');
      const h = { 'User-Agent': 'Mozilla/5.0 (compatible; Google-Apps-Script; test shim)', ...headers };
      if (body) h['Content-Length'] = body.length;
      const req = lib.request(u, { method, headers: h, agent: false }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('error', () => reject(new Error(`Unexpected error: ${url}`)));
        res.on('end', () => {
          if (!res.complete) return reject(new Error(`Unexpected error: ${url}`));
          if (followRedirects && res.statusCode >= 300 && res.statusCode < 400 && res.headers.location && redirects < 5) {
            const next = new URL(res.headers.location, url).toString();
            return resolve(this.#fetch({ url: next, method: 'GET', headers: {}, payload: null, followRedirects }, redirects + 1));
          }
          const out = {};
          for (let i = 0; i < res.rawHeaders.length; i += 2) {
            const k = res.rawHeaders[i];
            out[k] = k in out ? [].concat(out[k], res.rawHeaders[i + 1]) : res.rawHeaders[i + 1];
          }
          resolve({ code: res.statusCode, headers: out, bytes: [...Buffer.concat(chunks)] });
        });
      });
      req.setTimeout(this.fetchTimeoutMs, () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
      req.on('error', (e) => {
        if (e.code === 'ECONNREFUSED' || e.code === 'EHOSTUNREACH' || e.code === 'ENETUNREACH') reject(new Error(`Address unavailable: ${url}`));
        else if (e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN') reject(new Error(`DNS error: ${url}`));
        else if (e.code === 'ETIMEDOUT') reject(new Error(`Timeout: ${url}`));
        else reject(new Error(`Unexpected error: ${url}`));
      });
      if (body) req.write(body);
      req.end();
    });
  }
}

export const ichidoGs = join(here, '..', 'Ichido.gs');
// The library project: Ichido.gs and IchidoLibrary.gs (the names a project calls as Ichido.x).
export const ichidoLibrary = { identifier: 'Ichido', files: [ichidoGs, join(here, '..', 'IchidoLibrary.gs')] };
