// One Apps Script execution, in a worker thread: the project's .gs files run in a fresh V8 context
// that has only ECMAScript built-ins and the Apps Script services below (no require, process,
// fetch, setTimeout, Buffer — which Apps Script does not have either). Services that must be
// synchronous, as in Apps Script, block this thread with Atomics.wait while the main thread
// (gas_runtime.mjs) does the real work: HTTP requests, the shared Script Properties, the script
// lock, the outbox. See gas_runtime.mjs for what each service does.
import { workerData, receiveMessageOnPort } from 'node:worker_threads';
import { createHash, randomUUID } from 'node:crypto';
import vm from 'node:vm';

const { files, libraries = [], entry, args, port, flag, userKey, timeZone } = workerData;
const flags = new Int32Array(flag);
const logs = [];

// A synchronous call to the main thread. The main thread posts the reply, then sets the flag to
// 1, then notifies: the flag, not the wake-up, says the reply is there — a notify meant for the
// previous call can arrive after this call has set the flag back to 0, so Atomics.wait is
// re-entered until the flag is set. Each call carries a sequence number its reply must echo.
let calls = 0;
function rpc(op, payload) {
  const id = ++calls;
  Atomics.store(flags, 0, 0);
  port.postMessage({ op, payload, id });
  while (Atomics.load(flags, 0) === 0) Atomics.wait(flags, 0, 0);
  const reply = receiveMessageOnPort(port);
  if (!reply) throw new Error(`gas shim: no reply to ${op}`);
  if (reply.message.id !== id) throw new Error(`gas shim: the reply to ${op} (#${id}) was for call #${reply.message.id}`);
  if (reply.message.throw) {
    const e = new Error(reply.message.throw);
    e.name = 'Exception';
    throw e;
  }
  return reply.message.value;
}

// Apps Script's services throw plain Errors whose message starts with "Exception: "... in the
// log; the object's message itself is without the prefix.
function gasError(message) {
  const e = new Error(message);
  e.name = 'Exception';
  return e;
}

