import fc from 'fast-check';
import { IdSchema, Limits, type RouteCause } from '@baton/contracts';
import { meshEntryHandoffId, meshHandoffId, meshNoticeId, meshResumeHandoffId, meshStopId } from '../mesh';
import { deriveId, deriveScopedId, handoffIdFor, noticeIdFor, routeHandoffIdFor, ROUTER_HANDOFF_ID_PREFIXES, stopIdFor } from './ids';

/**
 * The ids Baton derives from client-chosen ids are injective: whatever ids a client picks (any valid
 * id, `:` anywhere, up to the cap, shaped like a digest Baton showed it), two different inputs never
 * derive the same id, every derived id is a valid id, and the same input always derives the same id.
 */

const MAX = Limits.maxIdLength;
const valid = (id: string): boolean => IdSchema.safeParse(id).success;
const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));
const small = fc.stringMatching(/^[ab:-]{1,6}$/);
const anyId = fc.stringMatching(/^[A-Za-z0-9_\-:@]{1,128}$/);

/** Client ids that lean on the edges: `:` in them, digest-looking tails, lengths at and around the cap. */
const trickyId: fc.Arbitrary<string> = fc
  .oneof(
    small,
    anyId,
    fc.tuple(small, hex(8)).map(([head, digest]) => `${head}-${digest}`),
    fc.tuple(small, hex(32)).map(([head, digest]) => `${head}-${digest}`),
    fc.tuple(small, hex(32)).map(([head, digest]) => `${head}::${digest}`),
    fc.tuple(small, fc.integer({ min: MAX - 12, max: MAX })).map(([head, length]) => head.padEnd(length, 'x').slice(0, length)),
    fc.tuple(small, fc.integer({ min: MAX - 12, max: MAX })).map(([head, length]) => `${'y'.repeat(length - head.length)}${head}`.slice(-length)),
  )
  .filter(valid);

/** Every prefix a scoped derivation is used with. */
const SCOPED_PREFIXES = ['ho-r', 'ho-m', 'ho-a', 'nt-r', 'nt-m', 'nt-a', 'stop-r', 'stop-m', 'stop-a', 'mh-r', 'mh-a', 'stop-mt', 'nt-mt'];
/** Every prefix `deriveId` is used with for ids a client chose. */
const PLAIN_PREFIXES = ['ho-s', 'ho-x', 'ho-f', 'nt-s', 'nt-x', 'nt-f', 'stop-s', 'stop-x', 'stop-f', 'mh-s', 'msg'];

const scopedKinds = ['result', 'message', 'resume'] as const;
const kinds: ReadonlyArray<RouteCause['kind']> = ['start', 'result', 'resume', 'stop', 'message', 'handoff_failed'];

