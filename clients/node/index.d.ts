// Types of the ESM entry: the same declarations as the CommonJS one (index.d.cts).
export * from './index.cjs';
export { default } from './index.cjs';
