import 'reflect-metadata';
import { createEventRegistry, Principals, type ProjectDefinition } from '@baton/contracts';
import { compileProject, LOAN_EXAMPLE_YAML } from '@baton/definitions';
import { JetStreamEventStore, LedgerClient } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// Test only: the real services in this process, so the CLI meets the API's and the router's own answers.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startRouter } from '../../router/src/router.app';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the notifier's fixture: a token key, the notifier in process, cleanup of streams and keys
import { authFixture } from '../../notifier/src/auth/auth.int-support';
import { main } from './main';
import { bufferedIo } from './output';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const P = 'refusals';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The project: a two-step workflow `feature` (issue → architect), which takes no customer message, and seed 001's loan conversation `loan_session`. */
function definition(): ProjectDefinition {
  const loans = compileProject([{ path: 'loans.yaml', text: LOAN_EXAMPLE_YAML }]).project!;
  return {
    project: P,
    lead: 'lena',
    agents: [{ name: 'issue', role: 'Triage' }, { name: 'architect', role: 'Architect' }, ...loans.agents],
    workflows: [
      {
        name: 'feature',
        version: 1,
        entry: 'triage',
        steps: [
          { id: 'triage', agent: 'issue', next: 'analyze' },
          { id: 'analyze', agent: 'architect', terminal: true },
        ],
      },
      ...loans.workflows,
    ],
  } as ProjectDefinition;
}

interface Failure {
  error: { code: string; message: string; issues: unknown[]; details?: Record<string, unknown> };
}

/*
 * What the CLI's `--json` failure line says of a refusal, against the real operator API (notifier,
 * ledger and router in this process, real NATS and Redis):
 * - the HTTP status is `details.http_status` alone; `details.status` is the API's own detail (a
 *   handoff's status, a string) when it sent one, and absent when it did not — never the HTTP status;
 * - `baton message` reusing an id with other text is `message_id_reused` whatever became of the
 *   first message: the run refused it (a workflow run takes no customer messages) or queued it (a
 *   conversation), the stream having dropped the second as the first's duplicate.
 */
