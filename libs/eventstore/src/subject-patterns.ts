/**
 * True when a NATS subject matches a subscription pattern (`*` matches one token, a trailing `>`
 * one or more).
 */
export function subjectMatches(pattern: string, subject: string): boolean {
  const want = pattern.split('.');
  const have = subject.split('.');
  for (let i = 0; i < want.length; i++) {
    const token = want[i];
    if (token === '>') return have.length > i;
    if (i >= have.length) return false;
    if (token !== '*' && token !== have[i]) return false;
  }
  return want.length === have.length;
}

/**
 * True when every subject `inner` matches is also matched by `outer` (both subscription patterns;
 * decided token by token, which is exact for patterns whose `>` is the last token, as NATS requires).
 */
export function patternWithin(outer: string, inner: string): boolean {
  const o = outer.split('.');
  const i = inner.split('.');
  for (let k = 0; k < o.length; k++) {
    if (o[k] === '>') return i.length > k;
    if (k >= i.length) return false;
    if (o[k] === '*') {
      if (i[k] === '>') return false;
      continue;
    }
    if (o[k] !== i[k]) return false;
  }
  return o.length === i.length;
}

/** FNV-1a, 32 bit, as 8 hex digits: a short stable suffix for derived names. */
function fnv32(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16).padStart(8, '0');
}

/**
 * A durable name for a service's consumer of a pattern: `<service>_<slug>_<hash>`, using only
 * characters durable names allow. Stable across restarts and instances (so instances share it).
 * The Nest JetStream transport names every `@EventPattern` consumer this way (with the pattern as
 * written in the decorator, `{prefix}` and all), and the redrive table uses the same names.
 */
export function durableNameFor(service: string, pattern: string): string {
  const clean = (text: string) =>
    text
      .replace(/\*/g, 'any')
      .replace(/>/g, 'all')
      .replace(/[^A-Za-z0-9_-]/g, '_');
  return `${clean(service)}_${clean(pattern).slice(0, 80)}_${fnv32(pattern)}`;
}
