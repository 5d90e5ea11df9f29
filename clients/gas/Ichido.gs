/**
 * ichido for Google Apps Script — sequential numbers, locks and exactly-once processing that hold
 * across executions, triggers, AppSheet bots, users and projects. One file, no dependencies.
 *
 * Use it pasted into a project (it defines one global, Ichido), or as a library with the identifier
 * "Ichido" (the library project also holds IchidoLibrary.gs):
 *
 *   const ichido = Ichido.connect();   // ICHIDO_URL, ICHIDO_TOKEN, ICHIDO_NS from Script Properties
 *   // as a library, give it your project's properties (a library reads only its own):
 *   const ichido = Ichido.connect({properties: PropertiesService.getScriptProperties()});
 *   const n = ichido.nextNumber('receipts', 'form-' + e.response.getId());   // {value, formatted, …}
 *   ichido.withLock('ledger', function (token) { ... }, {waitMs: 10000, leaseMs: 30000});
 *   const result = ichido.once('appsheet-row-' + rowId, function () { ...; return {invoiceNo: no}; });
 *
 * Errors are IchidoError objects (name 'IchidoError') with code, status, details and message;
 * branch on e.code. Codes are the API's ("counter_exhausted", "stale_token", "forbidden", …) and
 * this client's: "lock_timeout", "lock_lost", "in_progress", "dead", "complete_unconfirmed", "unreachable",
 * "bad_answer", "invalid_argument". connect({lang: 'ja'}) (or the Script Property ICHIDO_LANG = ja)
 * makes the messages of the codes users meet most Japanese; the codes stay as they are.
 *
 * Retry rule (the same in every ichido client): no answer, 503, 429, 502 and 504 are retried for
 * calls that are safe to repeat, waiting min(5 s, 0.5 s × (1 + n²)) × [0.5, 1] before the n-th
 * retry, re-sending the same key, token or request_id; other answers are thrown at once.
 * UrlFetchApp has no timeout setting (about a minute), so one server-side wait is at most 25 s and
 * longer waits are made of several requests with the same request_id.
 *
 * Apps Script runs on Google's servers: ichido must be reachable from the internet over HTTPS
 * (see the README's deployment note). Keep the token in Script Properties, never in the code.
 */

