// docs/openapi.yaml checked two ways (docs/decisions/110-contract-testing.md):
//
//   node check.mjs lint DOC
//     The document through @apidevtools/swagger-parser (YAML syntax, duplicate keys, the OpenAPI
//     3.0 schema, $refs, path parameters), then the project's own rules (lintRules below): every
//     operation has an operationId and a success answer, every route that can answer 401, 403,
//     413 or 503 says so, every answer with a body says its content type and schema.
//
//   node check.mjs contract DOC DIR [--min-operations N|all]
//     Every exchange recorded in DIR/*.jsonl (ichido's ICHIDO_CONTRACT_LOG, src/http/contract_log.h)
//     checked against the document: the path matched against the document's path templates
//     (and against the route the server matched, when it did), the method, the status (an answer
//     whose status the operation does not list fails, unless it is one of `x-ichido-any-request`),
//     the Content-Type, the headers that matter (Retry-After, Allow, WWW-Authenticate, ETag: each
//     one sent must be documented, each documented `required` one must be sent), and the JSON body
//     against the schema (ajv), with no field the schema does not name. Prints the coverage:
//     exchanges, operations seen, operations never seen.
//
// Exit status 0 when everything holds, 1 with one line per failure otherwise, 2 on bad usage.
import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];
// Response headers a client acts on: each one sent must be in the document.
const HEADERS_THAT_MATTER = ['retry-after', 'allow', 'www-authenticate', 'etag'];

export async function loadDocument(docPath) {
  // validate() parses (duplicate keys are errors), checks the OpenAPI schema and the $refs, and
  // answers the dereferenced document.
  return SwaggerParser.validate(docPath);
}

function operations(doc) {
  const out = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const m of METHODS) if (item[m]) out.push({ path, method: m, op: item[m] });
  }
  return out;
}

function hasAuth(doc, op) {
  const sec = op.security ?? doc.security ?? [];
  return sec.some((req) => Object.keys(req).length > 0);
}

// The project's rules, beyond what the OpenAPI schema says.
export function lintRules(doc) {
  const problems = [];
  const ids = new Map();
  for (const { path, method, op } of operations(doc)) {
    const where = `${method.toUpperCase()} ${path}`;
    if (!op.operationId) problems.push(`${where}: no operationId (generators name methods by it)`);
    else if (ids.has(op.operationId)) problems.push(`${where}: operationId ${op.operationId} also used by ${ids.get(op.operationId)}`);
    else ids.set(op.operationId, where);
    const statuses = Object.keys(op.responses ?? {});
    if (!statuses.some((s) => /^[23]/.test(s))) problems.push(`${where}: no 2xx or 3xx answer`);
    const need = (status, why) => {
      if (!op.responses[status]) problems.push(`${where}: can answer ${status} (${why}) but does not say so`);
    };
    // Every answer can be 503 too_many_connections; every store-backed one store_unavailable.
    need('503', 'too_many_connections, store_unavailable');
    if (hasAuth(doc, op)) need('401', 'it needs a token');
    const anyScope = op['x-ichido-any-scope'] === true;
    if (path.startsWith('/v1/') && !anyScope) need('403', 'role or namespace scope');
    if (op.requestBody) need('413', 'it takes a body');
    if (op['x-ichido-role'] === 'admin' && !path.startsWith('/v1/')) problems.push(`${where}: admin outside /v1`);
    for (const [status, res] of Object.entries(op.responses)) {
      if (!res.description) problems.push(`${where} ${status}: no description`);
      for (const [type, media] of Object.entries(res.content ?? {})) {
        if (!media.schema) problems.push(`${where} ${status} ${type}: no schema`);
      }
      if (status !== '304' && status !== '204' && !res.content) {
        problems.push(`${where} ${status}: no content (every ichido answer but 304 has a body)`);
      }
    }
  }
  return problems;
}

// --- JSON Schema from OpenAPI 3.0 schema objects -------------------------------------------

