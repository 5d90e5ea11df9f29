// The ESM entry: the CommonJS implementation (index.cjs) re-exported, so `import` and `require`
// callers get the same classes (one IchidoError for instanceof).
import cjs from './index.cjs';

export const { Ichido, IchidoError, backoffBaseMs } = cjs;
export default Ichido;
