// The Power Automate / Power Apps custom connector (Swagger 2.0) for the once, counter and lock
// calls, generated from docs/openapi.yaml so that it never drifts from the API:
//
//   node generate.mjs check DOC CONNECTOR   the committed CONNECTOR equals what DOC gives, and
//                                           validates as Swagger 2.0 (swagger-parser, the same
//                                           validator as docs/openapi.yaml) plus the connector rules
//   node generate.mjs write DOC CONNECTOR   (re)writes CONNECTOR
//
// Run through tests/openapi/run BUILD_DIR connector|connector-write (it brings swagger-parser).
// Swagger 2.0 has no oneOf/anyOf/nullable: a oneOf of objects becomes one object with every
// branch's properties (required: those all branches require), nullable becomes x-nullable.
import SwaggerParser from '@apidevtools/swagger-parser';
import { readFileSync, writeFileSync } from 'node:fs';

// The operations a flow needs: once records keyed by the Internet message id, numbers, locks.
export const OPERATIONS = ['beginOnce', 'completeOnce', 'failOnce', 'renewOnce', 'getOnce', 'nextNumber', 'acquireLock', 'releaseLock', 'renewLock'];
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const KEEP = ['type', 'format', 'description', 'enum', 'default', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minLength', 'maxLength', 'pattern', 'minItems', 'maxItems', 'uniqueItems', 'readOnly', 'title', 'multipleOf', 'example'];

function schema2(s) {
  if (!s || typeof s !== 'object') return s;
  let out = {};
  const merged = (branches, all) => {
    const props = {};
    let required = null;
    for (const b of branches.map(schema2)) {
      if (b.type && b.type !== 'object') return b; // a oneOf of scalars: the first (never used here)
      Object.assign(props, b.properties || {});
      for (const k of Object.keys(b)) if (k !== 'properties' && k !== 'required' && !(k in out)) out[k] = b[k];
      const req = b.required || [];
      required = required === null ? req : all ? [...new Set([...required, ...req])] : required.filter((r) => req.includes(r));
    }
    out.type = 'object';
    if (Object.keys(props).length) out.properties = { ...(out.properties || {}), ...props };
    if (required && required.length) out.required = required;
    return null;
  };
  if (s.oneOf || s.anyOf) {
    const r = merged(s.oneOf || s.anyOf, false);
    if (r) return r;
  }
  if (s.allOf) {
    const r = merged(s.allOf, true);
    if (r) out = r;
  }
  for (const k of KEEP) if (s[k] !== undefined) out[k] = s[k];
  if (s.nullable === true) out['x-nullable'] = true;
  if (s.properties) {
    out.properties = { ...(out.properties || {}) };
    for (const [name, p] of Object.entries(s.properties)) out.properties[name] = schema2(p);
  }
  if (s.required && s.required.length) out.required = [...new Set([...(out.required || []), ...s.required])];
  if (s.items) out.items = schema2(s.items);
  if (s.additionalProperties !== undefined) out.additionalProperties = typeof s.additionalProperties === 'object' ? schema2(s.additionalProperties) : s.additionalProperties;
  if (out.properties && !out.type) out.type = 'object';
  return out;
}

function parameter2(p) {
  const out = { name: p.name, in: p.in, required: p.required === true };
  if (p.description) out.description = p.description;
  Object.assign(out, schema2(p.schema || { type: 'string' }));
  delete out['x-nullable'];
  if (p.name === 'ns') out['x-ms-summary'] = 'Namespace';
  return out;
}

export async function generate(docPath) {
  const doc = await SwaggerParser.dereference(docPath);
  const paths = {};
  const found = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const m of METHODS) {
      const op = item[m];
      if (!op || !OPERATIONS.includes(op.operationId)) continue;
      found.push(op.operationId);
      const o = { operationId: op.operationId, summary: op.summary.replace(/`/g, '').slice(0, 80), description: op.description || op.summary };
      const params = [...(item.parameters || []), ...(op.parameters || [])].map(parameter2);
      const body = op.requestBody && op.requestBody.content['application/json'];
      if (body) params.push({ name: 'body', in: 'body', required: op.requestBody.required === true, schema: schema2(body.schema) });
      o.parameters = params;
      o.responses = {};
      for (const [status, r] of Object.entries(op.responses)) {
        const res = { description: r.description };
        const c = r.content && r.content['application/json'];
        if (c && c.schema) res.schema = schema2(c.schema);
        if (r.headers) {
          res.headers = {};
          for (const [h, v] of Object.entries(r.headers)) res.headers[h] = { description: v.description, ...schema2(v.schema) };
        }
        o.responses[status] = res;
      }
      (paths[path] ||= {})[m] = o;
    }
  }
  const missing = OPERATIONS.filter((id) => !found.includes(id));
  if (missing.length) throw new Error(`docs/openapi.yaml has no operation ${missing.join(', ')}`);
  return {
    swagger: '2.0',
    info: {
      title: 'ichido',
      version: doc.info.version,
      description: 'Once records, sequential numbers and locks from ichido (generated from docs/openapi.yaml by clients/power-automate/generate.mjs). Set the host to your ichido server; the API key is "Bearer " followed by a writer token of the namespace.',
    },
    host: 'ichido.example.com',
    basePath: '/',
    schemes: ['https'],
    consumes: ['application/json'],
    produces: ['application/json'],
    securityDefinitions: { api_key: { type: 'apiKey', in: 'header', name: 'Authorization' } },
    security: [{ api_key: [] }],
    paths,
  };
}

// The connector rules beyond Swagger 2.0 itself: what Power Automate's import needs.
export function connectorRules(c) {
  const problems = [];
  const text = JSON.stringify(c);
  for (const word of ['"oneOf"', '"anyOf"', '"allOf"', '"nullable"', '"$ref"', '"requestBody"', '"components"']) {
    if (text.includes(word)) problems.push(`${word} is not Swagger 2.0 as Power Automate imports it`);
  }
  if (!c.host || !c.basePath || !c.schemes) problems.push('host, basePath and schemes are required');
  if (!c.securityDefinitions || !c.securityDefinitions.api_key) problems.push('the API key definition is missing');
  const ids = new Set();
  for (const [path, item] of Object.entries(c.paths)) {
    for (const [m, op] of Object.entries(item)) {
      if (!op.operationId || ids.has(op.operationId)) problems.push(`${m} ${path}: operationId missing or used twice`);
      ids.add(op.operationId);
      if (!op.summary || op.summary.length > 80) problems.push(`${m} ${path}: a summary of at most 80 characters is required`);
      if (op.parameters.filter((p) => p.in === 'body').length > 1) problems.push(`${m} ${path}: more than one body parameter`);
    }
  }
  return problems;
}

async function main() {
  const [mode, docPath, connectorPath] = process.argv.slice(2);
  if (!['check', 'write'].includes(mode) || !docPath || !connectorPath) {
    console.error('usage: node generate.mjs check|write DOC CONNECTOR');
    process.exit(2);
  }
  const generated = JSON.stringify(await generate(docPath), null, 2) + '\n';
  if (mode === 'write') {
    writeFileSync(connectorPath, generated);
  } else if (readFileSync(connectorPath, 'utf8') !== generated) {
    console.error(`${connectorPath} is not what docs/openapi.yaml gives: run tests/openapi/run BUILD_DIR connector-write`);
    process.exit(1);
  }
  const connector = JSON.parse(readFileSync(connectorPath, 'utf8'));
  await SwaggerParser.validate(structuredClone(connector)); // throws on anything Swagger 2.0 refuses
  const problems = connectorRules(connector);
  for (const p of problems) console.error(p);
  if (problems.length) process.exit(1);
  console.log(`${connectorPath}: Swagger 2.0, ${Object.values(connector.paths).flatMap(Object.keys).length} operations, valid`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
