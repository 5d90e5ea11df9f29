// The dashboard's only way to the server: same-origin fetch with the pasted token.
// The token lives in sessionStorage (this tab only; gone when the tab closes), never in
// localStorage or a cookie, so no other site can make the browser send it.
import { t } from './i18n.js';

const KEY = 'ichido.token';

export function token() {
  try { return sessionStorage.getItem(KEY) || ''; } catch (e) { return ''; }
}
export function setToken(t) {
  try {
    if (t) sessionStorage.setItem(KEY, t); else sessionStorage.removeItem(KEY);
  } catch (e) { /* storage disabled: the token lasts until reload */ }
}

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }
}

// Calls the API; resolves with the parsed JSON of a 2xx answer, rejects with ApiError otherwise.
export async function call(method, path, body) {
  return (await send(method, path, body)).body;
}

// As call(), resolving with { status, body } (e.g. 201 created / 200 already there).
export async function send(method, path, body) {
  const headers = { 'Accept': 'application/json' };
  const tok = token();
  if (tok) headers['Authorization'] = 'Bearer ' + tok;
  const init = { method, headers, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'unreachable', t('unreachable', { message: e.message }));
  }
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
  if (res.ok) return { status: res.status, body: json === null ? text : json };
  const err = json && json.error ? json.error : {};
  throw new ApiError(res.status, err.code || String(res.status), err.message || res.statusText,
                     err.details);
}

// Prometheus text (for the live figures): the plain text body.
export async function metricsText() {
  const headers = {};
  const tok = token();
  if (tok) headers['Authorization'] = 'Bearer ' + tok;
  let res;
  try {
    res = await fetch('/metrics', { headers, cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    throw new ApiError(0, 'unreachable', t('unreachable', { message: e.message }));
  }
  if (!res.ok) throw new ApiError(res.status, String(res.status), res.statusText);
  return res.text();
}

export const enc = encodeURIComponent;
export function nsPath(ns) { return '/v1/ns/' + enc(ns); }
