// The README's Apps Script recipes, exactly as written there, run in the GasRuntime shim with
// Ichido.gs against a live ichido (node --test). A recipe that stops working fails here.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Server, LossyProxy, seededRandom, flakyForKeys, readmeRecipes } from '../../testing/harness.mjs';
import { GasRuntime, ichidoGs } from '../shim/gas_runtime.mjs';

const recipes = readmeRecipes();
let server;
before(async () => {
  server = await new Server().start();
});
after(async () => {
  if (server) await server.stop();
});

const gs = (name, source) => ({ name, source });
const recipe = (name) => {
  assert.ok(recipes[name], `README recipe ${name} is missing`);
  return gs(`README ${name}`, recipes[name]);
};
const ok = (r) => {
  assert.equal(r.ok, true, JSON.stringify(r.error));
  return r.value;
};
async function props(ns) {
  return { ICHIDO_URL: server.url, ICHIDO_TOKEN: await server.token('writer', ns), ICHIDO_NS: ns };
}

test('README gas/receipt-number: 10 executions, lost answers, re-runs: one number per response', async () => {
  const ns = 'readme-forms';
  assert.equal((await server.admin('PUT', `/v1/ns/${ns}/counters/receipts`, { max: 9999, format: 'R-{seq:4}', require_key: true })).status, 201);
  const proxy = await new LossyProxy(server.port, flakyForKeys(seededRandom(11), '/counters/receipts/next')).start();
  try {
    const gas = new GasRuntime({
      files: [
        ichidoGs,
        recipe('gas/receipt-number'),
        gs('events.gs', `function submit(ids) { return ids.map(function (id) { return onFormSubmit({ response: { getId: function () { return id; } } }); }); }`),
      ],
      properties: { ...(await props(ns)), ICHIDO_URL: proxy.url },
    });
    const ids = Array.from({ length: 50 }, (_, i) => `resp-${i}`);
    const runs = await Promise.all(Array.from({ length: 10 }, (_, e) => gas.run('submit', [ids.filter((_, i) => i % 10 === e)])));
    const numbers = new Map();
    runs.forEach((r, e) => ok(r).forEach((no, k) => numbers.set(ids.filter((_, i) => i % 10 === e)[k], no)));
    assert.deepEqual([...numbers.values()].sort(), Array.from({ length: 50 }, (_, i) => `R-${String(i + 1).padStart(4, '0')}`));
    const again = ok(await gas.run('submit', [ids]));
    assert.deepEqual(again, ids.map((id) => numbers.get(id)), 'a re-run gets the same numbers');
    // A missing counter is an error, never a restart at R-0001.
    await server.admin('PUT', `/v1/ns/${ns}-empty/counters/other`, {});
    gas.setScriptProperty('ICHIDO_NS', `${ns}-empty`);
    gas.setScriptProperty('ICHIDO_TOKEN', await server.token('writer', `${ns}-empty`));
    const missing = await gas.run('submit', [['resp-x']]);
    assert.equal(missing.error.code, 'counter_not_found');
  } finally {
    await proxy.close();
  }
});

test('README gas/receipt-number-sheet: a spreadsheet-bound trigger, fired twice per response, numbers each row once', async () => {
  const ns = 'readme-sheet';
  assert.equal((await server.admin('PUT', `/v1/ns/${ns}/counters/receipts`, { format: 'R-{seq:4}', require_key: true })).status, 201);
  const gas = new GasRuntime({
    files: [
      ichidoGs,
      recipe('gas/receipt-number-sheet'),
      // The event a spreadsheet's "On form submit" trigger passes (test glue): e.range, e.values.
      gs('events.gs', `
      var written = {};
      function fire(row, stamp) {
        var sheet = { getSheetId: function () { return 12345; },
                      getRange: function (r, c) { return { setValue: function (v) { written[r + ':' + c] = v; } }; } };
        var range = { getSheet: function () { return sheet; }, getRow: function () { return row; }, getLastColumn: function () { return 4; } };
        return onSheetFormSubmit({ range: range, values: [stamp, 'Yamada', 'a@example.jp', '2'] });
      }
      function run() {
        var out = [fire(2, '2026/04/01 9:30:00'), fire(3, '2026/04/01 9:30:05'), fire(2, '2026/04/01 9:30:00'), fire(2, '2026/04/02 10:00:00')];
        return { numbers: out, written: written };
      }`),
    ],
    properties: await props(ns),
  });
  const { numbers, written } = ok(await gas.run('run'));
  assert.deepEqual(numbers, ['R-0001', 'R-0002', 'R-0001', 'R-0003'], 'a second firing gets the same number; a new response in a reused row a new one');
  assert.deepEqual(written, { '2:5': 'R-0003', '3:5': 'R-0002' });
});

