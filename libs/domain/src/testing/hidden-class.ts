import { setFlagsFromString } from 'node:v8';

/**
 * Test support: V8's own answer to "do these objects share one hidden class?" and "is this a fast
 * (not dictionary-mode) object?", for the tests that hold objects made by the thousand to one
 * hidden class per shape (see libs/domain/src/hidden-class.spec.ts for why it matters on Node 20).
 * Turns on `--allow-natives-syntax` when first called; never used outside tests.
 */
export function v8Shapes(): { haveSameMap(a: object, b: object): boolean; hasFastProperties(a: object): boolean } {
  setFlagsFromString('--allow-natives-syntax');
  return {
    haveSameMap: new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean,
    // A dictionary-mode object shares the normalised hidden class of all such objects: check this too.
    hasFastProperties: new Function('a', 'return %HasFastProperties(a)') as (a: object) => boolean,
  };
}
