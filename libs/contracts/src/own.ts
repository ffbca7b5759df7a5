/**
 * Members of plain objects keyed by outside names (agents, steps, variables, headers, record
 * keys). A plain object inherits from `Object.prototype`, so reading `record[name]` for a name it
 * does not hold finds `toString`, `constructor`… — a function where `undefined` was meant — and
 * assigning `record['__proto__']` sets the object's prototype instead of adding a member. These
 * two read and write own members only; every such lookup and copy goes through them.
 */

/** The value of `record`'s own member `key`, or undefined (never an inherited one). */
export function ownValue<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

/** Add or replace `record`'s own member `key` — `__proto__` too, as `JSON.parse` would make it. */
export function setOwn<T>(record: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
  else record[key] = value;
}