test('README gas/appsheet-once: 3 firings send one mail; a lost complete answer sends no second one', async () => {
  const ns = 'readme-appsheet';
  assert.equal((await server.admin('PUT', `/v1/ns/${ns}/counters/invoices`, { format: 'INV-{seq:4}', require_key: true })).status, 201);
  let dropped = 0;
  const proxy = await new LossyProxy(server.port, ({ path }) => (path.endsWith('/once/complete') && dropped++ === 0 ? 'drop_answer' : 'pass')).start();
  try {
    let failMail = true;
    const gas = new GasRuntime({
      files: [ichidoGs, recipe('gas/appsheet-once')],
      properties: { ...(await props(ns)), ICHIDO_URL: proxy.url },
      onService: (op, payload) => {
        if (op === 'mail' && payload.to === 'flaky@example.com' && failMail) {
          failMail = false;
          throw new Error('Service invoked too many times for one day: email.');
        }
      },
    });
    const fired = await Promise.all([1, 2, 3].map(() => gas.run('handleRecord', ['R1', 'customer@example.co.jp', 12000])));
    const results = fired.map(ok);
    assert.deepEqual(results[1], results[0]);
    assert.deepEqual(results[2], results[0]);
    assert.deepEqual(results[0], { invoiceNo: 'INV-0001' });
    assert.equal(gas.outbox.length, 1, 'one invoice mail');
    assert.ok(proxy.requests('/once/begin').every((r) => r.body.lease_ms > 6 * 60 * 1000), 'the lease outlives the 6-minute limit');
    assert.equal(proxy.requests('/once/fail').length, 0);
    assert.equal(proxy.requests('/once/complete').length, 2, 'the lost complete answer was retried');
    // The work throws (MailApp's quota): the row is failed and the error rethrown; the next
    // firing does it (attempt 2) with the same invoice number.
    const failed = await gas.run('handleRecord', ['R2', 'flaky@example.com', 500]);
    assert.match(failed.error.message, /too many times/);
    assert.equal(proxy.requests('/once/fail').length, 1);
    assert.deepEqual(ok(await gas.run('handleRecord', ['R2', 'flaky@example.com', 500])), { invoiceNo: 'INV-0002' });
    assert.equal(gas.outbox.length, 2);
  } finally {
    await proxy.close();
  }
});

test('README gas/sweeper: a killed execution shows up in the sweeper mail', async () => {
  const ns = 'readme-sweeper';
  await server.admin('PUT', `/v1/ns/${ns}/counters/invoices`, { require_key: true });
  let victim = null;
  const gas = new GasRuntime({
    files: [ichidoGs, recipe('gas/appsheet-once'), recipe('gas/sweeper'), gs('short.gs', `
      function handleRecordQuickly(rowId) {   // the recipe with a 1 s lease, so the test is short
        var ichido = Ichido.connect();
        return ichido.once('appsheet-row-' + rowId, function () {
          MailApp.sendEmail('c@example.com', 'x', 'y');
          return 1;
        }, { leaseMs: 1000 });
      }
      function failForGood(rowId) {   // a row whose work fails, with one attempt allowed: dead
        try {
          Ichido.connect().once('appsheet-row-' + rowId, function () { throw new Error('smtp 550 ユーザー不明'); }, { maxAttempts: 1 });
        } catch (e) { return e.message; }
      }`)],
    properties: { ...(await props(ns)), ADMIN_EMAIL: 'admin@example.co.jp' },
    onService: (op, payload, execution) => {
      if (op === 'mail' && execution === victim) execution.kill();
    },
  });
  const run = gas.start('handleRecordQuickly', ['R9']);
  victim = run.execution;
  assert.equal((await run.done).killed, true);
  assert.equal(ok(await gas.run('failForGood', ['D1'])), 'smtp 550 ユーザー不明');
  await new Promise((r) => setTimeout(r, 1100));
  ok(await gas.run('sweepStuckRows'));
  assert.equal(gas.outbox.length, 1);
  assert.equal(gas.outbox[0].to, 'admin@example.co.jp');
  assert.equal(gas.outbox[0].subject, 'ichido: 1 row(s) stuck, 1 dead');
  assert.match(gas.outbox[0].body, /^stuck: appsheet-row-R9 \(attempt 1, apps-script:/);
  assert.match(gas.outbox[0].body, /\ndead: appsheet-row-D1 \(smtp 550 ユーザー不明\)$/, 'dead rows are reported too');
  ok(await gas.run('installSweeper'));
  assert.deepEqual(gas.triggers, [{ handler: 'sweepStuckRows', everyMinutes: 10 }]);
});

test('README gas/practice-number: the seed guards hold and 10 executions get 100 distinct numbers', async () => {
  const gas = new GasRuntime({
    files: [ichidoGs, recipe('gas/practice-number'), gs('t.gs', 'function ten() { var a = []; for (var i = 0; i < 10; i++) a.push(issuePracticeNumber()); return a; }')],
    properties: await props('readme-practice'),
  });
  assert.equal((await gas.run('issuePracticeNumber')).error.message, '最後の受付番号を確認してください');
  assert.equal(gas.scriptProperties()['practice.lastNumber'], undefined, 'never Number(null) + 1');
  gas.setScriptProperty('practice.lastNumber', 'x1');
  assert.equal((await gas.run('issuePracticeNumber')).error.message, '最後の受付番号を確認してください');
  gas.setScriptProperty('practice.lastNumber', '9999');
  assert.equal((await gas.run('issuePracticeNumber')).error.message, '受付番号の上限を確認してください');
  gas.setScriptProperty('practice.lastNumber', '0');
  const all = (await Promise.all(Array.from({ length: 10 }, () => gas.run('ten')))).flatMap(ok).sort();
  assert.deepEqual(all, Array.from({ length: 100 }, (_, i) => `R-${String(i + 1).padStart(4, '0')}`));
});
