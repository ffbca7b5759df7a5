import type { HandoffEvent } from '@baton/contracts';
import { cmd, history } from './handoff/handoff.fixtures';
import { fold } from './decider';
import { handoffDecider } from './handoff/decider';
import type { RunCommand } from './run/commands';
import type { RunEvent } from './run/state';
import { claimedRunDecider, decided, startCmd } from './run/test-helpers';
import { v8Shapes } from './testing/hidden-class';

/*
 * Objects Baton makes by the thousand — event payloads, folded states — must share V8's hidden
 * classes. On Node 20 an object literal that spreads another object and then adds a key the
 * spread did not bring (`{ ...base, claimed_by }`, or `{ ...base, ...(cond ? { x } : {}) }`) gets
 * a hidden class of its own once its call site has warmed up: the ledger's fold cache held 35 759
 * of them (15 MB) and every read of such an object goes through a megamorphic lookup. These tests
 * make many objects through the real code and check that the last two share one hidden class.
 */
const { haveSameMap, hasFastProperties } = v8Shapes();

describe('hidden classes of what the domain makes in bulk', () => {
  it('the check itself tells a shared hidden class from a private one', () => {
    const spreadThenAdd = (i: number) => ({ ...{ a: i }, b: i });
    const made = Array.from({ length: 50 }, (_, i) => spreadThenAdd(i));
    expect(haveSameMap(made[48]!, made[49]!)).toBe(false);
    expect(haveSameMap({ a: 1, b: 2 }, { a: 3, b: 4 })).toBe(true);
  });

  it('handoff events of one type, and the pending and claimed states they fold to, share one hidden class', () => {
    const lives: HandoffEvent[][] = [];
    for (let i = 0; i < 60; i++) {
      const id = `h-${i}`;
      const claim = cmd.claim('bob', `c${i}`, 5);
      const heartbeat = cmd.heartbeat('bob', `c${i}`, 6);
      const release = cmd.release('bob', `c${i}`);
      lives.push(
        history(
          cmd.create({ handoff_id: id }),
          { ...claim, data: { ...claim.data, handoff_id: id } },
          { ...heartbeat, data: { ...heartbeat.data, handoff_id: id } } as typeof heartbeat,
          { ...release, data: { ...release.data, handoff_id: id } } as typeof release,
        ),
      );
    }
    const [a, b] = lives.slice(-2) as [HandoffEvent[], HandoffEvent[]];
    expect(a.map((e) => e.type)).toEqual(['handoff.created', 'handoff.claimed', 'handoff.heartbeat', 'handoff.released']);
    a.forEach((event, index) => expect([event.type, haveSameMap(event.data, b[index]!.data)]).toEqual([event.type, true]));
    for (const n of [1, 2]) expect([n, haveSameMap(fold(handoffDecider, a.slice(0, n)), fold(handoffDecider, b.slice(0, n)))]).toEqual([n, true]);
  });

  it('run states share one hidden class after every event of a run, and stay fast (not dictionary) objects', () => {
    const advance = { dispatch: { status: 'advance' as const } };
    const play = (commands: RunCommand[]): RunEvent[] => {
      const events: RunEvent[] = [];
      for (const command of commands) {
        const result = claimedRunDecider.decide(command, fold(claimedRunDecider, events));
        if (!result.ok) throw new Error(`${command.type} refused: ${result.error.code}`);
        events.push(...result.events);
      }
      return events;
    };
    const lives = Array.from({ length: 60 }, () => play([startCmd(), decided('r1', 'issue', advance), decided('r2', 'architect', advance)]));
    const [a, b] = lives.slice(-2) as [RunEvent[], RunEvent[]];
    expect(a.length).toBeGreaterThanOrEqual(5);
    for (let n = 1; n <= a.length; n++) {
      const [x, y] = [fold(claimedRunDecider, a.slice(0, n)), fold(claimedRunDecider, b.slice(0, n))];
      expect([n, a[n - 1]!.type, haveSameMap(x, y), hasFastProperties(x)]).toEqual([n, a[n - 1]!.type, true, true]);
    }
  });

  it('handoff states share one hidden class through a return too', () => {
    const lives = Array.from({ length: 60 }, (_, i) => history(cmd.create(), cmd.claim('bob', `c${i}`, 5), cmd.ret('bob', `c${i}`)));
    const [a, b] = lives.slice(-2) as [HandoffEvent[], HandoffEvent[]];
    expect(fold(handoffDecider, a).status).toBe('returned');
    for (let n = 1; n <= a.length; n++) {
      const [x, y] = [fold(handoffDecider, a.slice(0, n)), fold(handoffDecider, b.slice(0, n))];
      expect([n, a[n - 1]!.type, haveSameMap(x, y), hasFastProperties(x)]).toEqual([n, a[n - 1]!.type, true, true]);
    }
  });
});
