// CommonJS application code (require): the same types through index.d.cts.
import { Ichido, IchidoError, type IssuedNumber } from '../../index.cjs';

const ichido = new Ichido({ url: 'https://ichido.example.com', token: 't', ns: 'shop' });

export async function number(orderId: string): Promise<string> {
  try {
    const n: IssuedNumber = await ichido.nextNumber('receipts', `order-${orderId}`);
    return n.formatted;
  } catch (e) {
    if (e instanceof IchidoError) return e.code;
    throw e;
  }
}

// @ts-expect-error the key is required
void ichido.nextNumber('receipts');
