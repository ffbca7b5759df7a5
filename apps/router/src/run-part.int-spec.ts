import { Principals, Subjects, type LedgerReply, type StopPacket } from '@baton/contracts';
import { LedgerClient, type JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
// The watchdog's circuit state (a test-only cross-app import; int/support.ts starts the real services).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { GuardRunner } from '../../watchdog/src/guards/guard-runner';
import { publishDefinition, shipDefinition, startInProcess, type InProcessDeployment } from './int/support';

/*
 * Who may make a handoff part of a run, through the real router, ledger and watchdog over the real
 * NATS (random prefix; WATCHDOG_CIRCUIT_FAILURES at its default, 3; no project lead).
 *
 * A security audit's second form of the circuit attack: with nothing but its own credentials, an
 * agent created a handoff to ITSELF naming another agent's run (the ledger took any
 * `workflow_run_id` of the project), claimed it and failed it. Three such failures opened its circuit,
 * and the circuit stopped the run of the third — a run it had no part in. One `give_up_offer` of such
 * a handoff at `max_retries: 0` did it in one move: the escalation, with no lead, stopped the run
 * `guard_failed`. The ledger now refuses the create (`not_in_run`): an agent names a run only while
 * that run waits for it. A run's own agent delegating inside its run still may, and its delegate's
 * failures still stop that run (docs/governance.md, circuit per agent).
 */

const encoder = new TextEncoder();
const PROJECT = 'rpart';

describe('a handoff of a run is made only by the agent the run waits for, or the router (router, ledger and watchdog; real NATS)', () => {
  let deployment: InProcessDeployment | undefined;
  let prefix: string;
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  let counter = 0;

  const events = async (kind: 'run' | 'handoff', id: string): Promise<StoredEvent[]> => (await store.read({ project: PROJECT, kind, id })).events;
  const types = async (run: string) => (await events('run', run)).map((e) => e.type);
  const stopPacket = (run: string) =>
    waitFor(
      async () => (await events('run', run)).find((e) => e.type === 'run.stopped')?.payload as { packet: StopPacket } | undefined,
      `run.stopped on ${run}`,
      { timeoutMs: 15_000 },
    );
  const agent = (name: string) => new LedgerClient(nats, prefix, { as: Principals.agent(PROJECT, name), attempts: 1 });

  /** Start a `ship` run; resolves once the ledger created its step handoff for coder. */
  const startRun = async (): Promise<string> => {
    const run = `wr-${++counter}`;
    const body = { workflow_run_id: run, project: PROJECT, workflow: 'ship', started_by: 'sam', input: 'ship it' };
    await nats.js.publish(Subjects.runStart(prefix, PROJECT), encoder.encode(JSON.stringify(body)));
    const routed = await waitFor(
      async () => (await events('run', run)).find((e) => e.type === 'run.routed')?.payload as { handoff_id: string } | undefined,
      `run.routed of ${run}`,
    );
    await waitFor(async () => ((await events('handoff', routed.handoff_id)).length > 0 ? true : undefined), `the step handoff of ${run}`);
    return run;
  };

  /** `who` creates handoff `id` to `to` naming `run`; when stored, `to` claims it and fails it. Resolves with the create's reply. */
  const createClaimFail = async (who: string, to: string, run: string, id: string): Promise<LedgerReply> => {
    const created = await agent(who).create(PROJECT, {
      handoff_id: id,
      from_agent: who,
      to_agent: to,
      summary: 'a piece of the work',
      workflow_run_id: run,
      idempotency_key: `create-${id}`,
    });
    if (!created.ok) return created;
    const claimed = await agent(to).claim(PROJECT, { handoff_id: id, idempotency_key: `claim-${id}` });
    if (!claimed.ok || claimed.handoff.claim_id === undefined) throw new Error(`claim refused: ${JSON.stringify(claimed)}`);
    const failed = await agent(to).fail(PROJECT, { handoff_id: id, claim_id: claimed.handoff.claim_id, reason: 'down', idempotency_key: `fail-${id}` });
    if (!failed.ok) throw new Error(`fail refused: ${JSON.stringify(failed)}`);
    return created;
  };

  beforeAll(async () => {
    deployment = await startInProcess({ tag: 'rp', services: ['ledger', 'router', 'watchdog'] });
    ({ prefix, nats, store } = deployment);
    expect(await publishDefinition(nats, prefix, PROJECT, shipDefinition(PROJECT, { helper: true }))).toMatchObject({ ok: true });
  }, 30_000);

  afterAll(() => deployment?.close(), 30_000);

  it("the audit's second form: reviewer's handoffs to itself naming coder's runs are refused not_in_run, so neither three failures nor one given-up offer stop those runs; coder delegating inside its own runs still has its delegate's third failure stop the run", async () => {
    const victims = [await startRun(), await startRun(), await startRun()];
    // create → claim → fail, three times, each naming one of coder's runs (as the audit did).
    const attacks: LedgerReply[] = [];
    for (const [i, run] of victims.entries()) attacks.push(await createClaimFail('reviewer', 'reviewer', run, `self-${i}`));
    // One move: a handoff to itself at max_retries 0 naming a fourth run, whose offer it gives up on.
    const fourth = await startRun();
    const givenUp = await agent('reviewer').create(PROJECT, {
      handoff_id: 'self-give-up',
      from_agent: 'reviewer',
      to_agent: 'reviewer',
      summary: 'nothing',
      max_retries: 0,
      workflow_run_id: fourth,
      idempotency_key: 'create-self-give-up',
    });
    if (givenUp.ok) {
      await agent('reviewer').giveUpOffer(PROJECT, {
        handoff_id: 'self-give-up',
        offered_version: givenUp.handoff.version,
        deliveries: 5,
        reason: 'gave up',
        idempotency_key: 'give-up-self',
      });
    }

    // The documented case, after the attack in the events stream: coder delegates a piece of each
    // of its own runs to helper, which takes it and fails it; the third failure opens helper's
    // circuit and stops that run, the packet naming helper. The watchdog reads the stream in order:
    // once this stop is there, it has read everything the attack stored.
    const own = [await startRun(), await startRun(), await startRun()];
    for (const [i, run] of own.entries()) expect(await createClaimFail('coder', 'helper', run, `kid-${i}`)).toMatchObject({ ok: true });
    const stopped = await stopPacket(own[2]!);
    expect(stopped.packet).toMatchObject({ why: 'circuit_open', agent: 'helper', tried: ['helper'], step: 'code' });

    // coder's runs reviewer named wait for coder, untouched: no stop, no refusal, nothing.
    for (const run of [...victims, fourth]) expect(await types(run)).toEqual(['run.started', 'run.routed']);
    for (const reply of [...attacks, givenUp]) {
      expect(reply).toMatchObject({ ok: false, error: { code: 'not_in_run', kind: 'forbidden' } });
    }
    for (const id of ['self-0', 'self-1', 'self-2', 'self-give-up']) expect(await events('handoff', id)).toEqual([]);
    // reviewer failed nothing: its circuit is closed; helper's is open.
    const open = deployment!.service('watchdog').app.get(GuardRunner).status().open_circuits;
    expect(open).toContain(`${PROJECT}/helper`);
    expect(open).not.toContain(`${PROJECT}/reviewer`);
  }, 60_000);
});
