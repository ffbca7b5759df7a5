import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  claimWithdrawnSubject,
  createEventRegistry,
  edgeRefusalOf,
  inboxPrefixOf,
  ledgerCommandSubject,
  MsgIds,
  offerDurableName,
  Principals,
  type Principal,
} from '@baton/contracts';
import {
  batonStreamNames,
  connectNats,
  credsPath,
  decodeJwtClaims,
  DlqHeader,
  headersFrom,
  issueCreds,
  JetStreamEventStore,
  jwtOfCreds,
  type NatsHandle,
  type StoredEvent,
} from '@baton/eventstore';
import { createBatonClient, startMesh, type BatonAgent } from '@baton/sdk';
import {
  cleanupDeployment,
  DEMO_MESH,
  demoDefinition,
  permissionViolations,
  serviceCredsEnv,
  startAuthNatsServer,
  startPlatform,
  stopService,
  waitFor,
  type AuthNatsServer,
  type ServiceProcess,
} from '@baton/testing';
import { headers, StorageType } from 'nats';
import { Redis } from 'ioredis';

/**
 * The security suite: the whole platform (four services as processes) on a nats-server that runs
 * the configuration `baton nats-config` generates, attacked by an agent of project A with the
 * credentials `baton creds agent` gives it. Every attack must be refused — by the server
 * (a permissions violation) or by a service (a typed, recorded rejection) — and every service must
 * stay up. The counts are printed at the end (docs/reliability.md records them).
 */
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const prefix = `sec${randomBytes(4).toString('hex')}`;
const A = 'acme';
const B = 'globex';
const streams = batonStreamNames(prefix);

const tally = { tried: 0, refusedByServer: 0, refusedByService: 0 };