describe('derived ids are valid, deterministic and injective whatever ids the client chose', () => {
  it('every derived id is a valid id, and the same input derives it again', () => {
    fc.assert(
      fc.property(trickyId, trickyId, fc.constantFrom(...kinds), fc.integer({ min: 1, max: 30 }), (run, id, kind, n) => {
        const cause: RouteCause = { kind, id };
        const ids = [
          handoffIdFor(run, cause),
          stopIdFor(run, cause),
          noticeIdFor(run, cause),
          routeHandoffIdFor(run, cause, n),
          meshEntryHandoffId(run),
          meshHandoffId(run, id),
          meshStopId(run, id),
          meshNoticeId(run, id),
          meshResumeHandoffId(run, id),
          ...SCOPED_PREFIXES.map((prefix) => deriveScopedId(prefix, run, id)),
          ...PLAIN_PREFIXES.map((prefix) => deriveId(prefix, id)),
        ];
        expect(ids.filter((derived) => !valid(derived))).toEqual([]);
        // Deterministic: the same input (as fresh strings) derives the same ids.
        const [run2, id2] = [run.split('').join(''), id.split('').join('')];
        expect([handoffIdFor(run2, { kind, id: id2 }), routeHandoffIdFor(run2, { kind, id: id2 }, n), meshHandoffId(run2, id2)]).toEqual([
          ids[0],
          ids[3],
          ids[5],
        ]);
      }),
      { numRuns: 300 },
    );
  });

  it('a plain scoped id holds exactly one ":" and is kept as before; every other takes the sealed `::<digest>` form', () => {
    fc.assert(
      fc.property(trickyId, trickyId, fc.constantFrom(...SCOPED_PREFIXES), (scope, id, prefix) => {
        const derived = deriveScopedId(prefix, scope, id);
        const plain = `${prefix}-${scope}:${id}`;
        if (!scope.includes(':') && !id.includes(':') && plain.length < MAX) expect(derived).toBe(plain);
        else expect(derived).toMatch(/::[0-9a-f]{32}$/);
      }),
      { numRuns: 400 },
    );
  });

  it('two different (scope, id) pairs never derive the same scoped id (random pairs over a small alphabet)', () => {
    const pair = fc.tuple(fc.oneof(small, trickyId), fc.oneof(small, trickyId));
    fc.assert(
      fc.property(
        fc.uniqueArray(pair, { minLength: 2, maxLength: 60, selector: ([s, i]) => JSON.stringify([s, i]) }),
        fc.constantFrom(...SCOPED_PREFIXES),
        (pairs, prefix) => {
          const derived = new Set(pairs.map(([scope, id]) => deriveScopedId(prefix, scope, id)));
          expect(derived.size).toBe(pairs.length);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('one text split at two different ":" never derives one id (run "a:b" + "c" against run "a" + "b:c")', () => {
    fc.assert(
      fc.property(small, small, small, fc.constantFrom(...SCOPED_PREFIXES), (a, b, c, prefix) => {
        expect(deriveScopedId(prefix, `${a}:${b}`, c)).not.toBe(deriveScopedId(prefix, a, `${b}:${c}`));
      }),
      { numRuns: 300 },
    );
  });

  it('copying a derived id: no re-split of what it shows into another (scope, id) pair derives it', () => {
    fc.assert(
      fc.property(trickyId, trickyId, fc.constantFrom(...SCOPED_PREFIXES), (scope, id, prefix) => {
        const derived = deriveScopedId(prefix, scope, id);
        const body = derived.slice(prefix.length + 1);
        const candidates: Array<[string, string]> = [];
        for (let i = body.indexOf(':'); i >= 0; i = body.indexOf(':', i + 1)) candidates.push([body.slice(0, i), body.slice(i + 1)]);
        // ...and what the attacker can reach by choosing the id under the same scope.
        candidates.push([scope, body.slice(scope.length + 1)], [scope, body]);
        for (const [s, i] of candidates) {
          if (!valid(s) || !valid(i) || (s === scope && i === id)) continue;
          expect(deriveScopedId(prefix, s, i)).not.toBe(derived);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('the tester\'s pairs (run "k402:a" + "b" against run "k402" + "a:b-<its digest>") derive different stop packets and handoffs', () => {
    for (const derive of [stopIdFor, handoffIdFor, noticeIdFor]) {
      const victim = derive('k402:a', { kind: 'result', id: 'b' });
      const shown = victim.slice(victim.indexOf('k402:') + 'k402:'.length);
      for (const id of ['a:b-a39684a5', shown, `${shown}-a39684a5`]) {
        expect(derive('k402', { kind: 'result', id })).not.toBe(victim);
      }
    }
  });

  it('deriveId: two sources never derive the same id, and a plain form exactly the cap long never copies a clipped one', () => {
    const sourceAround = fc.oneof(
      trickyId,
      fc.integer({ min: MAX - 12, max: MAX }).map((length) => 's'.repeat(length)),
    );
    fc.assert(
      fc.property(fc.uniqueArray(sourceAround, { minLength: 2, maxLength: 40 }), fc.constantFrom(...PLAIN_PREFIXES), (sources, prefix) => {
        const derived = sources.map((source) => deriveId(prefix, source));
        expect(new Set(derived).size).toBe(sources.length);
        for (const [i, id] of derived.entries()) {
          const plain = `${prefix}-${sources[i]}`;
          expect(id === plain).toBe(plain.length < MAX);
          if (id !== plain) {
            expect(id).toHaveLength(MAX);
            // The attacker's copy: a source that shows the clipped id as its plain form.
            const copy = id.slice(prefix.length + 1);
            expect(deriveId(prefix, copy)).not.toBe(id);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it("the handoff ids of a project (runs' routes of every cause and route number, meshes' entries, turns and resumes) never meet", () => {
    const input = fc.record({
      what: fc.constantFrom('route', 'mesh_entry', 'mesh_turn', 'mesh_resume'),
      kind: fc.constantFrom(...kinds),
      run: fc.oneof(small, trickyId),
      id: fc.oneof(small, trickyId),
      n: fc.integer({ min: 1, max: 4 }),
    });
    type Input = { what: string; kind: RouteCause['kind']; run: string; id: string; n: number };
    const scoped = (kind: RouteCause['kind']) => (scopedKinds as readonly string[]).includes(kind);
    /** What names the handoff: a start, stop or failed handoff's first route is named by its own id alone. */
    const key = (x: Input): string => {
      if (x.what === 'mesh_entry') return JSON.stringify([x.what, x.run]);
      if (x.what !== 'route') return JSON.stringify([x.what, x.run, x.id]);
      if (x.n === 1 && !scoped(x.kind)) return JSON.stringify([x.what, x.kind, x.id]);
      return JSON.stringify([x.what, x.kind, x.run, x.id, x.n]);
    };
    const derive = (x: Input): string => {
      if (x.what === 'mesh_entry') return meshEntryHandoffId(x.run);
      if (x.what === 'mesh_turn') return meshHandoffId(x.run, x.id);
      if (x.what === 'mesh_resume') return meshResumeHandoffId(x.run, x.id);
      return routeHandoffIdFor(x.run, { kind: x.kind, id: x.id }, x.n);
    };
    fc.assert(
      fc.property(fc.uniqueArray(input, { minLength: 2, maxLength: 60, selector: key }), (inputs) => {
        const byId = new Map<string, string>();
        for (const x of inputs) {
          const id = derive(x);
          expect(valid(id)).toBe(true);
          expect(byId.get(id) ?? key(x)).toBe(key(x));
          byId.set(id, key(x));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a later route never takes an id of a first route (`ho-r-<run>:<id>-2` was the first route of result `<id>-2`)', () => {
    fc.assert(
      fc.property(fc.oneof(small, trickyId), fc.oneof(small, trickyId), fc.constantFrom(...kinds), fc.integer({ min: 2, max: 99 }), (run, id, kind, n) => {
        const later = routeHandoffIdFor(run, { kind, id }, n);
        expect(later).toHaveLength(MAX);
        for (const firstKind of kinds) {
          expect(handoffIdFor(run, { kind: firstKind, id: `${id}-${n}` })).not.toBe(later);
          expect(handoffIdFor(`${run}-${n}`, { kind: firstKind, id: `${run}-${n}` })).not.toBe(later);
          expect(handoffIdFor(run, { kind: firstKind, id: later.slice(later.indexOf('-', 3) + 1) })).not.toBe(later);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('no derivation prefix is the start of another, so ids of two prefixes never meet', () => {
    const prefixes = [...new Set([...SCOPED_PREFIXES, ...PLAIN_PREFIXES, ...ROUTER_HANDOFF_ID_PREFIXES])];
    for (const a of prefixes) for (const b of prefixes) if (a !== b) expect(`${b}-`.startsWith(`${a}-`)).toBe(false);
  });
});
