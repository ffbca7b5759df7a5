import type { z } from 'zod';

/*
 * What a reader does with keys it does not know. Baton's schemas are strict where Baton takes input
 * (a key the schema does not name is refused), but what Baton itself wrote — a stored event, a
 * service's reply — may come from a newer build that added an optional field. Such a reader leaves
 * the unknown keys out and checks the rest as usual, so services and clients can be upgraded one at
 * a time while a release only adds optional fields. Anything else wrong still refuses the value.
 */

/**
 * Parse `value` with `schema`; when it is refused for nothing but keys the schema does not know (at
 * any depth), parse it again without them. The value is copied, never changed in place. Use it only
 * for what Baton wrote (events read back, replies of its services), never for input it takes.
 */
export function parseIgnoringUnknownKeys<S extends z.ZodType>(schema: S, value: unknown): z.ZodSafeParseResult<z.output<S>> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed;
  const known = withoutUnknownKeys(parsed.error, value);
  return known === null ? parsed : schema.safeParse(known);
}

/**
 * `value` without the keys `error` found unrecognised, or null when it found none. Other issues do
 * not stop it: the caller parses the result again, and they refuse it then.
 */
export function withoutUnknownKeys(error: z.ZodError, value: unknown): unknown {
  const unknown = error.issues.filter((issue): issue is z.core.$ZodIssueUnrecognizedKeys => issue.code === 'unrecognized_keys');
  if (unknown.length === 0) return null;
  const copy = structuredClone(value);
  for (const issue of unknown) {
    const holder = valueAt(copy, issue.path);
    if (typeof holder !== 'object' || holder === null) continue;
    for (const key of issue.keys) delete (holder as Record<string, unknown>)[key];
  }
  return copy;
}

/** The value at `path` inside `value` (own properties only), or undefined. */
export function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let at = value;
  for (const key of path) {
    if (typeof at !== 'object' || at === null || typeof key === 'symbol' || !Object.hasOwn(at, key)) return undefined;
    at = (at as Record<PropertyKey, unknown>)[key];
  }
  return at;
}
