// index.d.ts checked by the TypeScript compiler (--strict) against typed application code
// (types/usage.ts), including lines that must not compile. The compiler comes from npm, pinned by
// types/package-lock.json and installed here with `npm ci` (CI starts clean).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = join(dirname(fileURLToPath(import.meta.url)), 'types');

test('index.d.ts compiles with typed code using it, and refuses the mistakes it should', () => {
  const npm = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir, encoding: 'utf8', timeout: 300000 });
  assert.equal(npm.status, 0, `npm ci failed (the registry must be reachable):\n${npm.stdout}\n${npm.stderr}`);
  const tsc = spawnSync(process.execPath, [join(dir, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8', timeout: 300000 });
  assert.equal(tsc.status, 0, tsc.stdout + tsc.stderr);
});
