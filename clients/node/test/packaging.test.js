// The package as both kinds of caller load it, by its name: require('ichido') (CommonJS) and
// import 'ichido' (ESM) on Node 18 and 20, giving the same classes (one IchidoError for
// instanceof); no server needed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, symlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');

test("require('ichido') and import 'ichido' load the same client", () => {
  const dir = mkdtempSync(join(tmpdir(), 'ichido-node-pkg-'));
  try {
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(pkg, join(dir, 'node_modules', 'ichido'), 'dir');
    writeFileSync(join(dir, 'app.cjs'), `
      const { Ichido, IchidoError, backoffBaseMs } = require('ichido');
      const i = new Ichido({ url: 'https://ichido.example.com', token: 't', ns: 'shop' });
      let code = null;
      try { new Ichido({ url: 'ftp://x' }); } catch (e) { code = e instanceof IchidoError && e.code; }
      console.log(JSON.stringify([typeof i.once, typeof i.nextNumber, backoffBaseMs(1), code, require('ichido').default === Ichido]));
    `);
    writeFileSync(join(dir, 'app.mjs'), `
      import { createRequire } from 'node:module';
      import Default, { Ichido, IchidoError } from 'ichido';
      const cjs = createRequire(import.meta.url)('ichido');
      console.log(JSON.stringify([Ichido === cjs.Ichido, IchidoError === cjs.IchidoError, Default === Ichido]));
    `);
    const c = spawnSync(process.execPath, ['app.cjs'], { cwd: dir, encoding: 'utf8' });
    assert.equal(c.status, 0, c.stderr);
    assert.deepEqual(JSON.parse(c.stdout), ['function', 'function', 1000, 'invalid_argument', true]);
    const m = spawnSync(process.execPath, ['app.mjs'], { cwd: dir, encoding: 'utf8' });
    assert.equal(m.status, 0, m.stderr);
    assert.deepEqual(JSON.parse(m.stdout), [true, true, true]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
