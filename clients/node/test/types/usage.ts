// Typed application code using the client: it must compile under --strict, and each line marked
// as an expected error must not compile (a mistake the types are there to catch).
import { Ichido, IchidoError, backoffBaseMs, type IssuedNumber, type Json } from '../../index.js';

const ichido = new Ichido({ url: 'https://ichido.example.com', token: 't', ns: 'shop', timeoutMs: 5000, onRetry: (i) => console.log(i.delayMs) });

async function main(): Promise<void> {
  const n: IssuedNumber = await ichido.nextNumber('receipts', 'form-1', { note: 'x' });
  const value: number = n.value;
  const formatted: string = n.formatted;
  const replayed: boolean = n.replayed;

  const token: number = await ichido.withLock('ledger', async (t, { signal }) => {
    signal.throwIfAborted();
    return t;
  }, { waitMs: 1000, leaseMs: 30000 });

  const result: Json = await ichido.once('invoice-42', async ({ token: claim, attempt, signal }) => {
    void signal;
    return { claim, attempt, sent: true };
  }, { leaseMs: 60000, waitMs: 0, fingerprint: 'sha256:x' });

  const stuck = await ichido.expired(10);
  for (const r of stuck) console.log(r.key, r.state, r.attempt);

  const begin = await ichido.begin('k');
  if (begin.outcome === 'acquired') console.log(begin.token + 1, begin.sentAt);
  if (begin.outcome === 'completed') console.log(begin.result);

  try {
    await ichido.nextNumber('receipts', 'k');
  } catch (e) {
    if (e instanceof IchidoError) console.log(e.code, e.status, e.details);
  }
  console.log(value, formatted, replayed, token, result, backoffBaseMs(2));

  // @ts-expect-error the counter name is a string
  await ichido.nextNumber(1, 'k');
  // @ts-expect-error the key is required
  await ichido.nextNumber('receipts');
  // @ts-expect-error durations are numbers (milliseconds)
  await ichido.withLock('l', async () => 1, { waitMs: '10s' });
  // @ts-expect-error an unknown option
  new Ichido({ urll: 'x' });
  // @ts-expect-error the result of once() is JSON
  await ichido.once('k', async () => new Map());
}

void main;
