// The checker (check.mjs) must find what it exists to find: each case below is an answer the
// document does not describe, and the checker has to say so. Run by tests/openapi/run selftest.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ContractChecker, loadDocument, lintRules, matchTemplate } from './check.mjs';

const DOC = process.env.ICHIDO_OPENAPI;
const doc = await loadDocument(DOC);

const JSON_HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store' };
const NEXT = {
  method: 'POST', target: '/v1/ns/shop/counters/receipts/next', route: '/v1/ns/{ns}/counters/{name}/next',
  status: 200, headers: JSON_HEADERS,
};
const nextBody = { value: 1, formatted: 'R-0001', period: '', key: 'k', replayed: false, issued_at: '2026-04-01T09:30:00.123Z' };
const ex = (over, body) => {
  const e = { ...NEXT, ...over };
  if (body !== undefined) {
    e.body = typeof body === 'string' ? body : JSON.stringify(body);
    e.body_bytes = Buffer.byteLength(e.body);
  } else {
    e.body_bytes = 0;
  }
  return e;
};
const problems = (e) => new ContractChecker(doc).check(e);
const fails = (e, pattern) => {
  const p = problems(e);
  assert.ok(p.some((x) => pattern.test(x)), `expected a problem matching ${pattern}, got ${JSON.stringify(p)}`);
};

test('a documented answer passes', () => {
  assert.deepEqual(problems(ex({}, nextBody)), []);
  const err = { error: { code: 'counter_not_found', message: 'm', details: {} } };
  assert.deepEqual(problems(ex({ status: 404 }, err)), []);
  assert.deepEqual(problems(ex({ status: 503, headers: { ...JSON_HEADERS, 'retry-after': '1' } },
    { error: { code: 'store_unavailable', message: 'm', details: {} } })), []);
});

test('a status the operation does not list fails', () => {
  fails(ex({ status: 418 }, { error: { code: 'internal', message: 'm', details: {} } }), /undocumented answer.*does not list 418/);
});

test('a routed answer is not excused by x-ichido-any-request', () => {
  // GET /v1/whoami lists no 400; the any-request 400 is only for answers that were not routed.
  fails({ method: 'GET', target: '/v1/whoami', route: '/v1/whoami', status: 400, headers: JSON_HEADERS,
    body: '{"error":{"code":"invalid_request","message":"m","details":{}}}', body_bytes: 10 }, /does not list 400/);
});

test('a field of the wrong type, a missing field and an undocumented field fail', () => {
  fails(ex({}, { ...nextBody, value: '1' }), /body\/value must be integer/);
  const { issued_at, ...missing } = nextBody;
  fails(ex({}, missing), /must have required property 'issued_at'/);
  fails(ex({}, { ...nextBody, surprise: true }), /body\.surprise is not in the schema/);
  fails(ex({ status: 404 }, { error: { code: 'no_such_code', message: 'm', details: {} } }), /code must be equal to one of the allowed values/);
});

test('headers that matter: undocumented ones and missing required ones fail', () => {
  fails(ex({ headers: { ...JSON_HEADERS, 'retry-after': '3' } }, nextBody), /header retry-after is sent but/);
  fails(ex({ status: 503 }, { error: { code: 'store_unavailable', message: 'm', details: {} } }), /header retry-after is required/);
  fails({ method: 'GET', target: '/v1/whoami', route: '', status: 401, headers: JSON_HEADERS,
    body: '{"error":{"code":"unauthenticated","message":"m","details":{}}}', body_bytes: 10 }, /header www-authenticate is required/);
});

test('a content type the answer does not document fails, and so does a body that is not JSON', () => {
  fails(ex({ headers: { 'content-type': 'text/plain' } }, 'R-0001'), /Content-Type text\/plain is not one of/);
  fails(ex({}, '{"value":'), /the body is not JSON/);
});

test('a path the document does not have, and a route it does not have, fail', () => {
  fails({ method: 'GET', target: '/v1/ns/a/gadgets', route: '/v1/ns/{ns}/gadgets', status: 200, headers: JSON_HEADERS, body: '{}', body_bytes: 2 },
    /served by route \/v1\/ns\/\{ns\}\/gadgets, which the document does not have/);
  fails({ method: 'GET', target: '/v1/ns/a/gadgets', route: '', status: 200, headers: JSON_HEADERS, body: '{}', body_bytes: 2 },
    /undocumented answer \(no path of the document matches/);
});

test('templates match like the router: literal segments first, percent-decoded segments', () => {
  const t = Object.keys(doc.paths);
  assert.equal(matchTemplate(t, '/v1/whoami'), '/v1/whoami');
  assert.equal(matchTemplate(t, '/app.js'), '/{file}');
  assert.equal(matchTemplate(t, '/v1/ns/a%2Fb/counters/c?x=1'), '/v1/ns/{ns}/counters/{name}');
  assert.equal(matchTemplate(t, '/v1/ns/a/counters/c/next/more'), null);
});

test('lint: the document is clean, and a missing 401/403/413/503 is reported', () => {
  assert.deepEqual(lintRules(doc), []);
  const op = doc.paths['/v1/ns/{ns}/counters/{name}/next'].post;
  const stripped = structuredClone({ ...doc, paths: { '/v1/ns/{ns}/counters/{name}/next': { post: op } } });
  const r = stripped.paths['/v1/ns/{ns}/counters/{name}/next'].post.responses;
  for (const s of ['401', '403', '413', '503']) delete r[s];
  const p = lintRules(stripped);
  for (const s of ['401', '403', '413', '503']) assert.ok(p.some((x) => x.includes(`can answer ${s}`)), `${s}: ${p}`);
});

test('lint and contract through the command line: a duplicate key fails, a bad answer exits 1', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ichido-openapi-selftest-'));
  try {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'openapi: 3.0.3\ninfo: {title: t, version: "1"}\npaths: {}\ncomponents:\n  schemas:\n    A: {type: object}\n    A: {type: string}\n');
    const lint = spawnSync(process.execPath, ['check.mjs', 'lint', bad], { encoding: 'utf8' });
    assert.equal(lint.status, 1);
    assert.match(lint.stderr, /duplicated mapping key/);
    writeFileSync(join(dir, 'exchanges-1.jsonl'), JSON.stringify(ex({}, { ...nextBody, surprise: 1 })) + '\n');
    const contract = spawnSync(process.execPath, ['check.mjs', 'contract', DOC, dir], { encoding: 'utf8' });
    assert.equal(contract.status, 1);
    assert.match(contract.stderr, /surprise is not in the schema/);
    const few = spawnSync(process.execPath, ['check.mjs', 'contract', DOC, dir, '--min-operations', 'all'], { encoding: 'utf8' });
    assert.match(few.stderr, /only 1 operations were exercised/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
