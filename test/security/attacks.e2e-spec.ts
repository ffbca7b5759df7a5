import { randomBytes } from 'node:crypto';
import { inboxPrefixOf, offerDurableName, Principals, type Principal } from '@baton/contracts';
import { batonStreamNames, connectNats, issueCreds, type NatsHandle } from '@baton/eventstore';
import {
  cleanupDeployment,
  demoDefinition,
  permissionViolations,
  serviceCredsEnv,
  startAuthNatsServer,
  startPlatform,
  stopService,
  type AuthNatsServer,
  type ServiceProcess,
} from '@baton/testing';
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
    services = await startPlatform(
      { NATS_URL: server.url, REDIS_URL, BATON_PREFIX: prefix, LOG_LEVEL: 'warn' },
      { envFor: serviceCredsEnv(server) },
    );
    admin = await connectAs(Principals.operator('admin'));
    for (const project of [A, B]) {
      const reply = await admin.connection.request(`${prefix}.cmd.router.${project}.publish_definition`, new TextEncoder().encode(JSON.stringify(demoDefinition(project))), { timeout: 10_000 });
      expect(JSON.parse(new TextDecoder().decode(reply.data))).toMatchObject({ ok: true });
    }
    agent = await connectAs(Principals.agent(A, 'support'));
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

  it('refuses every publish outside the agent\'s own subjects: events, answers, stops, offers, other agents and projects, dead letters, notices, router commands', async () => {
    const pub = (what: string, subject: string) => ({ what, subject, op: 'publish' as const, run: () => agent.connection.publish(subject, new TextEncoder().encode('{}')) });
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
      pub('a dead letter', `${prefix}.dlq.router`),
      pub('a redrive marker', `${prefix}.dlq._redriven`),
      pub('a human action notice', `${prefix}.notice.${A}`),
      pub('a definition', `${prefix}.cmd.router.${A}.publish_definition`),
      pub('a ledger command as another agent', `${prefix}.cmd.ledger.${A}.agent.billing.claim`),
      pub('a ledger command in another project', `${prefix}.cmd.ledger.${B}.agent.support.claim`),
      pub('a ledger command as the router', `${prefix}.cmd.ledger.${A}.svc.router.complete_from_result`),
      pub('a ledger command as the watchdog', `${prefix}.cmd.ledger.${A}.svc.watchdog.requeue_expired`),
      pub('pause as the admin', `${prefix}.cmd.ledger.${B}.op.admin.pause`),
      pub('a handback decision as the notifier', `${prefix}.cmd.ledger.${A}.op.notifier.decide_handback`),
    ]);
  });

  it('refuses subscriptions to other principals\' inboxes and to project subjects', async () => {
    const sub = (what: string, subject: string) => ({ what, subject, op: 'subscription' as const, run: () => void agent.connection.subscribe(subject) });
    await expectServerRefuses([
      sub('every reply inbox', '_INBOX.>'),
      sub('another project agent\'s inbox', `${inboxPrefixOf(prefix, Principals.agent(B, 'support'))}.>`),
      sub('the router\'s inbox', `${inboxPrefixOf(prefix, Principals.service('router'))}.>`),
      sub('the notifier\'s inbox', `${inboxPrefixOf(prefix, Principals.service('notifier'))}.>`),
      sub('the whole inbox', `${prefix}.in.>`),
      sub('another project\'s results', `${prefix}.in.${B}.result.*`),
      sub('the events', `${prefix}.ev.>`),
      sub('ledger commands', `${prefix}.cmd.ledger.>`),
      sub('another agent\'s wake-ups', `${prefix}.agent.${B}.support.>`),
      sub('notices', `${prefix}.notice.>`),
    ]);
  });

  it('refuses consumer create, delete and fetch on other durables and every stream admin call', async () => {
    const api = (what: string, subject: string, body: unknown = {}) => ({
      what,
      subject,
      op: 'publish' as const,
      run: () => agent.connection.publish(subject, new TextEncoder().encode(JSON.stringify(body)), { reply: `${inboxPrefixOf(prefix, Principals.agent(A, 'support'))}.x` }),
    });
    const otherOffers = offerDurableName(B, 'support');
    await expectServerRefuses([
      api('create a consumer filtered on another project', `$JS.API.CONSUMER.DURABLE.CREATE.${streams.inbox}.evil`, {
        stream_name: streams.inbox,
        config: { durable_name: 'evil', filter_subject: `${prefix}.in.${B}.>`, ack_policy: 'explicit' },
      }),
      api('create an ephemeral consumer', `$JS.API.CONSUMER.CREATE.${streams.inbox}`, { stream_name: streams.inbox, config: { filter_subject: `${prefix}.in.>` } }),
      api('create its own durable (only the ledger does)', `$JS.API.CONSUMER.DURABLE.CREATE.${streams.inbox}.${offerDurableName(A, 'support')}`),
      api('delete another project\'s offers durable', `$JS.API.CONSUMER.DELETE.${streams.inbox}.${otherOffers}`),
      api('fetch another project\'s offers', `$JS.API.CONSUMER.MSG.NEXT.${streams.inbox}.${otherOffers}`, { batch: 1 }),
      api('read another durable\'s info', `$JS.API.CONSUMER.INFO.${streams.inbox}.${otherOffers}`),
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

  it('keeps every service up after all of that', async () => {
    for (const service of services) {
      const response = await fetch(`http://127.0.0.1:${service.port}/health/ready`);
      expect({ service: service.name, status: response.status }).toEqual({ service: service.name, status: 200 });
    }
  });
});
