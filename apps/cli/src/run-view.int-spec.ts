import { randomBytes } from 'node:crypto';
import { createEventRegistry, ProjectDefinitionSchema } from '@baton/contracts';
import { runDecider, type RunCommand } from '@baton/domain';
import { JetStreamEventStore, batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import { main } from './main';
import { bufferedIo } from './output';

/**
 * `baton run` shows the run view of issue 14: the waiting parent of a returnable handoff, the
 * routes with their rule and reason, and the variables with the declared ones apart from the
 * implicit ones (here folded from the events stream: no projection holds the run).
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

const loans = ProjectDefinitionSchema.parse({
  project: 'loans',
  agents: [
    {
      name: 'Loan_Supervisor',
      memory: [{ name: 'annual_income', type: 'number' }],
      handoffs: [
        { to: 'Income_Capture_Agent', when: { kind: 'expression', source: 'annual_income IS NOT SET' }, summary: 'Collect the income.', return: true },
      ],
    },
    { name: 'Income_Capture_Agent', gather: [{ name: 'annual_income', type: 'number' }] },
  ],
  workflows: [{ name: 'loan_session', version: 1, entry: 'converse', steps: [{ id: 'converse', agent: 'Loan_Supervisor', terminal: true }] }],
});

describe('baton run: waiting parents, routes with rule and reason, declared and implicit variables (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, { io, env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix } });
    return { code, out: io.out(), err: io.err() };
  }

  beforeAll(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const now = '2026-02-01T10:00:00.000Z';
    const command: RunCommand = {
      type: 'start_run',
      data: {
        workflow_run_id: 'wr-loan',
        project: 'loans',
        workflow: loans.workflows[0]!,
        agents: loans.agents,
        people: { started_by: 'sam', issue_author: null, trigger_author: null },
        variables: { channel: 'web', input: 'I want a loan offer' },
        input: 'I want a loan offer',
      },
      metadata: { now, actor: 'sam' },
    };
    const result = await store.handleCommand({ project: 'loans', kind: 'run', id: 'wr-loan' }, runDecider, command, {
      commandId: 'start-1',
      occurredAt: now,
      actor: 'router',
      origin: 'engine_fallback',
      causationId: null,
      correlationId: 'wr-loan',
    });
    if (!result.ok) throw new Error(result.error.code);
  });

  afterAll(async () => {
    const names = batonStreamNames(prefix);
    for (const stream of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(stream).catch(() => undefined);
    await nats.close();
  });

  it('prints the waiting parent, the route with its rule and reason, and the variables declared apart from implicit', async () => {
    const shown = await baton('run', 'wr-loan', '--project', 'loans');
    expect(shown.code).toBe(0);
    expect(shown.out).toContain('Waiting parents (innermost last):\n  Loan_Supervisor at converse waits for Income_Capture_Agent');
    expect(shown.out).toMatch(
      /Routes \(rule: reason\):\n {2}seq \d+ dispatch Loan_Supervisor → Income_Capture_Agent at converse by handoff \(engine_fallback\) \[returnable handoff, route 0\]: returnable handoff Loan_Supervisor → Income_Capture_Agent: Collect the income\./,
    );
    expect(shown.out).toContain(
      'Variables:\n  declared: (none set); not set: annual_income\n  implicit (no agent declares them): channel="web", input="I want a loan offer"\n',
    );
    expect(shown.out).toMatch(/pending handoff: +\S+: Loan_Supervisor → Income_Capture_Agent \(returnable, route 0, ON_FAILURE continue\)/);
    // The timeline says who decided each event and on whose account (routing.md rule 12).
    expect(shown.out).toMatch(/\n *seq +time +event +actor +origin +what\n/i);
    expect(shown.out).toMatch(/run\.message_received +customer +human /);
  });

  it('--json and --at carry the same view fields', async () => {
    const json = JSON.parse((await baton('run', 'wr-loan', '--project', 'loans', '--json')).out) as { run: Record<string, unknown> };
    expect(json.run).toMatchObject({
      declared_variables: {},
      implicit_variables: { channel: 'web', input: 'I want a loan offer' },
      waiting_parents: [expect.objectContaining({ agent: 'Loan_Supervisor' })],
    });
    const first = JSON.parse((await baton('run', 'wr-loan', '--project', 'loans', '--at', '1', '--json')).out) as { run: Record<string, unknown> };
    // As of run.started only: nobody waits yet and nothing was routed.
    expect(first.run).toMatchObject({ waiting_parents: [], routes: [], declared_variables: {}, unset_declared_variables: ['annual_income'] });
  });

  it("a refused operator answer's line names the person who answered (as its actor column does), not the role word", async () => {
    const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const now = '2026-02-01T10:05:00.000Z';
    // As the router records it: agent `operator` (the role word), the envelope's actor the person.
    const command: RunCommand = {
      type: 'reject_result',
      data: {
        result_id: 'race-alice',
        agent: 'operator',
        code: 'run_not_stopped',
        message: 'answer race-alice by alice: run wr-loan is running',
        refused: 'answer',
      },
      metadata: { now, actor: 'baton-router' },
    };
    const result = await store.handleCommand({ project: 'loans', kind: 'run', id: 'wr-loan' }, runDecider, command, {
      commandId: 'answer-refused-1',
      occurredAt: now,
      actor: 'alice',
      origin: 'operator',
      causationId: 'race-alice',
      correlationId: 'wr-loan',
    });
    if (!result.ok) throw new Error(result.error.code);
    const shown = await baton('run', 'wr-loan', '--project', 'loans');
    expect(shown.out).toMatch(/run\.result_rejected +alice +operator +answer race-alice by alice rejected \(run_not_stopped\): run wr-loan is running\n/);
    expect(shown.out).not.toContain('from operator');
    const json = JSON.parse((await baton('run', 'wr-loan', '--project', 'loans', '--json')).out) as { timeline: Array<{ actor: string; summary: string }> };
    expect(json.timeline.at(-1)).toMatchObject({ actor: 'alice', summary: expect.stringMatching(/^answer race-alice by alice rejected/) });
  });
});
