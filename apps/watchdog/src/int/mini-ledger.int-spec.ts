import { Principals } from '@baton/contracts';
import { LedgerClient } from '@baton/eventstore';
import { PROJECT, route, startHarness, type Harness } from './support';

/*
 * The watchdog's integration tests drive a minimal ledger (int/support.ts). It must refuse what the
 * real ledger refuses, or those tests prove behaviour on handoffs that can never exist: an agent's
 * create naming a run is refused `not_in_run` unless the run waits for that agent
 * (libs/domain/src/handoff/run-turn.ts), read with the domain's own fold and decided by the domain's
 * decider. Against the real NATS, with a prefix of its own.
 */

let h: Harness;

beforeEach(async () => {
  h = await startHarness();
});
afterEach(async () => {
  await h.cleanup();
});

const body = (id: string, run: string, extra: Record<string, unknown> = {}) => ({
  handoff_id: id,
  from_agent: 'alice',
  to_agent: 'bob',
  summary: 'x',
  workflow_run_id: run,
  idempotency_key: `c-${id}`,
  ...extra,
});

describe("the watchdog tests' ledger applies the ledger's not_in_run rule (real NATS)", () => {
  it('an agent naming a run that does not wait for it is refused not_in_run, nothing stored; once the run waits for it, the same create is taken', async () => {
    const alice = new LedgerClient(h.nats, h.prefix, { as: Principals.agent(PROJECT, 'alice'), attempts: 1 });
    // No such run.
    expect(await alice.create(PROJECT, body('h-none', 'run-none'))).toMatchObject({ ok: false, error: { code: 'not_in_run', kind: 'forbidden' } });
    // A run waiting for bob, not alice.
    await route(h, 'run-bob', ['bob']);
    expect(await alice.create(PROJECT, body('h-bob', 'run-bob'))).toMatchObject({ ok: false, error: { code: 'not_in_run' } });
    // A cross-project create names its source project's run: refused the same way.
    expect(await alice.create(PROJECT, body('h-x', 'run-bob', { target_project: 'other', cto_override: 'dec-1' }))).toMatchObject({
      ok: false,
      error: { code: 'not_in_run' },
    });
    expect(await h.events('h-none')).toEqual([]);
    expect(await h.events('h-bob')).toEqual([]);
    expect(await h.events('h-x', 'other')).toEqual([]);

    // The run routed to alice: she delegates a piece of it.
    await route(h, 'run-alice', ['alice']);
    expect(await alice.create(PROJECT, body('h-alice', 'run-alice'))).toMatchObject({ ok: true, handoff: { workflow_run_id: 'run-alice' } });
  });

  it('a service (the router) names the runs it routes: not checked', async () => {
    const router = new LedgerClient(h.nats, h.prefix, { as: Principals.service('router'), attempts: 1 });
    expect(await router.create(PROJECT, body('h-routed', 'run-none'))).toMatchObject({ ok: true });
  });
});
