/**
 * `{ ...a, ...b }` for objects made by the thousand (folded states, event payloads).
 *
 * On Node 20 an object literal that spreads an object and then adds a key the spread did not bring
 * (`{ ...state, claim }`) gets a hidden class of its own per object once its call site is warm:
 * memory for each class, and a megamorphic lookup for every later read of the object.
 * `Object.assign` onto a fresh object shares one hidden class per key sequence. Same result as
 * the spread: own enumerable properties, later parts win, keys in first-seen order.
 * (hidden-class.spec.ts checks both with V8's own answer.)
 */
export function extend<A extends object, B extends object>(a: A, b: B): Spread<A, B>;
export function extend<A extends object, B extends object, C extends object>(a: A, b: B, c: C): Spread<Spread<A, B>, C>;
export function extend(...parts: object[]): object {
  return Object.assign({}, ...parts);
}

/** The type of `{ ...a, ...b }`, member by member when `A` is a union (as TypeScript types the spread). */
export type Spread<A, B> = A extends unknown ? Omit<A, keyof B> & B : never;
