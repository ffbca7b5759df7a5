import { Decider, DecisionResult, fold } from '../decider';

/**
 * Given / when / then over a decider, for tests:
 * `given(decider, [created, claimed]).when(returnCmd).then([returned])`.
 */
export function given<C, E, S>(decider: Decider<C, E, S>, history: E[] = []) {
  return {
    when(command: C) {
      const state = fold(decider, history);
      const result: DecisionResult<E> = decider.decide(command, state);
      return {
        result,
        state,
        /** Assert exactly these events were decided. */
        then(expected: E[]): E[] {
          if (!result.ok) throw new Error(`expected events, got error ${result.error.code}: ${result.error.message}`);
          expect(result.events).toEqual(expected);
          return result.events;
        },
        /** Assert the decided events match (partial deep match per event). */
        thenMatch(expected: Partial<E>[]): E[] {
          if (!result.ok) throw new Error(`expected events, got error ${result.error.code}: ${result.error.message}`);
          expect(result.events).toHaveLength(expected.length);
          expected.forEach((e, i) => expect(result.events[i]).toMatchObject(e as object));
          return result.events;
        },
        /** Assert the command was refused with this error code. */
        thenFails(code: string) {
          if (result.ok) throw new Error(`expected error ${code}, got events ${JSON.stringify(result.events)}`);
          expect(result.error.code).toBe(code);
          return result.error;
        },
        /** The state after applying the decided events. */
        stateAfter(): S {
          if (!result.ok) throw new Error(`no state: command failed with ${result.error.code}`);
          return result.events.reduce((s, e) => decider.evolve(s, e), state);
        },
      };
    },
  };
}
