// ichido for Node.js (18+): sequential numbers, locks and exactly-once processing over ichido's
// HTTP API. No dependencies (global fetch). The implementation is this CommonJS module
// (require('ichido')); index.js is the ESM entry (import … from 'ichido'), which re-exports these
// same classes, so both kinds of caller share one IchidoError. See README.md and index.d.cts.
//
// Retry rule (docs/decisions/081): calls that are safe to repeat are retried when no answer came,
// or on 503/429/502/504, waiting min(5 s, 0.5 s × (1 + n²)) × a random factor in [0.5, 1] before
// the n-th retry (longer if the server asks with Retry-After), re-sending the same key, token or
// request_id. Other 4xx/5xx answers are thrown at once as IchidoError. Every request has a timeout.
'use strict';
const { randomUUID } = require('node:crypto');
const { hostname } = require('node:os');

class IchidoError extends Error {
  // code: the API's error code ("counter_exhausted", "stale_token", …) or one of this client's:
  //   "lock_timeout", "in_progress", "dead", "lock_lost", "complete_unconfirmed",
  //   "unreachable", "bad_answer", "invalid_argument".
  // status: the HTTP status (0 when there was no answer). details: the error's details object.
  constructor(code, message, { status = 0, details = {}, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'IchidoError';
    this.code = code;
    this.status = status;
    this.details = details;
  }
}

const RETRYABLE_STATUS = new Set([429, 502, 503, 504]);

// The wait before the n-th retry (n = 0, 1, …), without jitter: 500, 1000, 2500, 5000, 5000 … ms.
function backoffBaseMs(n) {
  return Math.min(5000, 500 * (1 + n * n));
}

function jittered(n) {
  const base = backoffBaseMs(n);
  return Math.round(base / 2 + Math.random() * (base / 2));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function checkName(what, value) {
  if (typeof value !== 'string' || !/^[A-Za-z0-9._-]{1,128}$/.test(value) || value === '.' || value === '..') {
    throw new IchidoError('invalid_argument', `${what} must be 1-128 characters of A-Z a-z 0-9 . _ - (got ${JSON.stringify(value)})`);
  }
}

function checkKey(what, value) {
  if (typeof value !== 'string' || value.length === 0) {
    throw new IchidoError('invalid_argument', `${what} must be a non-empty string that names the item (got ${JSON.stringify(value)})`);
  }
}

class Ichido {
  // options: url (default $ICHIDO_URL), token ($ICHIDO_TOKEN), ns ($ICHIDO_NS, else "default"),
  // owner (default HOST:PID), timeoutMs per request (30000, plus the wait of a waiting call),
  // maxAttempts (4, the first included), fetch (globalThis.fetch), onRetry(info) (called before
  // each retry with {call, attempt, delayMs, reason}).
  constructor(options = {}) {
    const env = (typeof process !== 'undefined' && process.env) || {};
    const url = options.url ?? env.ICHIDO_URL;
    if (!url) throw new IchidoError('invalid_argument', 'url is required (or set ICHIDO_URL), e.g. https://ichido.example.com');
    if (!/^https?:\/\//.test(url)) throw new IchidoError('invalid_argument', `url must start with http:// or https:// (got ${url})`);
    this.url = url.replace(/\/+$/, '');
    this.token = options.token ?? env.ICHIDO_TOKEN ?? '';
    this.ns = options.ns ?? env.ICHIDO_NS ?? 'default';
    checkName('ns', this.ns);
    this.owner = options.owner ?? `${hostname()}:${process.pid}`;
    this.timeoutMs = options.timeoutMs ?? 30000;
    this.maxAttempts = options.maxAttempts ?? 4;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.onRetry = options.onRetry ?? null;
    if (typeof this.fetch !== 'function') throw new IchidoError('invalid_argument', 'no fetch: Node 18 or later is required');
  }

  // --- the three calls ---------------------------------------------------------------------------

  // Issues the next number of `counter` for the item named by `key` (a form response id, an order
  // number). The same key always gets the same number back, with replayed: true. Resolves to
  // {value, formatted, period, key, replayed, issuedAt}.
  async nextNumber(counter, key, { note } = {}) {
    checkName('counter', counter);
    checkKey('key', key); // without a key a retry after a lost answer would issue a second number
    const a = await this.#call('POST', `/counters/${counter}/next`, { key, note }, { retry: true });
    if (!Number.isSafeInteger(a.value) || a.value < 0 || typeof a.formatted !== 'string') {
      throw new IchidoError('bad_answer', `the server's answer has no valid number: ${JSON.stringify(a)}`);
    }
    return { value: a.value, formatted: a.formatted, period: a.period, key: a.key, replayed: a.replayed === true, issuedAt: a.issued_at };
  }

  // Runs fn(token, {signal}) while holding lock `name`, renewing the lease every third of it, and
  // releases it afterwards. Throws IchidoError "lock_timeout" (details.holder) when the lock was not
  // acquired within waitMs, and "lock_lost" after fn when a renewal found the lease lost (signal is
  // aborted at that moment so fn can stop early). Resolves to what fn resolves to.
  async withLock(name, fn, { waitMs = 10000, leaseMs = 30000, owner } = {}) {
    checkName('lock name', name);
    const grant = await this.acquire(name, { waitMs, leaseMs, owner });
    if (!grant.acquired) {
      const h = grant.holder || {};
      throw new IchidoError('lock_timeout', `lock ${name} was not acquired within ${waitMs} ms (held by ${h.owner ?? '?'} until ${h.lease_expires_at ?? '?'})`, { status: 200, details: { holder: grant.holder ?? null } });
    }
    const keeper = this.#keepLease(leaseMs, grant.sentAt, () => this.renewLock(name, grant.token, leaseMs), 'not_holder');
    let result;
    try {
      result = await fn(grant.token, { signal: keeper.signal });
    } finally {
      keeper.stop();
      await this.release(name, grant.token).catch(() => {}); // a lost release costs the lease only
    }
    if (keeper.lost) {
      throw new IchidoError('lock_lost', `the lease of lock ${name} was lost while the work ran (${keeper.lost}); another holder may have run concurrently`, { details: { token: grant.token } });
    }
    return result;
  }

  // Runs fn({token, attempt, signal}) once for the item `key`, however often and wherever once() is
  // called for it. The first caller's result (JSON) is stored; every later call resolves to the
  // stored result without running fn. Throws IchidoError "in_progress" when another caller holds it
  // (after waitMs), "dead" when it failed too often. If fn throws, the item is failed (retryable)
  // and the error rethrown. complete is retried until the lease ends; if it still is not confirmed,
  // "complete_unconfirmed" is thrown (details: key, token, result) — fail is never sent for it.
  async once(key, fn, { leaseMs = 60000, waitMs = 0, fingerprint, owner, maxAttempts } = {}) {
    checkKey('key', key);
    const claim = await this.begin(key, { leaseMs, waitMs, fingerprint, owner, maxAttempts });
    if (claim.outcome === 'completed') return claim.result;
    if (claim.outcome === 'in_progress') {
      throw new IchidoError('in_progress', `${key} is being processed by ${claim.owner} (lease until ${claim.lease_expires_at})`, { status: 200, details: { owner: claim.owner, lease_expires_at: claim.lease_expires_at, retry_after_ms: claim.retry_after_ms } });
    }
    if (claim.outcome === 'dead') {
      throw new IchidoError('dead', `${key} failed ${claim.attempts} times (last error: ${claim.last_error}); an admin must reset it`, { status: 200, details: { attempts: claim.attempts, last_error: claim.last_error } });
    }
    if (claim.outcome !== 'acquired') throw new IchidoError('bad_answer', `unexpected begin answer: ${JSON.stringify(claim)}`);
    const keeper = this.#keepLease(leaseMs, claim.sentAt, () => this.renewOnce(key, claim.token, leaseMs), 'stale_token');
    let result;
    try {
      result = await fn({ token: claim.token, attempt: claim.attempt, signal: keeper.signal });
    } catch (err) {
      keeper.stop();
      await this.fail(key, claim.token, String(err && err.stack ? err.message : err)).catch(() => {});
      throw err;
    }
    keeper.stop();
    // Every caller gets the same thing: the JSON form of the result.
    const stored = result === undefined ? null : JSON.parse(JSON.stringify(result));
    await this.complete(key, claim.token, stored, { untilMs: keeper.leaseEnd() });
    return stored;
  }

  // The items whose holder probably crashed (processing with a lapsed lease): for a sweeper.
  async expired(limit = 100) {
    const a = await this.#call('GET', `/once?state=expired&limit=${limit}`, undefined, { retry: true });
    return a.items;
  }

  // --- the calls underneath ------------------------------------------------------------------------

  // {acquired, token, lease_expires_at, holder, replayed, sentAt}. One request_id for all retries.
  async acquire(name, { waitMs = 0, leaseMs = 30000, owner, requestId = randomUUID() } = {}) {
    checkName('lock name', name);
    const started = Date.now();
    const body = (elapsed) => ({ owner: owner ?? this.owner, wait_ms: Math.max(0, waitMs - elapsed), lease_ms: leaseMs, request_id: requestId });
    return this.#call('POST', `/locks/${name}/acquire`, body, { retry: true, extraTimeoutMs: waitMs, started });
  }

  async release(name, token) {
    return this.#call('POST', `/locks/${name}/release`, { token }, { retry: 'unchanged' });
  }

  async renewLock(name, token, leaseMs) {
    return this.#call('POST', `/locks/${name}/renew`, { token, lease_ms: leaseMs }, { retry: true });
  }

  // The begin answer plus sentAt (Date.now() when the granting request was sent).
  async begin(key, { leaseMs = 60000, waitMs = 0, fingerprint, owner, maxAttempts, requestId = randomUUID() } = {}) {
    checkKey('key', key);
    const body = (elapsed) => ({ key, owner: owner ?? this.owner, lease_ms: leaseMs, wait_ms: Math.max(0, waitMs - elapsed), fingerprint, max_attempts: maxAttempts, request_id: requestId });
    return this.#call('POST', '/once/begin', body, { retry: true, extraTimeoutMs: waitMs, started: Date.now() });
  }

  // Retried while no definitive answer came; with untilMs (a Date.now() value) until then,
  // after which IchidoError "complete_unconfirmed" is thrown.
  async complete(key, token, result, { untilMs } = {}) {
    try {
      return await this.#call('POST', '/once/complete', { key, token, result: result === undefined ? null : result }, { retry: true, untilMs });
    } catch (err) {
      if (err instanceof IchidoError && (err.status === 0 || RETRYABLE_STATUS.has(err.status))) {
        throw new IchidoError('complete_unconfirmed', `the work for ${key} succeeded but ichido did not confirm recording it (${err.message}); record it with complete(key, token, result) before the lease ends, or the item will be processed again`, { status: err.status, details: { key, token, result }, cause: err });
      }
      throw err;
    }
  }

  async fail(key, token, error, { retry = true } = {}) {
    return this.#call('POST', '/once/fail', { key, token, error: String(error).slice(0, 4000), retry }, { retry: 'unchanged' });
  }

  async renewOnce(key, token, leaseMs) {
    return this.#call('POST', '/once/renew', { key, token, lease_ms: leaseMs }, { retry: true });
  }

  async getOnce(key) {
    return this.#call('GET', `/once?key=${encodeURIComponent(key)}`, undefined, { retry: true });
  }

  async listOnce(state, limit = 100) {
    return (await this.#call('GET', `/once?state=${state}&limit=${limit}`, undefined, { retry: true })).items;
  }

  // --- plumbing --------------------------------------------------------------------------------------

  // Renews a lease every third of it until stop(); lost = why, once a renewal said `lostCode` or
  // failed until the lease ended.
  #keepLease(leaseMs, grantedAt, renew, lostCode) {
    const controller = new AbortController();
    const state = { lost: null, end: grantedAt + leaseMs, stopped: false };
    const every = Math.max(200, Math.floor(leaseMs / 3));
    let timer = null;
    const tick = async () => {
      if (state.stopped) return;
      const sent = Date.now();
      try {
        await renew();
        state.end = sent + leaseMs;
      } catch (err) {
        if ((err instanceof IchidoError && err.code === lostCode) || Date.now() >= state.end) {
          state.lost = err instanceof IchidoError ? err.code : String(err);
          controller.abort(new IchidoError('lock_lost', `lease lost: ${state.lost}`));
          return;
        }
      }
      if (!state.stopped) timer = setTimeout(tick, Math.max(50, Math.min(every, state.end - Date.now() - 50)));
    };
    timer = setTimeout(tick, every);
    return {
      signal: controller.signal,
      get lost() {
        return state.lost;
      },
      leaseEnd: () => state.end,
      stop() {
        state.stopped = true;
        clearTimeout(timer);
      },
    };
  }

  // One API call with the retry rule. body: an object, or a function of the elapsed ms (for waits).
  // retry: true (safe to repeat), 'unchanged' (only answers that say nothing changed: 503/429),
  // false. Resolves to the parsed answer (sentAt added); throws IchidoError.
  async #call(method, path, body, { retry = false, extraTimeoutMs = 0, started = Date.now(), untilMs } = {}) {
    const url = `${this.url}/v1/ns/${encodeURIComponent(this.ns)}${path}`;
    for (let attempt = 1; ; attempt++) {
      const elapsed = Date.now() - started;
      const payload = typeof body === 'function' ? body(elapsed) : body;
      const wait = typeof body === 'function' ? Math.max(0, extraTimeoutMs - elapsed) : 0;
      const sentAt = Date.now();
      let status = 0;
      let text = '';
      let retryAfterMs = 0;
      let failure = null;
      try {
        const res = await this.fetch(url, {
          method,
          headers: {
            Accept: 'application/json',
            ...(payload === undefined ? {} : { 'Content-Type': 'application/json' }),
            ...(this.token ? { Authorization: `Bearer ${this.token}` } : {}),
          },
          body: payload === undefined ? undefined : JSON.stringify(payload),
          signal: AbortSignal.timeout(this.timeoutMs + wait),
          redirect: 'manual',
        });
        status = res.status;
        text = await res.text();
        retryAfterMs = Number(res.headers.get('retry-after')) * 1000 || 0;
      } catch (err) {
        failure = err;
      }
      let answer = null;
      if (!failure) {
        try {
          answer = text ? JSON.parse(text) : null;
        } catch {
          answer = null;
        }
        if (status >= 200 && status < 300) {
          if (answer === null || typeof answer !== 'object') {
            throw new IchidoError('bad_answer', `HTTP ${status} from ${url} is not JSON; is the url an ichido server?`, { status });
          }
          return Object.defineProperty(answer, 'sentAt', { value: sentAt, enumerable: false });
        }
      }
      const transient = failure !== null || RETRYABLE_STATUS.has(status);
      const mayRetry = retry === true ? transient : retry === 'unchanged' ? status === 503 || status === 429 : false;
      let delay = Math.max(jittered(attempt - 1), retryAfterMs);
      let inTime = attempt < this.maxAttempts;
      if (untilMs !== undefined) {
        // Until a deadline (the lease end): the last try goes just before it.
        const left = untilMs - Date.now();
        inTime = left > 100;
        delay = Math.min(delay, left - 100);
      }
      const reason = failure ? describe(failure, url) : `HTTP ${status}`;
      if (mayRetry && inTime) {
        if (this.onRetry) this.onRetry({ call: `${method} ${path}`, attempt: attempt + 1, delayMs: delay, reason });
        await sleep(delay);
        continue;
      }
      if (failure) {
        throw new IchidoError('unreachable', `no answer from ichido for ${method} ${path} after ${attempt} attempt(s): ${reason}`, { status: 0, cause: failure });
      }
      const e = answer && answer.error && typeof answer.error === 'object' ? answer.error : null;
      throw new IchidoError(e ? e.code : `http_${status}`, e ? e.message : `HTTP ${status}: ${text.slice(0, 200)}`, { status, details: (e && e.details) || {} });
    }
  }
}

function describe(err, url) {
  if (err && (err.name === 'TimeoutError' || err.name === 'AbortError')) return `timed out (${url})`;
  const cause = err && err.cause;
  return cause && cause.code ? `${cause.code} (${url})` : String(err && err.message ? err.message : err);
}

module.exports = { Ichido, IchidoError, backoffBaseMs };
module.exports.default = Ichido;