describe('security: an agent of project A attacks a platform running the generated NATS configuration', () => {
  let server: AuthNatsServer;
  let services: ServiceProcess[] = [];
  let admin: NatsHandle;
  let agent: NatsHandle;
  let redis: Redis;
  /** The attacker's user key: the only one the server may log violations for. */
  let attackerKey = '';

  async function connectAs(principal: Principal): Promise<NatsHandle> {
    const issued = issueCreds(server.deployment, principal);
    return connectNats({
      servers: server.url,
      credsFile: issued.file,
      inboxPrefix: inboxPrefixOf(prefix, principal),
      reconnect: false,
      checkJetStream: principal.kind !== 'agent',
    });
  }

  /** Every act must be answered by the server with a permissions violation on that subject. */
  async function expectServerRefuses(acts: { what: string; subject: string; op: 'publish' | 'subscription'; run: () => void }[]): Promise<void> {
    const seen = await permissionViolations(agent, () => {
      for (const act of acts) act.run();
    });
    tally.tried += acts.length;
    const missing = acts.filter((act) => !seen.includes(`${act.op} ${act.subject}`)).map((act) => act.what);
    tally.refusedByServer += acts.length - missing.length;
    expect(missing).toEqual([]);
  }

  beforeAll(async () => {
    server = await startAuthNatsServer(prefix);
    // The watchdog saves its snapshot every second: with its own credentials, among the attacks.
    services = await startPlatform(
      { NATS_URL: server.url, REDIS_URL, BATON_PREFIX: prefix, LOG_LEVEL: 'warn', WATCHDOG_SNAPSHOT_INTERVAL_MS: '1000' },
      { envFor: serviceCredsEnv(server) },
    );
    admin = await connectAs(Principals.operator('admin'));
    for (const project of [A, B]) {
      const reply = await admin.connection.request(
        `${prefix}.cmd.router.${project}.publish_definition`,
        new TextEncoder().encode(JSON.stringify(demoDefinition(project))),
        { timeout: 10_000 },
      );
      expect(JSON.parse(new TextDecoder().decode(reply.data))).toMatchObject({ ok: true });
    }
    agent = await connectAs(Principals.agent(A, 'support'));
    attackerKey = String(decodeJwtClaims(jwtOfCreds(readFileSync(credsPath(server.deployment, Principals.agent(A, 'support')), 'utf8')))['sub']);
    redis = new Redis(REDIS_URL);
  }, 120_000);

  afterAll(async () => {
    console.log(`security suite: ${tally.tried} attacks tried, ${tally.refusedByServer} refused by the server, ${tally.refusedByService} refused by a service`);
    await agent?.close().catch(() => undefined);
    await Promise.all(services.map((service) => stopService(service)));
    if (admin) await cleanupDeployment(admin, redis, prefix).catch(() => undefined);
    await admin?.close().catch(() => undefined);
    redis?.disconnect();
    await server?.stop();
  }, 60_000);

  it("refuses every publish outside the agent's own subjects: events, answers, stops, offers, other agents and projects, dead letters, notices, router commands", async () => {
    const pub = (what: string, subject: string) => ({
      what,
      subject,
      op: 'publish' as const,
      run: () => agent.connection.publish(subject, new TextEncoder().encode('{}')),
    });
    await expectServerRefuses([
      pub('a forged run event', `${prefix}.ev.${A}.run.forged`),
      pub('a forged handoff event', `${prefix}.ev.${A}.handoff.forged`),
      pub('an operator answer', `${prefix}.in.${A}.answer`),
      pub('a mesh operator answer', `${prefix}.in.${A}.mesh_answer`),
      pub('a stop request', `${prefix}.in.${A}.stop`),
      pub('an offer to another agent', `${prefix}.in.${A}.offer.billing`),
      pub('a result as another agent', `${prefix}.in.${A}.result.billing`),
      pub('a result in another project', `${prefix}.in.${B}.result.support`),
      pub('a run start in another project', `${prefix}.in.${B}.start`),
      pub('a run start as another agent', `${prefix}.in.${A}.start.billing`),
      pub('a mesh start as another agent', `${prefix}.in.${A}.mesh_start.billing`),
      pub('a customer message relayed as another agent', `${prefix}.in.${A}.message.billing`),
      pub('a run start as an agent of another project', `${prefix}.in.${B}.start.support`),
      // Nothing JetStream answers, its own subjects included: JetStream would answer on any reply subject.
      pub('its own result straight into the inbox stream', `${prefix}.in.${A}.result.support`),
      pub('its own run start straight into the inbox stream', `${prefix}.in.${A}.start.support`),
      pub('a pull of its own offers durable straight from JetStream', `$JS.API.CONSUMER.MSG.NEXT.${streams.inbox}.${offerDurableName(A, 'support')}`),
      pub('its own durable`s info straight from JetStream', `$JS.API.CONSUMER.INFO.${streams.inbox}.${offerDurableName(A, 'support')}`),
      pub('an acknowledgement straight to JetStream', `$JS.ACK.${streams.inbox}.${offerDurableName(A, 'support')}.1.1.1.1.0`),
      pub('an edge subject of another agent', `${prefix}.edge.${A}.result.billing`),
      pub('an edge subject of another project', `${prefix}.edge.${B}.start`),
      pub('the offers edge of another agent', `${prefix}.edge.${A}.offers.billing.api.CONSUMER.MSG.NEXT.${streams.inbox}.${offerDurableName(A, 'billing')}`),
      pub('a dead letter', `${prefix}.dlq.router`),
      pub('a redrive marker', `${prefix}.dlq._redriven`),
      pub('a human action notice', `${prefix}.notice.${A}`),
      pub('a definition', `${prefix}.cmd.router.${A}.publish_definition`),
      pub('a ledger command as another agent', `${prefix}.cmd.ledger.${A}.agent.billing.claim`),
      pub('a ledger command in another project', `${prefix}.cmd.ledger.${B}.agent.support.claim`),
      pub('a ledger command as the router', `${prefix}.cmd.ledger.${A}.svc.router.complete_from_result`),
      pub("the router's combined dispatch command", `${prefix}.cmd.ledger.${A}.svc.router.complete_then_create`),
      pub('a ledger command as the watchdog', `${prefix}.cmd.ledger.${A}.svc.watchdog.requeue_expired`),
      pub('pause as the admin', `${prefix}.cmd.ledger.${B}.op.admin.pause`),
      pub('a handback decision as the notifier', `${prefix}.cmd.ledger.${A}.op.notifier.decide_handback`),
    ]);
  });

  it("refuses subscriptions to other principals' inboxes and to project subjects", async () => {
    const sub = (what: string, subject: string) => ({ what, subject, op: 'subscription' as const, run: () => void agent.connection.subscribe(subject) });
    await expectServerRefuses([
      sub('every reply inbox', '_INBOX.>'),
      sub("another project agent's inbox", `${inboxPrefixOf(prefix, Principals.agent(B, 'support'))}.>`),
      sub("the router's inbox", `${inboxPrefixOf(prefix, Principals.service('router'))}.>`),
      sub("the notifier's inbox", `${inboxPrefixOf(prefix, Principals.service('notifier'))}.>`),
      sub('the whole inbox', `${prefix}.in.>`),
      sub("another project's results", `${prefix}.in.${B}.result.*`),
      sub('the events', `${prefix}.ev.>`),
      sub('ledger commands', `${prefix}.cmd.ledger.>`),
      sub("another agent's <prefix>.agent subjects", `${prefix}.agent.${B}.support.>`),
      sub('notices', `${prefix}.notice.>`),
    ]);
  });

  it('refuses consumer create, delete and fetch on other durables and every stream admin call', async () => {
    const api = (what: string, subject: string, body: unknown = {}) => ({
      what,
      subject,
      op: 'publish' as const,
      run: () =>
        agent.connection.publish(subject, new TextEncoder().encode(JSON.stringify(body)), {
          reply: `${inboxPrefixOf(prefix, Principals.agent(A, 'support'))}.x`,
        }),
    });
    const otherOffers = offerDurableName(B, 'support');
    await expectServerRefuses([
      api('create a consumer filtered on another project', `$JS.API.CONSUMER.DURABLE.CREATE.${streams.inbox}.evil`, {
        stream_name: streams.inbox,
        config: { durable_name: 'evil', filter_subject: `${prefix}.in.${B}.>`, ack_policy: 'explicit' },
      }),
      api('create an ephemeral consumer', `$JS.API.CONSUMER.CREATE.${streams.inbox}`, {
        stream_name: streams.inbox,
        config: { filter_subject: `${prefix}.in.>` },
      }),
      api('create its own durable (only the ledger does)', `$JS.API.CONSUMER.DURABLE.CREATE.${streams.inbox}.${offerDurableName(A, 'support')}`),
      api("delete another project's offers durable", `$JS.API.CONSUMER.DELETE.${streams.inbox}.${otherOffers}`),
      api("fetch another project's offers", `$JS.API.CONSUMER.MSG.NEXT.${streams.inbox}.${otherOffers}`, { batch: 1 }),
      api("read another durable's info", `$JS.API.CONSUMER.INFO.${streams.inbox}.${otherOffers}`),
      api('list consumers', `$JS.API.CONSUMER.NAMES.${streams.inbox}`),
      api('ack on another durable', `$JS.ACK.${streams.inbox}.${otherOffers}.1.1.1.1.1`),
      api('read an event directly', `$JS.API.DIRECT.GET.${streams.events}`, { seq: 1 }),
      api('read an event by sequence', `$JS.API.STREAM.MSG.GET.${streams.events}`, { seq: 1 }),
      api('read a dead letter', `$JS.API.STREAM.MSG.GET.${streams.dlq}`, { seq: 1 }),
      api('delete the events stream', `$JS.API.STREAM.DELETE.${streams.events}`),
      api('purge the inbox', `$JS.API.STREAM.PURGE.${streams.inbox}`),
      api('change a stream', `$JS.API.STREAM.UPDATE.${streams.inbox}`),
      api('read stream info', `$JS.API.STREAM.INFO.${streams.events}`),
      api('read account info', '$JS.API.INFO'),
    ]);
  });

  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const runEvents = (store: JetStreamEventStore, id: string) => store.read({ project: A, kind: 'run', id }).then((r) => r.events);

  /** A ledger command on the agent's OWN subject (the server lets it through); the ledger must refuse what the body claims. */
  async function ledgerAsAgent(command: string, body: Record<string, unknown>): Promise<{ ok: boolean; error?: { code: string; kind: string } }> {
    const reply = await agent.connection.request(
      ledgerCommandSubject(prefix, A, Principals.agent(A, 'support'), command),
      encoder.encode(JSON.stringify(body)),
      { timeout: 10_000 },
    );
    return JSON.parse(decoder.decode(reply.data)) as { ok: boolean; error?: { code: string; kind: string } };
  }

  it("refuses, at the ledger, a body that claims another actor, kind or role on the agent's own subject, and commands the agent may not send", async () => {
    const forged: Array<[string, Record<string, unknown>, string]> = [
      ['claim', { handoff_id: 'h-x', idempotency_key: 'k1', actor: 'billing' }, 'identity_mismatch'],
      ['claim', { handoff_id: 'h-x', idempotency_key: 'k2', actor_kind: 'operator' }, 'identity_mismatch'],
      ['decide_handback', { handoff_id: 'h-x', idempotency_key: 'k3', decision: 'accept', actor_kind: 'operator' }, 'identity_mismatch'],
      ['return', { handoff_id: 'h-x', idempotency_key: 'k4', actor_kind: 'operator', report: { summary: 'done', outcome: 'completed' } }, 'identity_mismatch'],
      ['pause', { project: A, pause_id: 'p1', reason: 'x', idempotency_key: 'k5', actor_role: 'admin' }, 'identity_mismatch'],
      ['pause', { project: A, pause_id: 'p2', reason: 'x', idempotency_key: 'k6' }, 'principal_not_allowed'],
      ['resume', { project: A, pause_id: 'p2', idempotency_key: 'k7' }, 'principal_not_allowed'],
      ['complete_from_result', { handoff_id: 'h-x', idempotency_key: 'k8', result_id: 'r-x' }, 'principal_not_allowed'],
      [
        'complete_then_create',
        {
          complete: { handoff_id: 'h-x', idempotency_key: 'k11', result_id: 'r-x', agent: 'support' },
          create: { handoff_id: 'h-y', project: A, from_agent: 'support', to_agent: 'billing', summary: 'next', idempotency_key: 'k12' },
        },
        'principal_not_allowed',
      ],
      ['requeue_expired', { handoff_id: 'h-x', idempotency_key: 'k9', claim_id: 'c-x' }, 'principal_not_allowed'],
      ['expire_deadline', { handoff_id: 'h-x', idempotency_key: 'k10' }, 'principal_not_allowed'],
    ];
    const outcomes: string[] = [];
    for (const [command, body, expected] of forged) {
      const reply = await ledgerAsAgent(command, body);
      tally.tried += 1;
      const code = reply.ok ? 'accepted' : (reply.error?.code ?? '?');
      if (code === expected || (expected === 'principal_not_allowed' && code === 'identity_mismatch')) tally.refusedByService += 1;
      outcomes.push(`${command}: ${code}`);
    }
    expect(outcomes).toEqual(forged.map(([command, , expected]) => `${command}: ${expected}`));
  });

  it("refuses, at the ledger, a request whose reply subject is not the agent's own inbox: nothing is published there (a stream purge, an event, another project's answer, another agent's inbox), each refusal recorded", async () => {
    // A scratch stream the answer would purge if the ledger published it on $JS.API.STREAM.PURGE.
    const scratch = `${prefix.toUpperCase()}_SCRATCH`;
    await admin.jsm.streams.add({ name: scratch, subjects: [`${prefix}-scratch.>`], storage: StorageType.Memory });
    await admin.js.publish(`${prefix}-scratch.x`, encoder.encode('keep me'));
    // Another principal's inbox: B's agent listens on its own prefix for what the ledger would send it.
    const victim = await connectAs(Principals.agent(B, 'support'));
    const heard: string[] = [];
    const trapped = victim.connection.subscribe(`${inboxPrefixOf(prefix, Principals.agent(B, 'support'))}.>`, {
      callback: (_err, msg) => heard.push(msg.subject),
    });
    await victim.connection.flush();
    const targets = [
      `$JS.API.STREAM.PURGE.${scratch}`,
      `${prefix}.ev.${B}.run.wr-poison-1`,
      `${prefix}.in.${B}.answer`,
      `${inboxPrefixOf(prefix, Principals.agent(B, 'support'))}.trap`,
      // NATS's default inbox: not the agent's either.
      `_INBOX.trap`,
    ];
    const subject = ledgerCommandSubject(prefix, A, Principals.agent(A, 'support'), 'open_offers');
    const sent = targets.map((target) => encoder.encode(JSON.stringify({ ack_wait_ms: 30_000 + targets.indexOf(target) })));
    for (const [i, target] of targets.entries()) agent.connection.publish(subject, sent[i]!, { reply: target });
    await agent.connection.flush();

    const letters = await waitFor(
      async () => {
        const info = await admin.jsm.streams.info(streams.dlq, { subjects_filter: `${prefix}.dlq.ledger` });
        const found: Array<{ detail: string; data: Buffer }> = [];
        for (let seq = info.state.last_seq; seq >= info.state.first_seq && info.state.messages > 0; seq--) {
          const msg = await admin.jsm.streams.getMessage(streams.dlq, { seq }).catch(() => null);
          if (msg?.subject === `${prefix}.dlq.ledger` && msg.header.get(DlqHeader.reason) === 'reply_not_allowed') {
            found.push({ detail: msg.header.get(DlqHeader.detail), data: Buffer.from(msg.data) });
          }
        }
        return found.length >= targets.length ? found : undefined;
      },
      'every misdirected request dead-lettered reply_not_allowed',
      { timeoutMs: 30_000 },
    );
    tally.tried += targets.length;
    tally.refusedByService += targets.length;
    for (const [i, target] of targets.entries()) {
      const letter = letters.find((l) => l.data.equals(Buffer.from(sent[i]!)));
      expect({ target, detail: letter?.detail }).toEqual({
        target,
        detail: expect.stringContaining(`reply subject ${target} is not under agent ${A}/support's inbox`),
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await admin.jsm.streams.info(scratch)).state.messages).toBe(1);
    expect((await admin.jsm.streams.info(streams.events, { subjects_filter: `${prefix}.ev.${B}.>` })).state.subjects ?? {}).not.toHaveProperty(
      `${prefix}.ev.${B}.run.wr-poison-1`,
    );
    const inbox = await admin.jsm.streams.info(streams.inbox, { subjects_filter: `${prefix}.in.${B}.answer` });
    expect(inbox.state.subjects ?? {}).toEqual({});
    expect(heard).toEqual([]);
    trapped.unsubscribe();
    await victim.close();
    await admin.jsm.streams.delete(scratch);
  });

  it("cannot aim JetStream's answers anywhere but its own inbox: the edge relays nothing whose reply subject is not the agent's, nor any call beyond its own offers durable (a stream delete, a purge, an event, another project's answer)", async () => {
    const scratch = `${prefix.toUpperCase()}_EDGE_SCRATCH`;
    await admin.jsm.streams.add({ name: scratch, subjects: [`${prefix}-edge-scratch.>`], storage: StorageType.Memory });
    for (let i = 0; i < 3; i++) await admin.js.publish(`${prefix}-edge-scratch.x`, encoder.encode(`keep ${i}`));
    const durable = offerDurableName(A, 'support');
    expect((await ledgerAsAgent('open_offers', {})).ok).toBe(true);
    const edge = (rest: string) => `${prefix}.edge.${A}.${rest}`;
    const result = encoder.encode(JSON.stringify({ note: 'not a result' }));
    // Each would have JetStream answer (a publish ack, a pulled offer, consumer info, an ack's
    // confirmation) on a subject the agent may not publish.
    const misdirected: Array<[string, string, string]> = [
      [edge('result.support'), `$JS.API.STREAM.PURGE.${scratch}`, 'reply_not_allowed'],
      [edge('start.support'), `$JS.API.STREAM.DELETE.${scratch}`, 'reply_not_allowed'],
      [edge('message.support'), `${prefix}.ev.${B}.run.wr-edge`, 'reply_not_allowed'],
      [edge(`offers.support.api.CONSUMER.MSG.NEXT.${streams.inbox}.${durable}`), `${prefix}.in.${B}.answer`, 'reply_not_allowed'],
      [edge(`offers.support.api.CONSUMER.INFO.${streams.inbox}.${durable}`), `$JS.API.STREAM.DELETE.${scratch}`, 'reply_not_allowed'],
      [edge(`offers.support.ack.${streams.inbox}.${durable}.1.1.1.1.0`), `$JS.API.STREAM.DELETE.${scratch}`, 'reply_not_allowed'],
      // Its own edge, but beyond its own offers durable: relayed nowhere whatever the reply.
      [edge(`offers.support.api.STREAM.DELETE.${scratch}`), `${inboxPrefixOf(prefix, Principals.agent(A, 'support'))}.x`, 'no_handler'],
      [
        edge(`offers.support.api.CONSUMER.MSG.NEXT.${streams.inbox}.${offerDurableName(B, 'support')}`),
        `${inboxPrefixOf(prefix, Principals.agent(A, 'support'))}.y`,
        'no_handler',
      ],
      [edge(`offers.support.ack.${streams.inbox}.router-results.1.1.1.1.0`), `${inboxPrefixOf(prefix, Principals.agent(A, 'support'))}.z`, 'no_handler'],
    ];
    // What the edge answers lands on the agent's own inbox only: the three refusals whose reply is its own.
    const answers: Array<{ reply: string; reason: string | undefined }> = [];
    const ownInbox = agent.connection.subscribe(`${inboxPrefixOf(prefix, Principals.agent(A, 'support'))}.>`, {
      callback: (_error, msg) => {
        const status = msg.headers?.get('Baton-Refusal');
        answers.push({
          reply: msg.subject,
          reason: status !== undefined && status !== '' ? status : edgeRefusalOf({ api_error: (msg.json() as { error?: unknown }).error })?.reason,
        });
      },
    });
    await agent.connection.flush();
    for (const [subject, reply] of misdirected) agent.connection.publish(subject, result, { reply });
    await agent.connection.flush();
    const letters = await waitFor(
      async () => {
        const info = await admin.jsm.streams.info(streams.dlq, { subjects_filter: `${prefix}.dlq.ledger-edge` });
        const found: Array<{ subject: string; reason: string }> = [];
        for (let seq = info.state.last_seq; seq >= info.state.first_seq && info.state.messages > 0; seq--) {
          const msg = await admin.jsm.streams.getMessage(streams.dlq, { seq }).catch(() => null);
          if (msg?.subject === `${prefix}.dlq.ledger-edge`)
            found.push({ subject: msg.header.get(DlqHeader.subject), reason: msg.header.get(DlqHeader.reason) });
        }
        return found.length >= misdirected.length ? found : undefined;
      },
      'every misdirected edge message dead-lettered',
      { timeoutMs: 30_000 },
    );
    tally.tried += misdirected.length;
    tally.refusedByService += misdirected.length;
    expect(letters.map((l) => `${l.subject} ${l.reason}`).sort()).toEqual(misdirected.map(([subject, , reason]) => `${subject} ${reason}`).sort());
    await new Promise((resolve) => setTimeout(resolve, 300));
    ownInbox.unsubscribe();
    expect(answers.sort((a, b) => a.reply.localeCompare(b.reply))).toEqual(
      misdirected.filter(([, , reason]) => reason === 'no_handler').map(([, reply]) => ({ reply, reason: 'no_handler' })),
    );
    expect((await admin.jsm.streams.info(scratch)).state.messages).toBe(3);

    // A wildcard reply under its own inbox (nats-server 2.9.10 crashed answering a JetStream call on
    // one), and the same body again under another reply: each refused and each recorded, the body cut
    // to its first 4 KiB.
    const own = inboxPrefixOf(prefix, Principals.agent(A, 'support'));
    const big = encoder.encode('x'.repeat(10_000));
    agent.connection.publish(edge(`offers.support.api.CONSUMER.INFO.${streams.inbox}.${durable}`), big, { reply: `${own}.>` });
    agent.connection.publish(edge(`offers.support.api.CONSUMER.INFO.${streams.inbox}.${durable}`), big, { reply: `${own}.*` });
    await agent.connection.flush();
    const wild = await waitFor(
      async () => {
        const info = await admin.jsm.streams.info(streams.dlq, { subjects_filter: `${prefix}.dlq.ledger-edge` });
        const found: Array<{ detail: string; size: number }> = [];
        for (let seq = info.state.last_seq; seq >= info.state.first_seq && info.state.messages > 0; seq--) {
          const msg = await admin.jsm.streams.getMessage(streams.dlq, { seq }).catch(() => null);
          if (msg?.subject === `${prefix}.dlq.ledger-edge` && msg.header.get(DlqHeader.detail).includes(`${own}.`))
            found.push({ detail: msg.header.get(DlqHeader.detail), size: msg.data.length });
        }
        return found.length >= 2 ? found : undefined;
      },
      'both wildcard replies dead-lettered',
      { timeoutMs: 30_000 },
    );
    tally.tried += 2;
    tally.refusedByService += 2;
    expect(wild.map((w) => w.size)).toEqual([4096, 4096]);
    expect(wild.every((w) => w.detail.includes('first 4096 of 10000 bytes kept'))).toBe(true);
    // The server is still there.
    expect((await admin.jsm.streams.info(scratch)).state.messages).toBe(3);
    expect((await admin.jsm.streams.info(streams.events, { subjects_filter: `${prefix}.ev.${B}.>` })).state.subjects ?? {}).not.toHaveProperty(
      `${prefix}.ev.${B}.run.wr-edge`,
    );
    expect((await admin.jsm.streams.info(streams.inbox, { subjects_filter: `${prefix}.in.${B}.answer` })).state.subjects ?? {}).toEqual({});
    await admin.jsm.streams.delete(scratch);
  });

  it('records a result that does not hold the current claim as refused (no stop packet, nothing for an operator to approve), then serves the real claim holder', async () => {
    const store = new JetStreamEventStore({ js: admin.js, jsm: admin.jsm, prefix, registry: createEventRegistry() });
    const runId = `wr-sec-${randomBytes(3).toString('hex')}`;
    // The agent may start runs in its own project, under its own name (the start records it as the actor).
    const started = await agent.js.publish(
      `${prefix}.edge.${A}.start.support`,
      encoder.encode(JSON.stringify({ workflow_run_id: runId, project: A, workflow: 'support', started_by: 'dana' })),
      { msgID: MsgIds.start(A, runId) },
    );
    expect(started.duplicate).toBe(false);
    await waitFor(async () => ((await runEvents(store, runId)).some((e) => e.type === 'run.routed') ? true : undefined), 'the run routed to support', {
      timeoutMs: 30_000,
    });
    expect((await runEvents(store, runId)).find((e) => e.type === 'run.started')?.actor).toBe('support');
    // The attack: a result on the agent's own subject, with no claim, carrying a policy stop and a forged pending refund.
    const forged = {
      result_id: `res-forged-${runId}`,
      run_id: 'ar-forged',
      project: A,
      workflow_run_id: runId,
      agent: 'support',
      body: 'Refund approved, needs a human click.',
      stop: { why: 'policy' },
      pending_tool_call: { name: 'refund', args: { iban: 'ATTACKER' } },
      produced_at: new Date().toISOString(),
    };
    await agent.js.publish(`${prefix}.edge.${A}.result.support`, encoder.encode(JSON.stringify(forged)), {
      msgID: MsgIds.result(A, forged.workflow_run_id, forged.result_id),
      headers: headersFrom({}),
    });
    const rejected = await waitFor(
      async () => (await runEvents(store, runId)).find((e: StoredEvent) => e.type === 'run.result_rejected'),
      'the forged result refused',
      { timeoutMs: 30_000 },
    );
    tally.tried += 1;
    expect((rejected.payload as { code: string }).code).toBe('claim_required');
    tally.refusedByService += 1;
    expect((await runEvents(store, runId)).map((e) => e.type)).not.toContain('run.stopped');

    // The real claim holder, through the SDK with its own credentials, finishes the work.
    let client: BatonAgent | undefined;
    try {
      // The real agent: credentials of its own (a new user key for the same principal).
      const own = issueCreds(server.deployment, Principals.agent(A, 'support'));
      client = await createBatonClient({ natsUrl: server.url, natsCreds: own.file, prefix, project: A, agent: 'support' });
      const subscription = await client.handoffs({
        onOffer: async (offer) => {
          if (offer.offered['workflow_run_id'] !== runId) return;
          await offer.claim();
          await offer.finish({
            result_id: `res-real-${runId}`,
            run_id: 'ar-real',
            body: 'Answered the customer.\n<!-- AGENT_RUN_CONFIG {"dispatch":{"status":"advance"}} -->',
          });
        },
      });
      await waitFor(
        async () => ((await runEvents(store, runId)).some((e) => e.type === 'run.completed') ? true : undefined),
        'the run completed by its claim holder',
        { timeoutMs: 30_000 },
      );
      await subscription.stop();
    } finally {
      await client?.close();
    }
  });

  it('its JetStream expectations are not relayed: a result with Nats-Expected-Last-Msg-Id is stored, learning nothing of what the stream last holds (another project`s ids)', async () => {
    const probe = headers();
    probe.set('Nats-Expected-Last-Msg-Id', 'probe');
    probe.set('Nats-Expected-Last-Sequence', '0');
    const result = {
      result_id: `probe-${randomBytes(3).toString('hex')}`,
      run_id: 'ar-probe',
      project: A,
      workflow_run_id: 'wr-probe',
      agent: 'support',
      produced_at: new Date().toISOString(),
    };
    const body = encoder.encode(JSON.stringify(result));
    const ack = await agent.js.publish(`${prefix}.edge.${A}.result.support`, body, { headers: probe });
    expect(ack.duplicate).toBe(false);
    const stored = await admin.jsm.streams.getMessage(streams.inbox, { seq: ack.seq });
    expect(stored.subject).toBe(`${prefix}.in.${A}.result.support`);
    expect(stored.header?.get('Nats-Expected-Last-Msg-Id') ?? '').toBe('');
    tally.tried += 1;
    tally.refusedByService += 1;
  });

  it("never answers on a sibling's notice subject: a shared subject's reply may name an inbox of any agent of the project, never its …withdrawn subject; and a body the router would refuse is refused at the edge, answered with the fields", async () => {
    const sibling = claimWithdrawnSubject(prefix, A, 'sibling');
    const heard: string[] = [];
    const trap = admin.connection.subscribe(sibling, { callback: (_error, msg) => heard.push(new TextDecoder().decode(msg.data)) });
    await admin.connection.flush();
    const runId = `wr-notice-${randomBytes(3).toString('hex')}`;
    const start = encoder.encode(JSON.stringify({ workflow_run_id: runId, project: A, workflow: 'support', started_by: 'dana' }));
    // A good start (JetStream's ack would land there) and a refused one (the edge's answer would).
    const withId = (id: string) => {
      const h = headers();
      h.set('Nats-Msg-Id', id);
      return h;
    };
    agent.connection.publish(`${prefix}.edge.${A}.start`, start, { reply: sibling, headers: withId(MsgIds.start(A, runId)) });
    agent.connection.publish(`${prefix}.edge.${A}.start`, start, { reply: sibling, headers: withId(MsgIds.start(B, runId)) });
    await agent.connection.flush();
    const letters = await waitFor(
      async () => {
        const info = await admin.jsm.streams.info(streams.dlq, { subjects_filter: `${prefix}.dlq.ledger-edge` });
        const found: string[] = [];
        for (let seq = info.state.last_seq; seq >= info.state.first_seq && info.state.messages > 0; seq--) {
          const msg = await admin.jsm.streams.getMessage(streams.dlq, { seq }).catch(() => null);
          if (msg !== null && Buffer.from(msg.data).equals(Buffer.from(start))) found.push(msg.header.get(DlqHeader.reason));
        }
        return found.length >= 2 ? found : undefined;
      },
      'both starts dead-lettered at the edge',
      { timeoutMs: 30_000 },
    );
    expect(letters).toEqual(['reply_not_allowed', 'reply_not_allowed']);
    await new Promise((resolve) => setTimeout(resolve, 300));
    trap.unsubscribe();
    expect(heard).toEqual([]);
    expect(await runEvents(new JetStreamEventStore({ js: admin.js, jsm: admin.jsm, prefix, registry: createEventRegistry() }), runId)).toEqual([]);
    tally.tried += 2;
    tally.refusedByService += 2;

    // A result with a field its schema does not have: answered at once with the field, nothing stored.
    const result = {
      result_id: 'r-extra',
      run_id: 'ar-1',
      project: A,
      workflow_run_id: runId,
      agent: 'support',
      produced_at: new Date().toISOString(),
      colour: 'blue',
    };
    const refused = await agent.js.publish(`${prefix}.edge.${A}.result.support`, encoder.encode(JSON.stringify(result)), { timeout: 20_000 }).then(
      () => null,
      (error: unknown) => edgeRefusalOf(error),
    );
    expect(refused).toMatchObject({ reason: 'schema_violation', issues: [expect.objectContaining({ message: expect.stringContaining('colour') })] });
    tally.tried += 1;
    tally.refusedByService += 1;
  });

  it('an agent with its own credentials starts a mesh through its edge (meshPublisher): the start is relayed and records the agent', async () => {
    const store = new JetStreamEventStore({ js: admin.js, jsm: admin.jsm, prefix, registry: createEventRegistry() });
    const own = issueCreds(server.deployment, Principals.agent(A, 'support'));
    const client = await createBatonClient({ natsUrl: server.url, natsCreds: own.file, prefix, project: A, agent: 'support' });
    try {
      const meshRunId = `mesh-edge-${randomBytes(3).toString('hex')}`;
      const receipt = await startMesh(client.meshPublisher(), {
        mesh_run_id: meshRunId,
        project: A,
        mesh: DEMO_MESH.name,
        input: 'charged twice',
        started_by: 'dana',
      });
      expect(receipt.duplicate).toBe(false);
      const started = await waitFor(
        async () => (await store.read({ project: A, kind: 'mesh', id: meshRunId })).events.find((e) => e.type === 'mesh.started'),
        'the mesh started from the agent edge',
        { timeoutMs: 30_000 },
      );
      expect(started).toMatchObject({ actor: 'support', origin: 'agent' });
    } finally {
      await client.close();
    }
  });

  it("refuses and records a start published under another project's message id (taken first to drop that project's start as a duplicate): the edge stores nothing, and that project's start goes through", async () => {
    const store = new JetStreamEventStore({ js: admin.js, jsm: admin.jsm, prefix, registry: createEventRegistry() });
    const victimRun = `wr-victim-${randomBytes(3).toString('hex')}`;
    const squat = encoder.encode(JSON.stringify({ workflow_run_id: victimRun, project: A, workflow: 'support', started_by: 'dana' }));
    // The agent may set any Nats-Msg-Id; the edge relays none that names another project or kind.
    // Answered at once on the agent's own inbox with the edge's reason (a JetStream API error), not left to time out.
    const taken = await agent.js.publish(`${prefix}.edge.${A}.start`, squat, { msgID: MsgIds.start(B, victimRun), timeout: 20_000 }).then(
      () => 'stored',
      (error: unknown) => edgeRefusalOf(error)?.reason ?? `not answered: ${String(error)}`,
    );
    expect(taken).toBe('msg_id_mismatch');
    const letter = await waitFor(
      async () => {
        const info = await admin.jsm.streams.info(streams.dlq, { subjects_filter: `${prefix}.dlq.ledger-edge` });
        for (let seq = info.state.last_seq; seq >= info.state.first_seq && info.state.messages > 0; seq--) {
          const msg = await admin.jsm.streams.getMessage(streams.dlq, { seq }).catch(() => null);
          if (msg?.header.get(DlqHeader.reason) === 'msg_id_mismatch' && Buffer.from(msg.data).equals(Buffer.from(squat))) return msg;
        }
        return undefined;
      },
      'the squatting start dead-lettered at the edge',
      { timeoutMs: 30_000 },
    );
    tally.tried += 1;
    tally.refusedByService += 1;
    expect(letter.header.get(DlqHeader.subject)).toBe(`${prefix}.edge.${A}.start`);
    expect(letter.header.get(DlqHeader.detail)).toContain(`names project '${B}'`);
    // B's own start under that id is not a duplicate: the id was never taken.
    const own = await admin.js.publish(
      `${prefix}.in.${B}.start`,
      encoder.encode(JSON.stringify({ workflow_run_id: victimRun, project: B, workflow: 'support', started_by: 'dana' })),
      {
        msgID: MsgIds.start(B, victimRun),
      },
    );
    expect(own.duplicate).toBe(false);
    await waitFor(
      async () => ((await store.read({ project: B, kind: 'run', id: victimRun })).events.some((e) => e.type === 'run.started') ? true : undefined),
      'the victim project`s run started',
      { timeoutMs: 30_000 },
    );
    expect(await runEvents(store, victimRun)).toEqual([]);
  });

  it("refuses and records a message id header spelled otherwise or given twice (a decoy the edge would read, another project's id JetStream keeps), and a redrive's id: nothing stored, that project's start goes through", async () => {
    const store = new JetStreamEventStore({ js: admin.js, jsm: admin.jsm, prefix, registry: createEventRegistry() });
    const victimRun = `wr-case-${randomBytes(3).toString('hex')}`;
    /** Headers exactly as listed: names as spelled, values in order (the client would not change them). */
    const raw = (pairs: Array<[string, string]>) => {
      const h = headers();
      const map = (h as unknown as { headers: Map<string, string[]> }).headers;
      for (const [key, value] of pairs) map.set(key, [...(map.get(key) ?? []), value]);
      return h;
    };
    const attacks: Array<{ reason: string; detail: string; pairs: Array<[string, string]> }> = [
      {
        reason: 'schema_violation',
        detail: 'spelled so',
        pairs: [
          ['nats-msg-id', MsgIds.start(A, `decoy-${victimRun}`)],
          ['Nats-Msg-Id', MsgIds.start(B, victimRun)],
        ],
      },
      {
        reason: 'schema_violation',
        detail: 'spelled so',
        pairs: [
          ['NATS-MSG-ID', MsgIds.start(A, `decoy-${victimRun}`)],
          ['Nats-Msg-Id', MsgIds.start(B, victimRun)],
        ],
      },
      {
        reason: 'schema_violation',
        detail: 'one Nats-Msg-Id',
        pairs: [
          ['Nats-Msg-Id', MsgIds.start(A, `decoy-${victimRun}`)],
          ['Nats-Msg-Id', MsgIds.start(B, victimRun)],
        ],
      },
      { reason: 'msg_id_mismatch', detail: 'dead-letter redrive', pairs: [['Nats-Msg-Id', `redrive:${streams.dlq}:1`]] },
    ];
    for (const [i, attack] of attacks.entries()) {
      const body = encoder.encode(JSON.stringify({ workflow_run_id: `${victimRun}-${i}`, project: A, workflow: 'support', started_by: 'dana' }));
      const taken = await agent.js.publish(`${prefix}.edge.${A}.start`, body, { headers: raw(attack.pairs), timeout: 20_000 }).then(
        () => 'stored',
        (error: unknown) => edgeRefusalOf(error)?.reason ?? `not answered: ${String(error)}`,
      );
      expect({ attack: attack.pairs, taken }).toEqual({ attack: attack.pairs, taken: attack.reason });
      const letter = await waitFor(
        async () => {
          const info = await admin.jsm.streams.info(streams.dlq, { subjects_filter: `${prefix}.dlq.ledger-edge` });
          for (let seq = info.state.last_seq; seq >= info.state.first_seq && info.state.messages > 0; seq--) {
            const msg = await admin.jsm.streams.getMessage(streams.dlq, { seq }).catch(() => null);
            if (msg !== null && Buffer.from(msg.data).equals(Buffer.from(body))) return msg;
          }
          return undefined;
        },
        'the message dead-lettered at the edge',
        { timeoutMs: 30_000 },
      );
      expect(letter.header.get(DlqHeader.reason)).toBe(attack.reason);
      expect(letter.header.get(DlqHeader.detail)).toContain(attack.detail);
      tally.tried += 1;
      tally.refusedByService += 1;
    }
    // B's own start under the id the attacks carried is no duplicate: none of them was stored.
    const own = await admin.js.publish(
      `${prefix}.in.${B}.start`,
      encoder.encode(JSON.stringify({ workflow_run_id: victimRun, project: B, workflow: 'support', started_by: 'dana' })),
      { msgID: MsgIds.start(B, victimRun) },
    );
    expect(own.duplicate).toBe(false);
    await waitFor(
      async () => ((await store.read({ project: B, kind: 'run', id: victimRun })).events.some((e) => e.type === 'run.started') ? true : undefined),
      'the victim project`s run started',
      { timeoutMs: 30_000 },
    );
  });

  it('survives a durable consumer deleted under the running router: it is re-created and later input is still routed', async () => {
    const store = new JetStreamEventStore({ js: admin.js, jsm: admin.jsm, prefix, registry: createEventRegistry() });
    const consumers: string[] = [];
    for await (const info of admin.jsm.consumers.list(streams.inbox)) consumers.push(info.name);
    const routerStarts = consumers.filter((name) => name.startsWith('router') && name.includes('start'));
    expect(routerStarts.length).toBeGreaterThan(0);
    for (const name of routerStarts) await admin.jsm.consumers.delete(streams.inbox, name);
    const runId = `wr-sec-lost-${randomBytes(3).toString('hex')}`;
    await agent.js.publish(
      `${prefix}.edge.${A}.start`,
      encoder.encode(JSON.stringify({ workflow_run_id: runId, project: A, workflow: 'support', started_by: 'dana' })),
      { msgID: MsgIds.start(A, runId) },
    );
    await waitFor(
      async () => ((await runEvents(store, runId)).some((e) => e.type === 'run.routed') ? true : undefined),
      'a start routed after the consumer loss',
      { timeoutMs: 60_000 },
    );
    tally.tried += 1;
    tally.refusedByService += 1;
  }, 90_000);

  it('the watchdog saves its snapshot with its own credentials (making, writing, reading and purging its stream), and nothing else may', async () => {
    const watchdog = services.find((service) => service.name === 'watchdog')!;
    const status = await waitFor(
      async () => {
        const body = (await (await fetch(`http://127.0.0.1:${watchdog.port}/watchdog/status`)).json()) as { snapshots: { saves: number; failures: number } };
        return body.snapshots.saves >= 2 ? body.snapshots : undefined;
      },
      "the watchdog's snapshots",
      { timeoutMs: 20_000 },
    );
    expect(status.failures).toBe(0);
    await expectServerRefuses([
      {
        what: 'write a snapshot head',
        subject: `${prefix}.wd.head`,
        op: 'publish',
        run: () => agent.connection.publish(`${prefix}.wd.head`, new TextEncoder().encode('{}')),
      },
    ]);
  }, 30_000);

  it('lets no service or legitimate client hit a permission it lacks (the server logged violations only for the attacker)', () => {
    const lines = server.output
      .join('')
      .split('\n')
      .filter((line) => /Violation/.test(line));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.filter((line) => !line.includes(attackerKey))).toEqual([]);
  });

  it('keeps every service up after all of that', async () => {
    for (const service of services) {
      const response = await fetch(`http://127.0.0.1:${service.port}/health/ready`);
      expect({ service: service.name, status: response.status }).toEqual({ service: service.name, status: 200 });
    }
  });
});
