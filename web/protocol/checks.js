// Small value checks shared by the protocol modules (pure, no DOM, no wasm). Each `check*`
// elsewhere returns an error string naming the problem, or null; `fail` / `must` turn one into a
// TypeError for the constructors.

export const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
export const isFiniteNumber = (v) => typeof v === 'number' && Number.isFinite(v);
export const isNonNegInt = (v) => Number.isSafeInteger(v) && v >= 0;
export const isBlobLike = (v) =>
  isObject(v) && typeof v.size === 'number' && (typeof v.stream === 'function' || typeof v.arrayBuffer === 'function');

export function fail(msg) {
  throw new TypeError(msg);
}

export function must(err) {
  if (err) fail(err);
}

/** A value as an error message shows it: numbers plainly, `nothing` for undefined, else JSON. */
export function fmtValue(v) {
  if (typeof v === 'number') return String(v);
  if (v === undefined) return 'nothing';
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

/** The error message to show for anything thrown (Error, string, other). */
export function errorMessage(e) {
  if (e instanceof Error) return e.message || e.name || 'unknown error';
  if (typeof e === 'string' && e !== '') return e;
  if (isObject(e) && typeof e.message === 'string' && e.message !== '') return e.message;
  return e === undefined || e === null ? 'unknown error' : String(e);
}