var Ichido = (function () {
  var VERSION = '0.1.0';

  /**
   * Connects to ichido. options: {url, token, ns, owner, maxAttempts, properties, lang, timeZone};
   * url, token and ns default to the Script Properties ICHIDO_URL, ICHIDO_TOKEN and ICHIDO_NS (ns
   * else "default"), read from options.properties (a Properties store), else from this project's
   * Script Properties. Used as a library, pass {properties: PropertiesService.getScriptProperties()}:
   * a library's own PropertiesService reads the library's properties, not yours.
   * @param {Object=} options
   * @return {IchidoClient_}
   */
  function connect(options) {
    var o = options || {};
    try {
      return new IchidoClient_(o);
    } catch (e) {
      throw ichidoLocalize_(ichidoLang_(o), e);
    }
  }

  /**
   * The error every call throws. e.code says what happened; e.status is the HTTP status (0 without
   * an answer); e.details holds the error's details.
   * @constructor
   */
  function IchidoError(code, message, status, details) {
    var e = new Error(message);
    e.name = 'IchidoError';
    e.code = code;
    e.status = status || 0;
    e.details = details || {};
    Object.setPrototypeOf(e, IchidoError.prototype);
    return e;
  }
  IchidoError.prototype = Object.create(Error.prototype);
  IchidoError.prototype.constructor = IchidoError;
  IchidoError.prototype.name = 'IchidoError';

  /** The wait before the n-th retry (n = 0, 1, …) without jitter: 500, 1000, 2500, 5000 … ms. */
  function backoffBaseMs(n) {
    return Math.min(5000, 500 * (1 + n * n));
  }

  var ICHIDO_MAX_WAIT_PER_REQUEST_MS_ = 25000;
  // Apps Script stops an execution after 6 minutes. A once() claim outlives that by default, so a
  // running execution never loses its claim to a second firing; a killed one's lapses a minute after.
  var ICHIDO_EXECUTION_LIMIT_MS_ = 6 * 60 * 1000;
  var ICHIDO_ONCE_LEASE_MS_ = ICHIDO_EXECUTION_LIMIT_MS_ + 60 * 1000;

  // Japanese messages of the codes users meet most (clients/messages-ja.json).
  var ICHIDO_MESSAGES_JA_ = {
      counter_not_found: "カウンターが見つかりません。カウンター名と名前空間（ICHIDO_NS）を確認し、なければ管理者にカウンターの作成を依頼してください。",
      counter_exhausted: "カウンターが上限（max）に達したため、これ以上番号を発行できません。管理者に連絡してください。",
      key_required: "このカウンターはキーが必要です。項目を表すキー（フォームの回答 ID、注文番号など）を渡してください。",
      lock_timeout: "待ち時間のうちにロックを取得できませんでした。ほかの処理がロックを持っています。しばらくしてからもう一度実行してください。",
      in_progress: "この項目はほかの実行が処理中です。その処理が終われば、同じ結果が返ります。",
      dead: "この項目は失敗が続いたため止まっています（dead）。原因を直してから、管理者がダッシュボードでリセットしてください。",
      stale_token: "この実行のリースが切れ、ほかの実行がこの項目を引き継ぎました。この実行の結果は記録されません。",
      not_holder: "このロックはもう持っていません（リースが切れたか、解放済みです）。",
      lock_lost: "ロックを持って処理している間にリースが切れ、ほかの実行がロックを取りました。処理が重なった可能性があります。leaseMs を処理より長くするか、処理中に lock.renew() を呼んでください。",
      fingerprint_mismatch: "同じキーで内容の違う項目が送られました。キーが項目ごとに一意になっているか確認してください。",
      complete_unconfirmed: "処理は成功しましたが、ichido が完了を記録したか確かめられませんでした。二重処理を避けるため処理はやり直さず、リースが切れる前に完了を記録し直してください。",
      unreachable: "ichido に接続できませんでした。URL、ネットワーク、プロキシの設定を確認してください。もう一度実行しても二重処理にはなりません。",
      unauthenticated: "トークンがないか、正しくありません（失効している可能性があります）。ICHIDO_TOKEN を確認してください。",
      forbidden: "このトークンではこの操作はできません（ロールか名前空間が違います）。管理者にこの名前空間の writer トークンを依頼してください。",
      store_unavailable: "ichido のストアが一時的に使えません。しばらくしてからもう一度実行してください。同じキーの呼び出しは二重処理になりません。",
      invalid_argument: "引数が正しくありません。"
  };

  /** The Japanese message for an error code ("" for a code without one). */
  function messageJa(code) {
    return ICHIDO_MESSAGES_JA_.hasOwnProperty(code) ? ICHIDO_MESSAGES_JA_[code] : '';
  }

  function ichidoLang_(options) {
    if (options.lang) return String(options.lang).toLowerCase();
    var fromProps = ichidoProperty_(options.properties, 'ICHIDO_LANG');
    return fromProps ? String(fromProps).toLowerCase() : 'en';
  }

  // An IchidoError's message in Japanese ("<Japanese> (<the original message>)"), once.
  function ichidoLocalize_(lang, e) {
    if (lang === 'ja' && e && e.name === 'IchidoError' && !e.localized && messageJa(e.code)) {
      e.message = messageJa(e.code) + ' (' + e.message + ')';
      e.localized = true;
    }
    return e;
  }
  var ICHIDO_RETRYABLE_ = { 429: true, 502: true, 503: true, 504: true };

  function ichidoCheckName_(what, value) {
    if (typeof value !== 'string' || !/^[A-Za-z0-9._-]{1,128}$/.test(value) || value === '.' || value === '..') {
      throw IchidoError('invalid_argument', what + ' must be 1-128 characters of A-Z a-z 0-9 . _ - (got ' + JSON.stringify(value) + ')');
    }
  }

  function ichidoCheckKey_(what, value) {
    if (typeof value !== 'string' || value.length === 0) {
      throw IchidoError('invalid_argument', what + ' must be a non-empty string that names the item (got ' + JSON.stringify(value) + ')');
    }
  }

  function ichidoProperty_(store, name) {
    try {
      return (store || PropertiesService.getScriptProperties()).getProperty(name);
    } catch (e) {
      return null;
    }
  }

  /** @constructor */
  function IchidoClient_(options) {
    var props = options.properties;
    var url = options.url || ichidoProperty_(props, 'ICHIDO_URL');
    if (!url) {
      throw IchidoError('invalid_argument', 'set the Script Property ICHIDO_URL (Project Settings > Script Properties), e.g. https://ichido.example.com, or pass {url}; ' +
        'used as a library, pass {properties: PropertiesService.getScriptProperties()} so that it reads your project\'s properties');
    }
    if (!/^https?:\/\//.test(url)) {
      throw IchidoError('invalid_argument', 'ICHIDO_URL must start with https:// (http:// only for a server on a trusted network: Apps Script sends the token with every call) (got ' + url + ')');
    }
    this.url = String(url).replace(/\/+$/, '');
    this.token = options.token || ichidoProperty_(props, 'ICHIDO_TOKEN') || '';
    this.ns = options.ns || ichidoProperty_(props, 'ICHIDO_NS') || 'default';
    this.lang = ichidoLang_(options);
    this.timeZone = options.timeZone || '';
    ichidoCheckName_('ns', this.ns);
    var user = '';
    try {
      user = Session.getTemporaryActiveUserKey() || '';
    } catch (e) {}
    this.owner = options.owner || 'apps-script:' + (user ? user.slice(0, 12) : 'trigger') + ':' + Utilities.getUuid().slice(0, 8);
    this.maxAttempts = options.maxAttempts || 4;
  }

  // --- the three calls ---------------------------------------------------------------------------

  /**
   * The next number of `counter` for the item named by `key` (e.g. 'form-' + response id). The
   * same key always gets the same number back, with replayed: true — after a lost answer, a re-run
   * of the trigger, a colleague running it again. Never Number(null) + 1: the number comes from
   * ichido, which refuses (counter_not_found) rather than restarting from 0.
   * @return {{value: number, formatted: string, period: string, key: string, replayed: boolean, issuedAt: string}}
   */
  IchidoClient_.prototype.nextNumber = function (counter, key, options) {
    ichidoCheckName_('counter', counter);
    ichidoCheckKey_('key', key); // without a key, a retry after a lost answer would issue a second number
    var body = { key: key };
    if (options && options.note !== undefined) body.note = options.note;
    var a = this.call_('post', '/counters/' + counter + '/next', body, { retry: true });
    if (typeof a.value !== 'number' || a.value % 1 !== 0 || a.value < 0 || typeof a.formatted !== 'string') {
      throw IchidoError('bad_answer', 'the answer has no valid number: ' + JSON.stringify(a));
    }
    return { value: a.value, formatted: a.formatted, period: a.period, key: a.key, replayed: a.replayed === true, issuedAt: a.issued_at };
  };

  /**
   * Runs fn(token, lock) holding the lock `name` and releases it in finally. options: waitMs
   * (default 10000, ≤ 300000), leaseMs (default 30000; choose it longer than the work, or call
   * lock.renew() during long work), owner. Throws IchidoError 'lock_timeout' (details.holder) when
   * the lock was not acquired within waitMs, and 'lock_lost' (details.token) after fn returned
   * when the lease had lapsed and another execution took the lock meanwhile: the work may have
   * overlapped with that execution's. Returns what fn returns.
   */
  IchidoClient_.prototype.withLock = function (name, fn, options) {
    ichidoCheckName_('lock name', name);
    var o = options || {};
    var waitMs = o.waitMs === undefined ? 10000 : o.waitMs;
    var leaseMs = o.leaseMs === undefined ? 30000 : o.leaseMs;
    var grant = this.acquire(name, { waitMs: waitMs, leaseMs: leaseMs, owner: o.owner });
    if (!grant.acquired) {
      var h = grant.holder || {};
      throw IchidoError('lock_timeout', 'lock ' + name + ' was not acquired within ' + waitMs + ' ms (held by ' + (h.owner || '?') + ' until ' + (h.lease_expires_at || '?') + ')', 200, { holder: grant.holder || null });
    }
    var self = this;
    var lock = {
      token: grant.token,
      renew: function (ms) {
        return self.renewLock(name, grant.token, ms || leaseMs);
      },
    };
    var result;
    var returned = false;
    var lost = false;
    try {
      result = fn(grant.token, lock);
      returned = true;
    } finally {
      try {
        this.release(name, grant.token);
      } catch (e) {
        // not_holder: the lease lapsed and someone else holds the lock now. Any other failure (a
        // lost answer) costs the lease only: the lock lapses and the next waiter gets it.
        lost = e && e.code === 'not_holder';
      }
    }
    if (returned && lost) {
      throw IchidoError('lock_lost', 'the lease of lock ' + name + ' (token ' + grant.token + ') lapsed during the work and another execution took the lock: the work may have overlapped with it; choose a longer leaseMs or call lock.renew()', 409, { token: grant.token });
    }
    return result;
  };

  /**
   * Runs fn(context) once for the item `key`, however often and wherever once() is called for it
   * (AppSheet firing a bot three times, a re-run, another user). The first result (JSON) is stored;
   * every later call returns the stored result without running fn. options: leaseMs (default 7
   * minutes: above Apps Script's 6-minute execution limit, so a running execution never loses its
   * claim; a killed one's lapses after it), waitMs (wait for another holder to finish,
   * default 0), fingerprint, owner, maxAttempts. context: {token, attempt, renew(ms)}.
   * Throws IchidoError 'in_progress' (another holder, after waitMs) or 'dead' (failed too often). If
   * fn throws, the item is failed (retryable) and the error rethrown. complete is retried until the
   * lease ends; if it is still unconfirmed, 'complete_unconfirmed' is thrown (details: key, token,
   * result) and fail is NOT sent: the work succeeded.
   */
  IchidoClient_.prototype.once = function (key, fn, options) {
    ichidoCheckKey_('key', key);
    var o = options || {};
    var leaseMs = o.leaseMs === undefined ? ICHIDO_ONCE_LEASE_MS_ : o.leaseMs;
    var claim = this.begin(key, { leaseMs: leaseMs, waitMs: o.waitMs || 0, fingerprint: o.fingerprint, owner: o.owner, maxAttempts: o.maxAttempts });
    if (claim.outcome === 'completed') return claim.result;
    if (claim.outcome === 'in_progress') {
      throw IchidoError('in_progress', key + ' is being processed by ' + claim.owner + ' (lease until ' + claim.lease_expires_at + ')', 200, { owner: claim.owner, lease_expires_at: claim.lease_expires_at, retry_after_ms: claim.retry_after_ms });
    }
    if (claim.outcome === 'dead') {
      throw IchidoError('dead', key + ' failed ' + claim.attempts + ' times (last error: ' + claim.last_error + '); an admin must reset it', 200, { attempts: claim.attempts, last_error: claim.last_error });
    }
    if (claim.outcome !== 'acquired') throw IchidoError('bad_answer', 'unexpected begin answer: ' + JSON.stringify(claim));
    var self = this;
    var leaseEnd = claim.sentAt + leaseMs;
    var context = {
      token: claim.token,
      attempt: claim.attempt,
      renew: function (ms) {
        var sent = Date.now();
        var r = self.renewOnce(key, claim.token, ms || leaseMs);
        leaseEnd = sent + (ms || leaseMs);
        return r;
      },
    };
    var result;
    try {
      result = fn(context);
    } catch (err) {
      try {
        this.fail(key, claim.token, err && err.message ? err.message : String(err));
      } catch (ignored) {
        // If fail's answer is lost the lease lapses and the next run retries, as fail would allow.
      }
      throw err;
    }
    // Every caller gets the same thing: the JSON form of the result.
    var stored = result === undefined ? null : JSON.parse(JSON.stringify(result));
    this.complete(key, claim.token, stored, { untilMs: leaseEnd });
    return stored;
  };

  /**
   * The items whose holder's lease lapsed without completing (an execution killed at the time limit,
   * a crash): for a time-driven sweeper trigger that alerts or re-queues them.
   * @return {Array<Object>} records with key, owner, attempt, lease_expires_at, …
   */
  IchidoClient_.prototype.expired = function (limit) {
    return this.call_('get', '/once?state=expired&limit=' + (limit || 100), undefined, { retry: true }).items;
  };

  /**
   * The items that failed too often (dead): they are not tried again until an admin resets them
   * (the dashboard's Once page, Reset; or POST .../once/reset). For the same sweeper.
   * @return {Array<Object>} records with key, attempt, last_error, …
   */
  IchidoClient_.prototype.dead = function (limit) {
    return this.listOnce('dead', limit);
  };

  /**
   * Creates the counter `name` (an admin token of the namespace): config as the API's (start, max,
   * format, period, require_key, …). A counter with a period rolls over at midnight in
   * config.timezone, which defaults to connect()'s timeZone, else the script's time zone
   * (Session.getScriptTimeZone(), appsscript.json's timeZone). The same config again answers the
   * existing counter; another config for an existing name is counter_exists.
   */
  IchidoClient_.prototype.createCounter = function (name, config) {
    ichidoCheckName_('counter', name);
    var body = JSON.parse(JSON.stringify(config || {}));
    if (body.timezone === undefined) body.timezone = this.timeZone || Session.getScriptTimeZone();
    return this.call_('put', '/counters/' + name, body, { retry: true });
  };

  /** A digest of any JSON-able value, for once({fingerprint}): "sha256:<hex>". */
  IchidoClient_.prototype.fingerprint = function (value) {
    var bytes = Utilities.computeDigest(Utilities.DigestAlgorithm.SHA_256, JSON.stringify(value), Utilities.Charset.UTF_8);
    var hex = '';
    for (var i = 0; i < bytes.length; i++) hex += ((bytes[i] + 256) % 256 + 0x100).toString(16).slice(1);
    return 'sha256:' + hex;
  };

  // --- the calls underneath ------------------------------------------------------------------------

  /** {acquired, token, lease_expires_at, holder, replayed, sentAt}; one request_id for all retries. */
  IchidoClient_.prototype.acquire = function (name, options) {
    ichidoCheckName_('lock name', name);
    var o = options || {};
    var requestId = o.requestId || Utilities.getUuid();
    var owner = o.owner || this.owner;
    var leaseMs = o.leaseMs === undefined ? 30000 : o.leaseMs;
    var self = this;
    return this.waitLoop_(o.waitMs || 0, function (wait) {
      return self.call_('post', '/locks/' + name + '/acquire', { owner: owner, wait_ms: wait, lease_ms: leaseMs, request_id: requestId }, { retry: true });
    }, function (a) {
      return a.acquired === true;
    });
  };

  IchidoClient_.prototype.release = function (name, token) {
    return this.call_('post', '/locks/' + name + '/release', { token: token }, { retry: 'unchanged' });
  };

  IchidoClient_.prototype.renewLock = function (name, token, leaseMs) {
    return this.call_('post', '/locks/' + name + '/renew', { token: token, lease_ms: leaseMs }, { retry: true });
  };

  /** The begin answer (outcome acquired/in_progress/completed/dead) plus sentAt. */
  IchidoClient_.prototype.begin = function (key, options) {
    ichidoCheckKey_('key', key);
    var o = options || {};
    var requestId = o.requestId || Utilities.getUuid();
    var body = { key: key, owner: o.owner || this.owner, lease_ms: o.leaseMs === undefined ? ICHIDO_ONCE_LEASE_MS_ : o.leaseMs, request_id: requestId };
    if (o.fingerprint !== undefined) body.fingerprint = o.fingerprint;
    if (o.maxAttempts !== undefined) body.max_attempts = o.maxAttempts;
    var self = this;
    return this.waitLoop_(o.waitMs || 0, function (wait) {
      body.wait_ms = wait;
      return self.call_('post', '/once/begin', body, { retry: true });
    }, function (a) {
      return a.outcome !== 'in_progress';
    });
  };

  /**
   * Records success. Retried while no definitive answer comes; with options.untilMs (a Date.now()
   * value, e.g. the lease end) until then, after which 'complete_unconfirmed' is thrown.
   */
  IchidoClient_.prototype.complete = function (key, token, result, options) {
    var o = options || {};
    try {
      return this.call_('post', '/once/complete', { key: key, token: token, result: result === undefined ? null : result }, { retry: true, untilMs: o.untilMs });
    } catch (err) {
      if (err && err.name === 'IchidoError' && (err.status === 0 || ICHIDO_RETRYABLE_[err.status])) {
        throw IchidoError('complete_unconfirmed', 'the work for ' + key + ' succeeded but ichido did not confirm recording it (' + err.message + '); record it with complete(key, token, result) before the lease ends, or the item will be processed again', err.status, { key: key, token: token, result: result });
      }
      throw err;
    }
  };

  IchidoClient_.prototype.fail = function (key, token, error, options) {
    var retry = !(options && options.retry === false);
    return this.call_('post', '/once/fail', { key: key, token: token, error: String(error).slice(0, 4000), retry: retry }, { retry: 'unchanged' });
  };

  IchidoClient_.prototype.renewOnce = function (key, token, leaseMs) {
    return this.call_('post', '/once/renew', { key: key, token: token, lease_ms: leaseMs }, { retry: true });
  };

  IchidoClient_.prototype.getOnce = function (key) {
    return this.call_('get', '/once?key=' + encodeURIComponent(key), undefined, { retry: true });
  };

  IchidoClient_.prototype.listOnce = function (state, limit) {
    return this.call_('get', '/once?state=' + state + '&limit=' + (limit || 100), undefined, { retry: true }).items;
  };

  // --- plumbing ------------------------------------------------------------------------------------

  // Calls send(wait) with waits of at most 25 s until done(answer) or waitMs is used up; the
  // answer carries sentAt of its request.
  IchidoClient_.prototype.waitLoop_ = function (waitMs, send, done) {
    var deadline = Date.now() + waitMs;
    for (;;) {
      var left = Math.max(0, deadline - Date.now());
      var answer = send(Math.min(left, ICHIDO_MAX_WAIT_PER_REQUEST_MS_));
      if (done(answer) || left <= ICHIDO_MAX_WAIT_PER_REQUEST_MS_) return answer;
    }
  };

  // One API call with the retry rule. opts.retry: true (safe to repeat), 'unchanged' (only 503/429,
  // answers that say nothing changed), false. Returns the parsed answer (with sentAt); throws
  // IchidoError.
  IchidoClient_.prototype.call_ = function (method, path, body, opts) {
    var url = this.url + '/v1/ns/' + encodeURIComponent(this.ns) + path;
    var params = { method: method, muteHttpExceptions: true, followRedirects: false, headers: { Accept: 'application/json' } };
    if (this.token) params.headers.Authorization = 'Bearer ' + this.token;
    if (body !== undefined) {
      params.contentType = 'application/json';
      params.payload = JSON.stringify(body);
    }
    for (var attempt = 1; ; attempt++) {
      var sentAt = Date.now();
      var res = null;
      var failure = null;
      try {
        res = UrlFetchApp.fetch(url, params);
      } catch (e) {
        failure = e; // no answer: "Address unavailable", "DNS error", "Timeout", …
      }
      var status = res ? res.getResponseCode() : 0;
      var text = res ? res.getContentText() : '';
      var answer = null;
      if (res) {
        try {
          answer = text ? JSON.parse(text) : null;
        } catch (e) {
          answer = null;
        }
        if (status >= 200 && status < 300) {
          if (answer === null || typeof answer !== 'object') {
            throw IchidoError('bad_answer', 'HTTP ' + status + ' from ' + url + ' is not JSON; is ICHIDO_URL an ichido server?', status);
          }
          answer.sentAt = sentAt;
          return answer;
        }
      }
      var transient = failure !== null || ICHIDO_RETRYABLE_[status] === true;
      var mayRetry = opts.retry === true ? transient : opts.retry === 'unchanged' ? status === 503 || status === 429 : false;
      var base = backoffBaseMs(attempt - 1);
      var delay = Math.round(base / 2 + Math.random() * (base / 2));
      var retryAfter = res ? Number(ichidoHeader_(res, 'Retry-After')) * 1000 || 0 : 0;
      delay = Math.max(delay, retryAfter);
      var inTime = attempt < this.maxAttempts;
      if (opts.untilMs !== undefined) {
        var left = opts.untilMs - Date.now();
        inTime = left > 100;
        delay = Math.min(delay, left - 100);
      }
      if (mayRetry && inTime) {
        Utilities.sleep(delay);
        continue;
      }
      if (failure) {
        throw IchidoError('unreachable', 'no answer from ichido for ' + method.toUpperCase() + ' ' + path + ' after ' + attempt + ' attempt(s): ' + (failure.message || failure), 0);
      }
      var e = answer && answer.error && typeof answer.error === 'object' ? answer.error : null;
      throw IchidoError(e ? e.code : 'http_' + status, e ? e.message : 'HTTP ' + status + ': ' + String(text).slice(0, 200), status, (e && e.details) || {});
    }
  };

  function ichidoHeader_(res, name) {
    var headers = res.getHeaders() || {};
    for (var k in headers) {
      if (k.toLowerCase() === name.toLowerCase()) return headers[k];
    }
    return null;
  }

  // Every IchidoError a client call throws, in the client's language.
  ['nextNumber', 'withLock', 'once', 'expired', 'dead', 'createCounter', 'acquire', 'release', 'renewLock', 'begin', 'complete', 'fail', 'renewOnce', 'getOnce', 'listOnce'].forEach(function (name) {
    var inner = IchidoClient_.prototype[name];
    IchidoClient_.prototype[name] = function () {
      try {
        return inner.apply(this, arguments);
      } catch (e) {
        throw ichidoLocalize_(this.lang, e);
      }
    };
  });

  return { connect: connect, IchidoError: IchidoError, backoffBaseMs: backoffBaseMs, messageJa: messageJa, VERSION: VERSION };
})();