// OpenAPI 3.0's `nullable: true` as JSON Schema: {anyOf: [{type: 'null'}, the schema]}. Works on
// the dereferenced document (shared objects are converted once; cycles are kept).
function toJsonSchema(schema, seen = new Map()) {
  if (schema === null || typeof schema !== 'object') return schema;
  if (seen.has(schema)) return seen.get(schema);
  if (Array.isArray(schema)) {
    const out = [];
    seen.set(schema, out);
    for (const s of schema) out.push(toJsonSchema(s, seen));
    return out;
  }
  const out = {};
  seen.set(schema, out);
  for (const [k, v] of Object.entries(schema)) {
    if (k === 'nullable' || k === 'example' || k === 'examples' || k.startsWith('x-')) continue;
    if (k === 'properties') {
      out.properties = {};
      for (const [name, s] of Object.entries(v)) out.properties[name] = toJsonSchema(s, seen);
    } else if (k === 'enum' || k === 'required' || k === 'default') {
      out[k] = v;
    } else {
      out[k] = toJsonSchema(v, seen);
    }
  }
  if (schema.nullable === true) return { anyOf: [{ type: 'null' }, out] };
  return out;
}

// Fields the schema does not name: every object in `value` whose schema lists properties (through
// allOf/anyOf/oneOf) and does not allow others must not carry other keys.
function undocumentedFields(value, schema, at, out) {
  if (!schema || typeof schema !== 'object') return;
  const branches = [];
  const collect = (s) => {
    if (!s || typeof s !== 'object') return;
    branches.push(s);
    for (const k of ['allOf', 'anyOf', 'oneOf']) for (const b of s[k] ?? []) collect(b);
  };
  collect(schema);
  if (Array.isArray(value)) {
    const items = branches.map((b) => b.items).filter(Boolean);
    value.forEach((v) => items.forEach((s) => undocumentedFields(v, s, `${at}[*]`, out)));
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const props = new Map();
  let open = false;
  let listed = false;
  for (const b of branches) {
    if (b.properties) {
      listed = true;
      for (const [k, s] of Object.entries(b.properties)) props.set(k, [...(props.get(k) ?? []), s]);
    }
    if (b.additionalProperties !== undefined && b.additionalProperties !== false) open = true;
  }
  if (!listed) return;  // a free-form object (e.g. a once result): anything goes
  for (const [k, v] of Object.entries(value)) {
    if (!props.has(k)) {
      if (!open) out.push(`${at}.${k} is not in the schema`);
      continue;
    }
    for (const s of props.get(k)) undocumentedFields(v, s, `${at}.${k}`, out);
  }
}

// --- matching an exchange to the document ----------------------------------------------------

function splitPath(target) {
  const path = target.split('?')[0];
  return path.split('/').slice(1);
}

function decode(seg) {
  try {
    return decodeURIComponent(seg);
  } catch {
    return null;
  }
}

// The document's template for a concrete path: literal segments must be equal, {params} match any
// non-empty segment; among several matches the one with the most literal segments wins (as in the
// router, where /v1/whoami is matched before /{file}).
export function matchTemplate(templates, target) {
  const segs = splitPath(target).map(decode);
  let best = null;
  let bestLiterals = -1;
  for (const t of templates) {
    const parts = t.split('/').slice(1);
    if (parts.length !== segs.length) continue;
    let literals = 0;
    let ok = true;
    for (let i = 0; i < parts.length; i++) {
      if (/^\{[^}]+\}$/.test(parts[i])) {
        if (segs[i] === null || segs[i] === '') ok = false;
      } else if (parts[i] === segs[i]) {
        literals++;
      } else {
        ok = false;
      }
      if (!ok) break;
    }
    if (ok && literals > bestLiterals) {
      best = t;
      bestLiterals = literals;
    }
  }
  return best;
}

