import { createEventRegistry, type HandoffRecord } from '@baton/contracts';
import { runDecider } from '@baton/domain';
import { batonStreamNames, batonTopology, connectNats, JetStreamEventStore, provision, runConsumer, type NatsHandle } from '@baton/eventstore';
import { jetStreamReplaySource } from '@baton/projections';
import { createBatonClient } from '@baton/sdk';
import { fixtureWorkflow } from '../web/console-fixture.int-support';
import { NATS_USERS, startPermissionedNats, type NatsUser, type PermissionedNats } from './nats-permissions.int-support';

const encoder = new TextEncoder();
const streams = batonStreamNames('baton');

/**
 * Baton's NATS users (infra/nats/permissions/baton-users.conf) against a private nats-server run
 * with that configuration: each service user may publish only to its own subjects.
 */
describe('NATS credentials per service: a service cannot publish outside its subjects (private nats-server with infra/nats/permissions)', () => {
  let server: PermissionedNats;
  const handles = {} as Record<NatsUser, NatsHandle>;

  beforeAll(async () => {
    server = await startPermissionedNats();
    for (const user of NATS_USERS) handles[user] = await connectNats({ servers: server.url, ...server.credentials(user), reconnect: false, timeoutMs: 1500, name: `perm-${user}` });
    await provision(handles.admin.jsm, { streams: batonTopology('baton', { storage: 'memory' }).streams });
  }, 30_000);

  afterAll(async () => {
    for (const user of NATS_USERS) await handles[user]?.close().catch(() => undefined);
    await server?.stop();
  });

  /** Messages stored on `subject` in the stream holding it. */
  const stored = async (stream: string, subject: string) => (await handles.admin.jsm.streams.info(stream, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;

  /** JetStream publish; resolves 'stored' or the error's message. */
  const jsPublish = async (user: NatsUser, subject: string) => {
    try {
      await handles[user].js.publish(subject, encoder.encode('{}'), { timeout: 1500 });
      return 'stored';
    } catch (error) {
      return (error as Error).message;
    }
  };

  it('the agent user cannot publish to <prefix>.ev.> (events), answers, stop requests or offers; the messages are never stored', async () => {
    for (const subject of ['baton.ev.demo.run.wr-1', 'baton.ev.demo.handoff.h-1', 'baton.in.demo.answer', 'baton.in.demo.stop', 'baton.in.demo.offer.coder']) {
      const outcome = await jsPublish('agent', subject);
      expect({ subject, outcome }).toEqual({ subject, outcome: expect.not.stringMatching(/^stored$/) });
      handles.agent.connection.publish(subject, encoder.encode('{}'));
    }
    await handles.agent.connection.flush();
    expect(await stored(streams.events, 'baton.ev.demo.run.wr-1')).toBe(0);
    expect(await stored(streams.events, 'baton.ev.demo.handoff.h-1')).toBe(0);
    expect(await stored(streams.inbox, 'baton.in.demo.answer')).toBe(0);
    expect(server.log()).toMatch(/Publish Violation - User "agent", Subject "baton\.ev\.demo\.run\.wr-1"/);
  });

  it('allowed publishes work: the agent publishes results and run starts; each service writes its own aggregates', async () => {
    expect(await jsPublish('agent', 'baton.in.demo.result.coder')).toBe('stored');
    expect(await jsPublish('agent', 'baton.in.demo.start')).toBe('stored');
    expect(await jsPublish('router', 'baton.ev.demo.run.wr-2')).toBe('stored');
    expect(await jsPublish('ledger', 'baton.ev.demo.handoff.h-2')).toBe('stored');
    expect(await jsPublish('notifier', 'baton.in.demo.answer')).toBe('stored');
    expect(await jsPublish('watchdog', 'baton.in.demo.stop')).toBe('stored');
    expect(await stored(streams.inbox, 'baton.in.demo.result.coder')).toBe(1);
  });

  it('each service writes only its own aggregates and inputs: the router no handoff, the ledger no run, the notifier and the watchdog no event and no result', async () => {
    const refused: Array<[NatsUser, string]> = [
      ['router', 'baton.ev.demo.handoff.h-3'],
      ['ledger', 'baton.ev.demo.run.wr-3'],
      ['notifier', 'baton.ev.demo.run.wr-3'],
      ['notifier', 'baton.in.demo.result.coder'],
      ['watchdog', 'baton.ev.demo.handoff.h-3'],
      ['watchdog', 'baton.in.demo.answer'],
    ];
    for (const [user, subject] of refused) {
      expect({ user, subject, outcome: await jsPublish(user, subject) }).toEqual({ user, subject, outcome: expect.not.stringMatching(/^stored$/) });
    }
    expect(await stored(streams.events, 'baton.ev.demo.handoff.h-3')).toBe(0);
    expect(await stored(streams.events, 'baton.ev.demo.run.wr-3')).toBe(0);
  });

  it('the agent user cannot listen to ledger commands or operator answers, nor delete a stream', async () => {
    const errors: string[] = [];
    const sub = handles.agent.connection.subscribe('baton.cmd.ledger.>', { callback: (err) => err && errors.push(err.message) });
    await handles.agent.connection.flush();
    await new Promise((resolve) => setTimeout(resolve, 200));
    sub.unsubscribe();
    expect(server.log()).toMatch(/Subscription Violation - User "agent", Subject "baton\.cmd\.ledger\.>"/);
    await expect(handles.agent.jsm.streams.delete(streams.events)).rejects.toThrow();
    expect((await handles.admin.jsm.streams.info(streams.events)).config.name).toBe(streams.events);
  });

  it("each user's allow list covers what its code does: the SDK takes offers and publishes as agent; the router appends and reads runs; the notifier runs its durable consumer and replays; the ledger answers requests", async () => {
    const mark = server.log().length;
    const violations = () => server.log().slice(mark).split('\n').filter((line) => line.includes('Violation'));
    // Every service provisions the streams at start.
    for (const user of ['router', 'ledger', 'watchdog', 'notifier'] as const) await provision(handles[user].jsm, { streams: batonTopology('baton', { storage: 'memory' }).streams });
    // The router: the event store's optimistic append and its ordered-consumer read of a run.
    const store = new JetStreamEventStore({ js: handles.router.js, jsm: handles.router.jsm, prefix: 'baton', registry: createEventRegistry() });
    const started = await store.handleCommand(
      { project: 'demo', kind: 'run', id: 'wr-perm' },
      runDecider,
      { type: 'start_run', data: { workflow_run_id: 'wr-perm', project: 'demo', workflow: fixtureWorkflow, people: { started_by: 'sam', issue_author: null, trigger_author: null } }, metadata: { now: new Date().toISOString(), actor: 'router' } },
      { commandId: 'perm-1', occurredAt: new Date().toISOString(), actor: 'router', origin: 'agent', causationId: null, correlationId: 'wr-perm' },
    );
    expect(started.ok).toBe(true);
    expect((await store.read({ project: 'demo', kind: 'run', id: 'wr-perm' })).events.map((e) => e.type)).toContain('run.started');
    // The notifier: a durable consumer on the events stream and a replay (ephemeral ordered consumer).
    await provision(handles.notifier.jsm, { consumers: [{ stream: streams.events, durable: 'perm_notifier', filterSubject: 'baton.ev.>', deliverFrom: 'all' }] });
    const seen: string[] = [];
    const runner = runConsumer({ js: handles.notifier.js, stream: streams.events, durable: 'perm_notifier', prefix: 'baton', pullExpiresMs: 1000, handler: async (msg) => void seen.push(msg.subject) });
    for (let i = 0; i < 60 && !seen.includes('baton.ev.demo.run.wr-perm'); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    await runner.stop();
    expect(seen).toContain('baton.ev.demo.run.wr-perm');
    const replayed: number[] = [];
    for await (const event of jetStreamReplaySource({ nats: handles.notifier, prefix: 'baton', registry: createEventRegistry() })(1)) replayed.push(event.seq);
    expect(replayed.length).toBeGreaterThan(0);
    // The ledger answers a command request (allow_responses), the notifier asks.
    const listener = handles.ledger.connection.subscribe('baton.cmd.ledger.>', { queue: 'ledger', callback: (_err, msg) => msg.respond(encoder.encode('{"ok":false}')) });
    await handles.ledger.connection.flush();
    const reply = await handles.notifier.connection.request('baton.cmd.ledger.demo.get', encoder.encode('{}'), { timeout: 1500 });
    expect(new TextDecoder().decode(reply.data)).toBe('{"ok":false}');
    listener.unsubscribe();
    // The agent through the SDK: its offers consumer on the inbox stream, results and run starts.
    const agent = await createBatonClient({ nats: handles.agent, prefix: 'baton', project: 'demo', agent: 'coder' });
    const subscription = await agent.handoffs({ onOffer: async () => undefined });
    const record = { id: 'h-perm', project: 'demo', to_agent: 'coder' } as unknown as HandoffRecord;
    await handles.ledger.js.publish('baton.in.demo.offer.coder', encoder.encode(JSON.stringify(record)));
    const consumed = async () => (await handles.admin.jsm.consumers.info(streams.inbox, 'offers-demo-coder')).delivered.consumer_seq;
    for (let i = 0; i < 60 && (await consumed()) === 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    await subscription.stop();
    expect(await consumed()).toBeGreaterThan(0);
    expect((await handles.admin.jsm.consumers.info(streams.inbox, 'offers-demo-coder')).num_ack_pending).toBe(0);
    expect((await agent.publishResult({ result_id: 'res-perm', run_id: 'ar-perm', project: 'demo', workflow_run_id: 'wr-perm', agent: 'coder', body: 'done' })).duplicate).toBe(false);
    await agent.close();
    // Nothing any of them did was refused.
    expect(violations()).toEqual([]);
  });

  it('a wrong password is refused', async () => {
    await expect(connectNats({ servers: server.url, user: 'agent', pass: 'wrong', reconnect: false, timeoutMs: 1500 })).rejects.toThrow(/Authorization/i);
    await expect(connectNats({ servers: server.url, reconnect: false, timeoutMs: 1500 })).rejects.toThrow(/Authorization/i);
  });
});
