import { randomBytes } from 'node:crypto';
import { createEventRegistry, Subjects } from '@baton/contracts';
import { compileProject, LOAN_EXAMPLE_YAML } from '@baton/definitions';
import { batonStreamNames, connectNats, JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// The real ledger in-process, started late (test-only cross-app import, like handoff-deadlines.int-spec.ts).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../ledger/src/ledger';
import { startRouter } from './router.app';
import { deleteStreams, publishDefinition, sleep } from './int/support';

/*
 * "Nothing that was acknowledged is ever lost": a run routed while no ledger runs (a deploy, a
 * restart) is dispatched once one does. The router's dispatch reactor used to give up on the
 * `run.routed` after five quick attempts (~5 s) and dead-letter it — a letter on an events
 * subject, which redrive refuses — and the run waited for a handoff nobody would create. Router
 * and ledger in-process on a random prefix, real NATS.
 */
const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const PROJECT = 'outage';
const encoder = new TextEncoder();

describe('a ledger outage delays a run, never loses it (router + ledger, real NATS)', () => {
  const prefix = `lo${randomBytes(5).toString('hex')}`;
  const env = { ...process.env, NATS_URL, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error' };
  let nats: NatsHandle;
  let store: JetStreamEventStore;
  let router: RunningService | undefined;
  let ledger: RunningService | undefined;

  const events = async (kind: 'run' | 'handoff', id: string): Promise<StoredEvent[]> => (await store.read({ project: PROJECT, kind, id })).events;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, reconnect: false });
    router = await startRouter(env);
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
    const compiled = compileProject([{ path: 'loans.yaml', text: LOAN_EXAMPLE_YAML.replace('project: loans', `project: ${PROJECT}`) }]);
    if (compiled.project === null) throw new Error(JSON.stringify(compiled.diagnostics));
    expect(await publishDefinition(nats, prefix, PROJECT, compiled.project)).toMatchObject({ ok: true });
  }, 30_000);

  afterAll(async () => {
    await router?.stop();
    await ledger?.stop();
    await deleteStreams(nats, prefix);
    await nats.close();
  }, 30_000);

  it('a run started while no ledger answers gets its handoff once a ledger starts; nothing is dead-lettered', async () => {
    const body = { workflow_run_id: 'wr-outage', project: PROJECT, workflow: 'loan_session', started_by: 'sam', input: 'I want a loan offer' };
    await nats.js.publish(Subjects.runStart(prefix, PROJECT), encoder.encode(JSON.stringify(body)));
    const routed = await waitFor(async () => (await events('run', 'wr-outage')).find((e) => e.type === 'run.handoff'), 'the run handed off');
    const handoffId = String((routed.payload as { handoffId: unknown }).handoffId);
    // Past the five attempts of about a second each the dispatch used to get.
    await sleep(7_000);
    expect(await events('handoff', handoffId)).toEqual([]);
    ledger = await startLedger(env);
    const created = await waitFor(async () => (await events('handoff', handoffId)).find((e) => e.type === 'handoff.created'), 'the handoff created', {
      timeoutMs: 40_000,
    });
    expect(created.payload).toMatchObject({ handoff_id: handoffId, workflow_run_id: 'wr-outage' });
    const dlq = await nats.jsm.streams.info(batonStreamNames(prefix).dlq).catch(() => null);
    expect(dlq?.state.messages ?? 0).toBe(0);
  }, 60_000);
});