class HTTPResponse {
  #r;
  constructor(r) {
    this.#r = r;
  }
  getResponseCode() {
    return this.#r.code;
  }
  getContentText(charset) {
    if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
      return new TextDecoder(charset).decode(Uint8Array.from(this.#r.bytes));
    }
    return Buffer.from(this.#r.bytes).toString('utf8');
  }
  getContent() {
    return this.#r.bytes.map((b) => (b > 127 ? b - 256 : b)); // Apps Script bytes are signed
  }
  getHeaders() {
    const out = {};
    for (const [k, v] of Object.entries(this.#r.headers)) out[k] = Array.isArray(v) ? v[v.length - 1] : v;
    return out;
  }
  getAllHeaders() {
    return { ...this.#r.headers };
  }
  getBlob() {
    const r = this.#r;
    return {
      getDataAsString: () => Buffer.from(r.bytes).toString('utf8'),
      getContentType: () => r.headers['Content-Type'] || null,
      getBytes: () => r.bytes.map((b) => (b > 127 ? b - 256 : b)),
    };
  }
}

const UrlFetchApp = {
  // fetch(url, params): method (get), payload, contentType, headers, muteHttpExceptions (false),
  // followRedirects (true), validateHttpsCertificates (true). Without muteHttpExceptions a status
  // of 400 or more throws; a network failure always throws.
  fetch(url, params = {}) {
    if (typeof url !== 'string') throw gasError('Invalid argument: url');
    if (!/^https?:\/\//i.test(url)) throw gasError(`Invalid argument: ${url}`);
    const method = String(params.method || 'get').toUpperCase();
    const headers = { ...(params.headers || {}) };
    let payload = params.payload;
    if (payload !== undefined && payload !== null) {
      if (typeof payload === 'object') {
        payload = Object.entries(payload)
          .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
          .join('&');
        headers['Content-Type'] = params.contentType || 'application/x-www-form-urlencoded';
      } else {
        payload = String(payload);
        headers['Content-Type'] = params.contentType || 'application/x-www-form-urlencoded';
      }
    } else if (params.contentType) {
      headers['Content-Type'] = params.contentType;
    }
    const r = rpc('fetch', {
      url,
      method,
      headers,
      payload: payload === undefined || payload === null ? null : payload,
      followRedirects: params.followRedirects !== false,
      validateHttpsCertificates: params.validateHttpsCertificates !== false,
    });
    const response = new HTTPResponse(r);
    if (!params.muteHttpExceptions && r.code >= 400) {
      const text = response.getContentText();
      throw gasError(
        `Request failed for ${url} returned code ${r.code}. Truncated server response: ` +
          `${text.slice(0, 100)}${text.length > 100 ? '...' : ''} (use muteHttpExceptions option to examine full response)`,
      );
    }
    return response;
  },
  fetchAll() {
    throw gasError('fetchAll is not provided by this test shim');
  },
};

function propertiesStore(scope) {
  const store = {
    getProperty: (key) => rpc('props.get', { scope, key: String(key) }),
    setProperty: (key, value) => {
      rpc('props.set', { scope, key: String(key), value: String(value) });
      return store;
    },
    deleteProperty: (key) => {
      rpc('props.delete', { scope, key: String(key) });
      return store;
    },
    getProperties: () => rpc('props.all', { scope }),
    setProperties: (props, deleteAllOthers = false) => {
      const strings = {};
      for (const [k, v] of Object.entries(props)) strings[k] = String(v);
      rpc('props.setAll', { scope, props: strings, deleteAllOthers });
      return store;
    },
    deleteAllProperties: () => {
      rpc('props.setAll', { scope, props: {}, deleteAllOthers: true });
      return store;
    },
    getKeys: () => Object.keys(rpc('props.all', { scope })),
  };
  return store;
}

// Script Properties belong to a project: code loaded as a library reads and writes the library's
// own (scope "library:<identifier>"), never those of the project that uses it (Google's library
// guide: Script Properties are not shared; User Properties are).
function propertiesService(scriptScope) {
  return {
    getScriptProperties: () => propertiesStore(scriptScope),
    getUserProperties: () => propertiesStore('user:' + userKey),
    getDocumentProperties: () => (scriptScope === 'script' ? propertiesStore('document') : null),
  };
}
const PropertiesService = propertiesService('script');

function makeLock(scope) {
  let held = false;
  return {
    tryLock(timeoutInMillis) {
      if (held) return true;
      held = rpc('lock.try', { scope, timeout: Number(timeoutInMillis) || 0 });
      return held;
    },
    waitLock(timeoutInMillis) {
      if (!this.tryLock(timeoutInMillis)) throw gasError('Lock timeout: another process was holding the lock for too long.');
    },
    releaseLock() {
      if (held) rpc('lock.release', { scope });
      held = false;
    },
    hasLock: () => held,
  };
}

const LockService = {
  getScriptLock: () => makeLock('script'),
  getUserLock: () => makeLock('user:' + userKey),
  getDocumentLock: () => makeLock('document'),
};

const sleeper = new Int32Array(new SharedArrayBuffer(4));
const Utilities = {
  sleep(milliseconds) {
    const ms = Number(milliseconds);
    if (!(ms >= 0)) throw gasError('Invalid argument: milliseconds');
    if (ms > 300000) throw gasError('Invalid argument: milliseconds (at most 300000)');
    Atomics.wait(sleeper, 0, 0, ms);
  },
  getUuid: () => randomUUID(),
  DigestAlgorithm: { MD2: 'md2', MD5: 'md5', SHA_1: 'sha1', SHA_256: 'sha256', SHA_384: 'sha384', SHA_512: 'sha512' },
  Charset: { UTF_8: 'utf8', US_ASCII: 'ascii' },
  computeDigest(algorithm, value, charset) {
    const data = typeof value === 'string' ? Buffer.from(value, charset === 'ascii' ? 'ascii' : 'utf8') : Buffer.from(value.map((b) => b & 0xff));
    return [...createHash(algorithm).update(data).digest()].map((b) => (b > 127 ? b - 256 : b));
  },
  base64Encode(data) {
    return (typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data.map((b) => b & 0xff))).toString('base64');
  },
  formatDate(date, tz, format) {
    const parts = Object.fromEntries(
      new Intl.DateTimeFormat('en-CA', { timeZone: tz, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' })
        .formatToParts(date)
        .map((p) => [p.type, p.value]),
    );
    return format
      .replace(/yyyy/g, parts.year)
      .replace(/MM/g, parts.month)
      .replace(/dd/g, parts.day)
      .replace(/HH/g, parts.hour)
      .replace(/mm/g, parts.minute)
      .replace(/ss/g, parts.second);
  },
};

// getScriptTimeZone: the project's time zone (appsscript.json's timeZone); a library's is its own.
function session(zone) {
  return {
    getTemporaryActiveUserKey: () => userKey,
    getScriptTimeZone: () => zone,
    getActiveUser: () => ({ getEmail: () => '' }),
    getEffectiveUser: () => ({ getEmail: () => 'script-owner@example.com' }),
  };
}
const Session = session(timeZone);

function record(kind) {
  return (...values) => logs.push(`${kind}: ${values.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(' ')}`);
}

const MailApp = {
  // sendEmail(recipient, subject, body[, options]) or sendEmail({to, subject, body, …}).
  sendEmail(...a) {
    const mail = typeof a[0] === 'object' ? { ...a[0] } : { to: a[0], subject: a[1], body: a[2], ...(a[3] || {}) };
    rpc('mail', mail);
  },
  getRemainingDailyQuota: () => 100,
};

const ScriptApp = {
  getScriptId: () => 'test-script-id',
  newTrigger(handler) {
    const t = { handler };
    const builder = {
      timeBased: () => builder,
      everyMinutes: (n) => ((t.everyMinutes = n), builder),
      everyHours: (n) => ((t.everyHours = n), builder),
      create: () => {
        rpc('trigger', t);
        return { getHandlerFunction: () => handler, getUniqueId: () => randomUUID() };
      },
    };
    return builder;
  },
  getProjectTriggers: () => rpc('triggers', {}).map((t) => ({ getHandlerFunction: () => t.handler })),
};

function globalsOf(properties, zone) {
  return {
    UrlFetchApp,
    PropertiesService: properties,
    LockService,
    Utilities,
    Session: session(zone),
    MailApp,
    ScriptApp,
    Logger: { log: record('log') },
    console: { log: record('log'), info: record('info'), warn: record('warn'), error: record('error') },
    // A hook for tests: lets the test see (and kill) the execution at a point of its choosing.
    __testHook: (name, data) => rpc('hook', { name, data: data === undefined ? null : JSON.parse(JSON.stringify(data)) }),
  };
}
const context = vm.createContext(globalsOf(PropertiesService, timeZone));

// A library (Resources > Libraries, identifier X): its files run in a global scope of their own,
// with the library's own Script Properties and time zone; the project sees the library's
// top-level functions as X.name (not those whose name ends with "_": Apps Script keeps them
// private). Loaded before the project's files, as Apps Script does.
function loadLibrary(lib) {
  const libContext = vm.createContext(globalsOf(propertiesService('library:' + lib.identifier), lib.timeZone || timeZone));
  for (const f of lib.files) vm.runInContext(f.source, libContext, { filename: `${lib.identifier}/${f.name}` });
  const names = vm.runInContext(
    'Object.getOwnPropertyNames(globalThis).filter(function (n) { return typeof globalThis[n] === "function"; })',
    libContext,
  );
  const builtins = new Set(vm.runInContext('Object.getOwnPropertyNames(globalThis)', vm.createContext(globalsOf(PropertiesService, timeZone))));
  const exposed = {};
  for (const n of names) if (!builtins.has(n) && !n.endsWith('_')) exposed[n] = libContext[n];
  context[lib.identifier] = exposed;
}

function errorInfo(e) {
  if (e === null || typeof e !== 'object') return { name: 'Error', message: String(e) };
  return { name: e.name, message: e.message, code: e.code, status: e.status, details: e.details, stack: e.stack };
}

let outcome;
try {
  for (const lib of libraries) loadLibrary(lib);
  // The project's files share one global scope, in the order given (as Apps Script does).
  for (const f of files) vm.runInContext(f.source, context, { filename: f.name });
  const fn = vm.runInContext(entry, context);
  if (typeof fn !== 'function') throw new Error(`gas shim: ${entry} is not a function`);
  const value = fn(...args);
  outcome = { ok: true, value: value === undefined ? null : JSON.parse(JSON.stringify(value)) };
} catch (e) {
  outcome = { ok: false, error: errorInfo(e) };
}
outcome.logs = logs;
rpc('done', outcome);
