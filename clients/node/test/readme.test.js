// The README's Node recipe, exactly as written there, imported as a module that uses the package
// `ichido` (this directory, linked into a temporary node_modules) against a live ichido.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Server, readmeRecipes } from '../../testing/harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
let server;
let dir;
before(async () => {
  server = await new Server().start();
  dir = mkdtempSync(join(tmpdir(), 'ichido-node-readme-'));
});
after(async () => {
  if (server) await server.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('README node/webhook-once: two calls for one order get one receipt number', async () => {
  const code = readmeRecipes()['node/webhook-once'];
  assert.ok(code, 'README recipe node/webhook-once is missing');
  await server.admin('PUT', '/v1/ns/readme-node/counters/receipts', { format: 'R-{seq:4}', require_key: true });
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(join(here, '..'), join(dir, 'node_modules', 'ichido'), 'dir');
  writeFileSync(join(dir, 'webhook.mjs'), code);
  process.env.ICHIDO_URL = server.url;
  process.env.ICHIDO_TOKEN = await server.token('writer', 'readme-node');
  process.env.ICHIDO_NS = 'readme-node';
  const { onOrderPaid } = await import(pathToFileURL(join(dir, 'webhook.mjs')).href);
  const [a, b] = await Promise.all([onOrderPaid({ id: 42 }), onOrderPaid({ id: 42 })]);
  assert.deepEqual(a, { receipt: 'R-0001' });
  assert.deepEqual(b, a);
  assert.deepEqual(await onOrderPaid({ id: 43 }), { receipt: 'R-0002' });
  assert.deepEqual(await onOrderPaid({ id: 42 }), { receipt: 'R-0001' });
});