export class ContractChecker {
  constructor(doc) {
    this.doc = doc;
    this.templates = Object.keys(doc.paths);
    this.ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true });
    addFormats(this.ajv);
    this.ajv.addFormat('int64', { type: 'number', validate: (n) => Number.isInteger(n) });
    this.ajv.addFormat('int32', { type: 'number', validate: (n) => Number.isInteger(n) && Math.abs(n) < 2 ** 31 });
    this.validators = new Map();
    this.converted = new Map();
    this.anyRequest = doc['x-ichido-any-request'] ?? {};
    this.seen = new Map();  // "METHOD template" -> Set of statuses
    this.count = 0;
  }

  validator(schema) {
    if (!this.validators.has(schema)) {
      const js = toJsonSchema(schema, this.converted);
      this.validators.set(schema, { fn: this.ajv.compile(js), js });
    }
    return this.validators.get(schema);
  }

  // The problems of one exchange (empty when the document describes it).
  check(ex) {
    this.count++;
    const problems = [];
    const method = (ex.method ?? '').toLowerCase();
    let template = null;
    let op = null;
    if (ex.target) template = matchTemplate(this.templates, ex.target);
    // Problems name the template, not the concrete path, so that one defect is one line.
    const where = `${ex.method || '(no request line)'} ${template ?? ex.target ?? ''} -> ${ex.status}`;
    if (ex.target) {
      if (ex.route && !this.doc.paths[ex.route]) {
        problems.push(`${where}: served by route ${ex.route}, which the document does not have`);
      } else if (ex.route && template !== ex.route) {
        problems.push(`${where}: served by route ${ex.route} but the document matches ${template ?? 'no path'}`);
      }
      if (template) op = this.doc.paths[template][method] ?? null;
    }
    const status = String(ex.status);
    let res = op?.responses?.[status] ?? op?.responses?.[`${status[0]}XX`] ?? op?.responses?.default;
    let via = op ? `${method.toUpperCase()} ${template} ${status}` : null;
    // Only for answers given before routing: a routed answer must be under its operation.
    if (!res && !ex.route && this.anyRequest[status]) {
      res = this.anyRequest[status];
      via = `x-ichido-any-request ${status}`;
    }
    if (op) {
      const key = `${method.toUpperCase()} ${template}`;
      if (!this.seen.has(key)) this.seen.set(key, new Set());
      this.seen.get(key).add(status);
    }
    if (!res) {
      const what = op ? `${method.toUpperCase()} ${template} does not list ${status}`
        : template ? `${template} has no ${method.toUpperCase()} and the answer is not an any-request one`
          : 'no path of the document matches and the answer is not an any-request one';
      problems.push(`${where}: undocumented answer (${what})`);
      return problems;
    }
    const headers = ex.headers ?? {};
    const documented = Object.fromEntries(Object.entries(res.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
    for (const h of HEADERS_THAT_MATTER) {
      if (headers[h] !== undefined && !documented[h]) problems.push(`${where}: header ${h} is sent but ${via} does not document it`);
    }
    for (const [h, spec] of Object.entries(documented)) {
      if (headers[h] === undefined) {
        if (spec.required) problems.push(`${where}: header ${h} is required by ${via} but was not sent`);
        continue;
      }
      if (spec.schema) {
        const v = spec.schema.type === 'integer' && /^-?\d+$/.test(headers[h]) ? Number(headers[h]) : headers[h];
        const { fn } = this.validator(spec.schema);
        if (!fn(v)) problems.push(`${where}: header ${h}: ${JSON.stringify(headers[h])} ${this.ajv.errorsText(fn.errors)}`);
      }
    }
    const contentType = (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (!res.content) {
      if (ex.body_bytes > 0) problems.push(`${where}: a body of ${ex.body_bytes} bytes, but ${via} documents none`);
      return problems;
    }
    if (ex.body_bytes === 0 && ex.method === 'HEAD') return problems;
    const media = res.content[contentType] ?? res.content[`${contentType.split('/')[0]}/*`] ?? res.content['*/*'];
    if (!media) {
      problems.push(`${where}: Content-Type ${contentType || '(none)'} is not one of ${via}'s (${Object.keys(res.content).join(', ')})`);
      return problems;
    }
    if (contentType === 'application/json' || contentType.endsWith('+json')) {
      if (ex.body_truncated) return problems;
      let body;
      try {
        body = JSON.parse(ex.body ?? '');
      } catch (e) {
        problems.push(`${where}: the body is not JSON (${e.message})`);
        return problems;
      }
      if (media.schema) {
        const { fn } = this.validator(media.schema);
        if (!fn(body)) {
          for (const e of fn.errors) problems.push(`${where}: body${e.instancePath.replace(/\/\d+(?=\/|$)/g, '/*')} ${e.message} (${via}, schema ${e.schemaPath})`);
        }
        const extra = [];
        undocumentedFields(body, media.schema, 'body', extra);
        for (const e of extra) problems.push(`${where}: ${e} (${via})`);
      }
    } else if (media.schema && ex.body !== undefined) {
      const { fn } = this.validator(media.schema);
      if (!fn(ex.body)) problems.push(`${where}: body ${this.ajv.errorsText(fn.errors)} (${via})`);
    }
    return problems;
  }

  coverage() {
    const all = operations(this.doc).map(({ path, method }) => `${method.toUpperCase()} ${path}`);
    const seen = all.filter((k) => this.seen.has(k));
    const unseen = all.filter((k) => !this.seen.has(k));
    let pairs = 0;
    for (const s of this.seen.values()) pairs += s.size;
    return { operations: all.length, seen, unseen, statusPairs: pairs };
  }
}

export function readExchanges(dir) {
  const out = [];
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.jsonl')).sort()) {
    const lines = readFileSync(join(dir, f), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      try {
        out.push(JSON.parse(line));
      } catch (e) {
        // A server killed mid-write (kill -9 tests) can leave its last line cut short.
        if (i !== lines.length - 1 && !(i === lines.length - 2 && lines[lines.length - 1] === '')) {
          throw new Error(`${f}:${i + 1}: not JSON (${e.message})`);
        }
      }
    });
  }
  return out;
}