describe('the CLI against the real operator API and router: refusal details, a message id reused', () => {
  const services: RunningService[] = [];
  const fixture = authFixture({
    prefix: 'rd',
    dir: 'cli-refusals',
    env: () => ({ NATS_URL, REDIS_URL }),
    beforeStart: async (f) => {
      const env = { ...process.env, NATS_URL, REDIS_URL, BATON_PREFIX: f.prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' };
      services.push(await startLedger({ ...env, BATON_INSTANCE: 'cli-refusals-ledger' }), await startRouter(env));
      // Stopped before the notifier, last started first.
      f.beforeStop(async () => {
        for (const service of services.reverse()) await service.stop().catch(() => undefined);
      });
    },
  });
  let token = '';

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, {
      io,
      env: { NATS_URL, REDIS_URL, BATON_PREFIX: fixture.prefix, BATON_API_URL: fixture.base, BATON_TOKEN: token, BATON_OPERATOR: 'olga' },
    });
    return { code, out: io.out(), err: io.err() };
  }

  /** A `--json` failure: exit 1, the one stderr line, and the API's reply on stdout when it refused. */
  const failure = (ran: { code: number; err: string }) => {
    expect(ran.code).toBe(1);
    expect(ran.err.trim().split('\n')).toHaveLength(1);
    return (JSON.parse(ran.err) as Failure).error;
  };

  beforeAll(async () => {
    token = (await fixture.admin.create({ name: 'olga', role: 'operator', projects: [P], now: new Date().toISOString() })).token;
    const reply = await fixture.nats.connection.request(`${fixture.prefix}.cmd.router.${P}.publish_definition`, encoder.encode(JSON.stringify(definition())), {
      timeout: 10_000,
    });
    expect(JSON.parse(decoder.decode(reply.data))).toMatchObject({ ok: true });
  }, 30_000);

  it('details.http_status is the HTTP status; details.status is there only when the API sent it (a handoff status), never the HTTP status', async () => {
    const created = await new LedgerClient(fixture.nats, fixture.prefix, { as: Principals.agent(P, 'issue') }).create(P, {
      handoff_id: 'h-1',
      from_agent: 'issue',
      to_agent: 'architect',
      summary: 'work h-1',
      idempotency_key: 'create-h-1',
    });
    expect(created).toMatchObject({ ok: true });
    expect(await baton('abandon', 'h-1', '--reason', 'bye', '--project', P, '--key', 'k9')).toMatchObject({ code: 0 });

    // The same key with another reason: the API's details carry no status, so neither does the line.
    const reused = await baton('abandon', 'h-1', '--reason', 'bye2', '--project', P, '--key', 'k9', '--json');
    const keyReused = failure(reused);
    expect(keyReused.code).toBe('idempotency_key_reused');
    expect(keyReused.details).toEqual({
      idempotency_key: 'k9',
      command: 'abandon',
      outcome: 'refused',
      handoff_id: 'h-1',
      project: P,
      abandoned_reason: 'bye',
      http_status: 409,
    });
    // Beside the API's own details, unchanged (its reply stays on stdout).
    expect((JSON.parse(reused.out) as Failure).error.details).toEqual({ ...keyReused.details, http_status: undefined });

    // A stop packet that does not exist: the API's 404 has no details of its own.
    const missing = failure(await baton('answer', 'nosuch', '--project', P, '--action', 'deny', '--json'));
    expect(missing).toMatchObject({ code: 'not_found' });
    expect(missing.details).toEqual({ http_status: 404 });

    // A new abandon of a handoff that ended: the ledger's status of the handoff, a string, kept as it sent it.
    const ended = await baton('abandon', 'h-1', '--reason', 'bye3', '--project', P, '--json');
    const notOpen = failure(ended);
    expect(notOpen.code).toBe('handoff_not_open');
    expect(notOpen.details).toMatchObject({ status: 'abandoned', ended: 'handoff_abandoned', outcome: 'refused', handoff_id: 'h-1', http_status: 409 });
    expect(notOpen.details).toEqual({ ...(JSON.parse(ended.out) as Failure).error.details, http_status: 409 });
  });

  it('baton message: an id reused with other text is message_id_reused whether the run refused the first message or queued it; the same text again reports the first outcome', async () => {
    const store = new JetStreamEventStore({ js: fixture.nats.js, jsm: fixture.nats.jsm, prefix: fixture.prefix, registry: createEventRegistry() });
    const underWay = (runId: string) =>
      waitFor(
        async () => (await store.read({ project: P, kind: 'run', id: runId })).events.find((e) => e.type === 'run.routed' || e.type === 'run.handoff'),
        `run ${runId} under way`,
        { timeoutMs: 20_000 },
      );
    const message = async (runId: string, text: string) => {
      const sent = await baton('message', runId, '--project', P, '--text', text, '--id', 'm1', '--json');
      return { code: sent.code, out: JSON.parse(sent.out) as Record<string, unknown>, err: sent.err };
    };

    // A workflow run takes no customer message: the first is refused with the run's code.
    expect((await baton('start', 'feature', '--run', 'wr-msg', '--project', P)).code).toBe(0);
    await underWay('wr-msg');
    const first = await message('wr-msg', 'hi');
    expect(first).toMatchObject({ code: 1, out: { outcome: 'refused', code: 'run_not_awaiting_input', duplicate: false } });
    // The same message again: the retry hears the first one's outcome.
    expect(await message('wr-msg', 'hi')).toMatchObject({ code: 1, out: { outcome: 'refused', code: 'run_not_awaiting_input', duplicate: true } });
    // Another text under the id: not stored (the stream dropped it as the first's duplicate), and said so.
    const reused = await message('wr-msg', 'hello');
    expect(reused).toMatchObject({ code: 1, out: { outcome: 'refused', code: 'message_id_reused', duplicate: true } });
    expect(JSON.parse(reused.err)).toEqual({
      error: { code: 'message_id_reused', message: expect.stringContaining('with other text: this text was not stored'), issues: [] },
    });

    // A conversation whose agent works: the first is queued; other text under the id is message_id_reused too.
    expect((await baton('start', 'loan_session', '--run', 'loan-msg', '--project', P, '--input', 'I want a loan offer')).code).toBe(0);
    await underWay('loan-msg');
    expect(await message('loan-msg', 'About 52000 a year')).toMatchObject({ code: 0, out: { outcome: 'queued', position: 1, duplicate: false } });
    expect(await message('loan-msg', 'About 52000 a year')).toMatchObject({ code: 0, out: { outcome: 'queued', duplicate: true } });
    expect(await message('loan-msg', 'Actually 60000')).toMatchObject({ code: 1, out: { outcome: 'refused', code: 'message_id_reused', duplicate: true } });
  }, 60_000);
});
