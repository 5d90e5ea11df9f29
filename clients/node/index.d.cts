// Types of the ichido client for Node.js: require("ichido") (index.cjs); index.d.ts gives the same to import.

/** Every failure is an IchidoError; branch on `code`. */
export declare class IchidoError extends Error {
  name: 'IchidoError';
  /**
   * The API's error code ("counter_not_found", "counter_exhausted", "stale_token",
   * "fingerprint_mismatch", "forbidden", …) or one of this client's:
   * "lock_timeout" | "in_progress" | "dead" | "lock_lost" | "complete_unconfirmed" |
   * "unreachable" | "bad_answer" | "invalid_argument".
   */
  code: string;
  /** HTTP status of the answer; 0 when no answer came. */
  status: number;
  /** The error's details (e.g. `field` for invalid_request, `holder` for lock_timeout). */
  details: Record<string, unknown>;
  constructor(code: string, message: string, init?: { status?: number; details?: Record<string, unknown>; cause?: unknown });
}

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface IchidoOptions {
  /** Base URL, e.g. "https://ichido.example.com" (default: $ICHIDO_URL). */
  url?: string;
  /** Bearer token (default: $ICHIDO_TOKEN). A writer token of the namespace is enough. */
  token?: string;
  /** Namespace (default: $ICHIDO_NS, else "default"). */
  ns?: string;
  /** Owner shown to others and used for request_id replays (default: "HOST:PID"). */
  owner?: string;
  /** Timeout of one request in ms, on top of the wait of a waiting call (default 30000). */
  timeoutMs?: number;
  /** Attempts per call, the first included, for calls safe to repeat (default 4). */
  maxAttempts?: number;
  /** The fetch to use (default: globalThis.fetch). */
  fetch?: typeof fetch;
  /** Called before each retry. */
  onRetry?: (info: { call: string; attempt: number; delayMs: number; reason: string }) => void;
}

export interface IssuedNumber {
  value: number;
  formatted: string;
  /** "" for counters without periods, "2026", "2026-04", "2026-04-01". */
  period: string;
  key: string;
  /** True when this key had been given this number before (a retry or a re-run). */
  replayed: boolean;
  issuedAt: string;
}

export interface LockOptions {
  /** How long to wait for the lock (default 10000, at most 300000). */
  waitMs?: number;
  /** Lease, renewed every third of it while fn runs (default 30000, 1000..3600000). */
  leaseMs?: number;
  owner?: string;
}

export interface OnceOptions {
  /** Lease, renewed every third of it while fn runs (default 60000, 1000..3600000). */
  leaseMs?: number;
  /** Wait up to this long (ms, ≤ 300000) for another holder to finish (default 0). */
  waitMs?: number;
  /** A digest of the item's content: the same key with other content is refused. */
  fingerprint?: string;
  owner?: string;
  /** Attempts before the item is dead, when the record is created (server default 5). */
  maxAttempts?: number;
}

export interface OnceContext {
  token: number;
  attempt: number;
  /** Aborted when the lease was found lost (another caller may take the item over). */
  signal: AbortSignal;
}

export interface LockGrant {
  acquired: boolean;
  token?: number;
  lease_expires_at?: string;
  holder?: { owner: string; lease_expires_at: string } | null;
  replayed?: boolean;
  /** Date.now() when the request that got this answer was sent. */
  readonly sentAt: number;
}

export type BeginAnswer =
  | { outcome: 'acquired'; token: number; attempt: number; lease_expires_at: string; replayed?: boolean; readonly sentAt: number }
  | { outcome: 'in_progress'; owner: string; lease_expires_at: string; retry_after_ms: number; readonly sentAt: number }
  | { outcome: 'completed'; result: Json; completed_at: string; readonly sentAt: number }
  | { outcome: 'dead'; attempts: number; last_error: string; readonly sentAt: number };

export interface OnceRecord {
  key: string;
  state: 'processing' | 'pending' | 'completed' | 'dead';
  owner?: string;
  attempt?: number;
  lease_expires_at?: string;
  result?: Json;
  last_error?: string;
  [field: string]: unknown;
}

export declare class Ichido {
  constructor(options?: IchidoOptions);
  readonly url: string;
  readonly ns: string;
  readonly owner: string;

  /** The next number of `counter` for the item named by `key`; the same key gets the same number. */
  nextNumber(counter: string, key: string, options?: { note?: string }): Promise<IssuedNumber>;
  /** Runs fn while holding the lock (renewed; released afterwards). */
  withLock<T>(name: string, fn: (token: number, context: { signal: AbortSignal }) => T | Promise<T>, options?: LockOptions): Promise<T>;
  /** Runs fn once for `key`; duplicates get the stored (JSON) result. */
  once<T extends Json | void | undefined>(key: string, fn: (context: OnceContext) => T | Promise<T>, options?: OnceOptions): Promise<Json>;
  /** Items whose holder's lease lapsed (probably crashed): for a sweeper. */
  expired(limit?: number): Promise<OnceRecord[]>;

  acquire(name: string, options?: { waitMs?: number; leaseMs?: number; owner?: string; requestId?: string }): Promise<LockGrant>;
  release(name: string, token: number): Promise<{ released: boolean }>;
  renewLock(name: string, token: number, leaseMs: number): Promise<{ lease_expires_at: string }>;
  begin(key: string, options?: OnceOptions & { requestId?: string }): Promise<BeginAnswer>;
  complete(key: string, token: number, result: Json, options?: { untilMs?: number }): Promise<{ outcome: 'completed' }>;
  fail(key: string, token: number, error: unknown, options?: { retry?: boolean }): Promise<{ outcome: 'pending' | 'dead' }>;
  renewOnce(key: string, token: number, leaseMs: number): Promise<{ lease_expires_at: string }>;
  getOnce(key: string): Promise<OnceRecord>;
  listOnce(state: 'processing' | 'expired' | 'pending' | 'completed' | 'dead', limit?: number): Promise<OnceRecord[]>;
}

/** The wait before the n-th retry without jitter: min(5000, 500 × (1 + n²)) ms. */
export declare function backoffBaseMs(n: number): number;

export default Ichido;