async function main(argv) {
  const [mode, docPath, dir, ...rest] = argv;
  if (mode === 'lint' && docPath) {
    let doc;
    try {
      doc = await loadDocument(docPath);
    } catch (e) {
      console.error(`${docPath}: ${e.message}`);
      return 1;
    }
    const problems = lintRules(doc);
    for (const p of problems) console.error(`${docPath}: ${p}`);
    if (problems.length) return 1;
    console.log(`${docPath}: valid OpenAPI ${doc.openapi}, ${operations(doc).length} operations on ${Object.keys(doc.paths).length} paths`);
    return 0;
  }
  if (mode === 'contract' && docPath && dir) {
    let minOps = 0;
    for (let i = 0; i < rest.length; i++) if (rest[i] === '--min-operations') minOps = rest[++i];
    const doc = await loadDocument(docPath);
    const checker = new ContractChecker(doc);
    const exchanges = readExchanges(dir);
    const failures = new Map();  // one line per distinct problem, with a count
    const example = new Map();  // problem -> the first target that showed it
    for (const ex of exchanges) {
      for (const p of checker.check(ex)) {
        failures.set(p, (failures.get(p) ?? 0) + 1);
        if (!example.has(p)) example.set(p, ex.target || '(none)');
      }
    }
    const cov = checker.coverage();
    if (minOps === 'all') minOps = cov.operations;
    minOps = Number(minOps);
    console.log(`${exchanges.length} exchanges; ${cov.seen.length} of ${cov.operations} operations seen, ${cov.statusPairs} operation+status pairs`);
    for (const [op, statuses] of [...checker.seen].sort()) console.log(`  ${op}: ${[...statuses].sort().join(' ')}`);
    if (cov.unseen.length) console.log(`never seen: ${cov.unseen.join(', ')}`);
    for (const [p, n] of failures) console.error(`${p}  [x${n}, e.g. ${example.get(p)}]`);
    if (cov.seen.length < minOps) {
      console.error(`only ${cov.seen.length} operations were exercised, fewer than --min-operations ${minOps}: are the tests still recording (ICHIDO_CONTRACT_LOG)?`);
      return 1;
    }
    return failures.size ? 1 : 0;
  }
  console.error('usage: check.mjs lint DOC | check.mjs contract DOC DIR [--min-operations N]');
  return 2;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await main(process.argv.slice(2));
}
