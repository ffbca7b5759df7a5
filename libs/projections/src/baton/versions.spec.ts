import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createEventRegistry } from '@baton/contracts';
import { canonicalJson, type JsonValue } from '../canonical-json';
import type { SequencedEvent } from '../store';
import type { FoldingProjection } from './fold';
import { handoffsProjection } from './handoffs';
import { inboxProjection } from './inbox';
import { noticesProjection } from './notices';
import { runsProjection } from './runs';
import { foldScenario, scenarioEnvelope } from './scenario';
import { stopsProjection } from './stops';

/*
 * A projection stores what its `step` writes (folded states and ops). A stored value of another
 * shape than a rebuild would write makes `baton verify` report every old key as differing, and the
 * notifier rebuilds a projection at start only when its `version` changed — so a change of shape
 * without a version bump leaves an upgraded deployment's projection stale until someone replays
 * it (found by a black-box sweep: the run state gained `handoffCall`, `runs` stayed at version 13,
 * 281 keys differed). This test records, per projection, the version and the shape of everything
 * its step writes over the example scenario (every key path of every folded state and op value,
 * and the op kinds; not the values): a shape that changes fails here until the version is bumped
 * and the shape recorded again.
 */
const RECORDED: Record<string, { version: number; shape: string }> = {
  runs: { version: 17, shape: '1d0263c7db1374f7' },
  handoffs: { version: 9, shape: '4ceef89423afc3b2' },
  inbox: { version: 8, shape: '90e3c849ea0a1b44' },
  stops: { version: 2, shape: 'b65d30d76295e39f' },
  notices: { version: 2, shape: '8ae337310bf5b350' },
};

/** Every key path of a JSON value (arrays as `[]`), not its values. */
function paths(value: unknown, prefix: string, out: Set<string>): void {
  if (Array.isArray(value)) {
    for (const item of value) paths(item, `${prefix}[]`, out);
  } else if (value !== null && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) {
      out.add(`${prefix}.${key}`);
      paths(child, `${prefix}.${key}`, out);
    }
  }
}

function shapeOf(projection: FoldingProjection<JsonValue>): string {
  const registry = createEventRegistry();
  const states = new Map<string, JsonValue | null>();
  const seen = new Set<string>();
  for (const [index, e] of foldScenario().entries()) {
    const event: SequencedEvent = { ...scenarioEnvelope(registry, e, `ev-${index}`, 'p'), seq: index + 1 };
    if (!projection.handles(event.type)) continue;
    const key = projection.stateKeyOf(event);
    const step = projection.step(key === null ? null : (states.get(key) ?? null), event);
    if (key !== null && step.state !== undefined) {
      const stored = step.state === null ? null : (JSON.parse(canonicalJson(step.state)) as JsonValue);
      states.set(key, stored);
      paths(stored, 'state', seen);
    }
    for (const op of step.ops) {
      seen.add(`op:${op.op}`);
      paths(JSON.parse(JSON.stringify(op)), `op:${op.op}`, seen);
    }
  }
  return createHash('sha256')
    .update([...seen].sort().join('\n'))
    .digest('hex')
    .slice(0, 16);
}

describe('a projection whose stored shape changes bumps its version (the notifier rebuilds it at start)', () => {
  it.each([
    ['runs', runsProjection],
    ['handoffs', handoffsProjection],
    ['inbox', inboxProjection],
    ['stops', stopsProjection],
    ['notices', noticesProjection],
  ] as const)('%s: the version and the shape of what it writes are the recorded ones', (name, make) => {
    const projection = make() as FoldingProjection<JsonValue>;
    const actual = { version: projection.version, shape: shapeOf(projection) };
    // On a failure: bump the projection's version (and say why beside it), then record both here and the version in docs/sre.md.
    expect({ name, ...actual }).toEqual({ name, ...RECORDED[name] });
  });
});

describe('docs/sre.md states the versions the projections are at', () => {
  it('its "Current layout versions" line names each projection at its version', () => {
    const sre = readFileSync(join(__dirname, '..', '..', '..', '..', 'docs', 'sre.md'), 'utf8');
    const line = sre.split('\n').find((text) => text.startsWith('Current layout versions:'));
    expect(line).toBeDefined();
    const stated = Object.fromEntries([...line!.matchAll(/`([a-z]+)` (\d+)/g)].map((m) => [m[1], Number(m[2])]));
    const actual = Object.fromEntries(
      [runsProjection, handoffsProjection, inboxProjection, stopsProjection, noticesProjection].map((make) => {
        const projection = make();
        return [projection.name, projection.version];
      }),
    );
    expect(stated).toEqual(actual);
  });
});
