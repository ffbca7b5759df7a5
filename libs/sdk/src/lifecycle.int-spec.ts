import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inboxPrefixOf, Principals } from '@baton/contracts';
import {
  batonStreamNames,
  connectNats as connectAdmin,
  credsPath,
  ensureServiceCreds,
  issueCreds,
  openDeployment,
  revokeUsers,
  writeServerConfig,
  type AuthDeployment,
  type NatsHandle,
} from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// Test only: boots the real ledger service in-process (its edge relays the agents' pulls and publishes).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../apps/ledger/src/ledger';
// Test only: the private nats-servers every project's specs share (not part of @baton/eventstore's API).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort, startNatsServer, type PrivateNatsServer } from '../../eventstore/src/int/servers';
import {
  BatonSdkError,
  ConnectionClosed,
  connectNats,
  createBatonClient,
  EventStoreError,
  InvalidInputError,
  OfferPullError,
  PermissionDenied,
  SubscriptionStoppingError,
  type BatonAgent,
  type HandoffOffer,
} from './index';
import { storeDefinition } from './definition.int-support';

/*
 * An agent's connection lifecycle and error surface, against a nats-server of this spec's own that
 * requires credentials (a fresh deployment, as `baton nats-config` writes it) and the real ledger
 * in process: a shared connection opened with an agent's credentials, options refused before
 * connecting, a bounded stop, pull failures while no ledger relays the edge, and credentials
 * revoked under a running agent.
 */

const P = 'shop';

/** What a handler saw: the offer, and the reason its signal was aborted with. */
interface Seen {
  offer: HandoffOffer;
  aborted: Promise<unknown>;
}

describe('the SDK connection lifecycle (an authenticated nats-server of its own, the real ledger in process)', () => {
  const prefix = `lc${randomBytes(4).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'baton-sdk-lifecycle-'));
  let deployment: AuthDeployment;
  let url: string;
  let server: PrivateNatsServer | undefined;
  let admin: NatsHandle;
  let ledger: RunningService | null = null;
  let alice: BatonAgent;
  let shared: NatsHandle | undefined;
  let bob: BatonAgent;
  let bobUser: string;
  let bobCreds: string;
  const seen = new Map<string, Seen>();
  /** Lets the handler of `h-stuck` return at last (it ignores its signal). */
  let unstick: () => void = () => undefined;

  const boot = async () => {
    ledger = await startLedger({
      ...process.env,
      NATS_URL: url,
      NATS_CREDS: credsPath(deployment, { kind: 'svc', service: 'ledger' }),
      BATON_PREFIX: prefix,
      BATON_INSTANCE: 'sdk-lifecycle',
      HTTP_PORT: '0',
      LOG_LEVEL: 'error',
    });
  };
  const create = async (id: string) => {
    const reply = await alice.ledger.create(P, {
      handoff_id: id,
      from_agent: 'alice',
      to_agent: 'bob',
      summary: `work ${id}`,
      idempotency_key: `create-${id}`,
    });
    expect(reply).toMatchObject({ ok: true });
  };
  /** The handler every subscription of bob's runs: claim, then act as the handoff id says. */
  const onOffer = async (offer: HandoffOffer) => {
    await offer.claim();
    const aborted = new Promise<unknown>((resolve) => offer.signal.addEventListener('abort', () => resolve(offer.signal.reason), { once: true }));
    seen.set(offer.handoffId, { offer, aborted });
    if (offer.handoffId.startsWith('h-stuck')) {
      // Ignores its signal: only the test lets it go.
      await new Promise<void>((resolve) => (unstick = resolve));
      return;
    }
    await aborted;
    if (offer.handoffId === 'h-polite') await offer.release('the subscription is stopping');
  };

  beforeAll(async () => {
    deployment = openDeployment(join(dir, 'nats-auth'), prefix);
    ensureServiceCreds(deployment);
    const port = await freePort();
    url = `nats://127.0.0.1:${port}`;
    const conf = writeServerConfig(deployment, { listen: `127.0.0.1:${port}`, storeDir: join(dir, 'js') });
    server = await startNatsServer({ port, config: conf });
    const op = Principals.operator('admin');
    admin = await connectAdmin({ servers: url, credsFile: credsPath(deployment, op), inboxPrefix: inboxPrefixOf(prefix, op), reconnect: true });
    await boot();
    const definition = {
      project: P,
      agents: [{ name: 'alice' }, { name: 'bob' }],
      workflows: [{ name: 'w', version: 1, entry: 'one', steps: [{ id: 'one', agent: 'bob' }] }],
    };
    await storeDefinition(admin, prefix, definition);
    const delegator = issueCreds(deployment, Principals.agent(P, 'alice'));
    alice = await createBatonClient({ natsUrl: url, natsCreds: delegator.file, prefix, project: P, agent: 'alice' });
    const issued = issueCreds(deployment, Principals.agent(P, 'bob'));
    bobUser = issued.userPublicKey;
    // The agent's own copy (a revocation removes the deployment folder's file).
    bobCreds = join(dir, 'bob.creds');
    copyFileSync(issued.file, bobCreds);
  }, 60_000);

  afterAll(async () => {
    unstick();
    await bob?.close({ timeoutMs: 0 }).catch(() => undefined);
    await alice?.close({ timeoutMs: 0 }).catch(() => undefined);
    await shared?.close().catch(() => undefined);
    await ledger?.stop();
    await admin?.close().catch(() => undefined);
    await server?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  it('connectNats with an agent’s credentials connects as that agent (its inbox, no account-wide JetStream check), and a client sharing it goes through the edge', async () => {
    shared = await connectNats({ servers: url, credsFile: credsPath(deployment, Principals.agent(P, 'alice')), reconnect: true });
    const onShared = await createBatonClient({ nats: shared, prefix, project: P, agent: 'alice' });
    // Through the edge: the agent's credentials may not publish on `<prefix>.in.…` itself.
    await expect(onShared.startRun({ workflow_run_id: 'wr-shared', workflow: 'w', started_by: 'dana' })).resolves.toMatchObject({ duplicate: false });
    const info = await admin.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: `${prefix}.in.${P}.start.alice` });
    expect(info.state.messages).toBe(1);
    // Asked to check the account-wide JetStream information anyway: a typed refusal, not a plain Error.
    const checked = await connectNats({ servers: url, credsFile: credsPath(deployment, Principals.agent(P, 'alice')), checkJetStream: true }).catch(
      (e: unknown) => e,
    );
    expect(checked).toBeInstanceOf(PermissionDenied);
    expect(checked).toMatchObject({ code: 'permission_denied', subject: '$JS.API.INFO' });
    // The handle is alice's: a client for another agent on it is refused before anything is sent.
    const other = await createBatonClient({ nats: shared, prefix, project: P, agent: 'bob' }).catch((e: unknown) => e);
    expect(other).toBeInstanceOf(PermissionDenied);
    expect(other).toMatchObject({ code: 'permission_denied', operation: 'subscribe to' });
  });

  it('options are refused before connecting: requestTimeoutMs not a positive finite number (RangeError), a project or agent that is no Baton id (InvalidInputError naming the field)', async () => {
    // No credentials given to a server that wants them: connecting would fail with CredentialsRefused, not these.
    for (const requestTimeoutMs of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(createBatonClient({ natsUrl: url, prefix, project: P, agent: 'bob', requestTimeoutMs })).rejects.toThrow(RangeError);
    }
    const project = await createBatonClient({ natsUrl: url, prefix, project: 'Audit X', agent: 'bob' }).catch((e: unknown) => e);
    expect(project).toBeInstanceOf(InvalidInputError);
    expect(project).toMatchObject({ code: 'schema_violation' });
    expect((project as InvalidInputError).rejection.issues.map((issue) => issue.path)).toEqual(['project']);
    const agent = await createBatonClient({ natsUrl: url, prefix, project: P, agent: 'bob smith' }).catch((e: unknown) => e);
    expect((agent as InvalidInputError).rejection.issues.map((issue) => issue.path)).toEqual(['agent']);
  });

  it('stop({ timeoutMs }) aborts the signals of the offers in their handlers (subscription_stopping) and resolves within its bound, naming the one left unfinished', async () => {
    bob = await createBatonClient({ natsUrl: url, natsCreds: bobCreds, prefix, project: P, agent: 'bob' });
    const subscription = await bob.handoffs({ concurrency: 2, onOffer, onError: () => undefined });
    await create('h-polite');
    await create('h-stuck');
    await waitFor(() => seen.has('h-polite') && seen.has('h-stuck'), 'both offers claimed and in their handlers');
    const started = Date.now();
    const outcome = await subscription.stop({ timeoutMs: 1_500 });
    expect(Date.now() - started).toBeLessThan(5_000);
    const reason = await seen.get('h-polite')!.aborted;
    expect(reason).toBeInstanceOf(SubscriptionStoppingError);
    expect(reason).toMatchObject({ code: 'subscription_stopping' });
    expect(outcome.unfinished).toEqual([{ handoffId: 'h-stuck', claimId: seen.get('h-stuck')!.offer.claimId, seq: expect.any(Number), deliveryCount: 1 }]);
    await expect(subscription.done).resolves.toBeUndefined();
    // The polite handler ended its work before the bound passed.
    expect(seen.get('h-polite')!.offer.handoff).toMatchObject({ status: 'released' });
    unstick();
  }, 30_000);

  it('pulls while no ledger relays the edge: onError hears typed errors (OfferPullError offer_pull_failed), never a raw NATS error', async () => {
    const errors: unknown[] = [];
    const subscription = await bob.handoffs({ onOffer, onError: (error) => errors.push(error) });
    await ledger!.stop();
    ledger = null;
    try {
      await waitFor(() => errors.length >= 2, 'two pull failures', { timeoutMs: 15_000 });
      // Nothing raw (the NATS client's NatsError 503 / TIMEOUT), every one with a documented code.
      expect(errors.filter((error) => !(error instanceof BatonSdkError || error instanceof EventStoreError))).toEqual([]);
      expect(errors.map((error) => (error as { code: string }).code)).toEqual(expect.arrayContaining(['offer_pull_failed']));
      expect(errors.find((error) => (error as { code: string }).code === 'offer_pull_failed')).toMatchObject({ reason: 'unavailable', natsCode: '503' });
      expect(errors.find((error) => (error as { code: string }).code === 'offer_pull_failed')).toBeInstanceOf(OfferPullError);
    } finally {
      await boot();
      await subscription.stop({ timeoutMs: 5_000 });
    }
  }, 40_000);

  it('close({ timeoutMs }) likewise: resolves within its bound with the offers left unfinished, and the client’s connection is closed (on purpose: closed resolves undefined)', async () => {
    const errors: unknown[] = [];
    await bob.handoffs({ onOffer, onError: (error) => errors.push(error) });
    await create('h-stuck-close');
    await waitFor(() => seen.has('h-stuck-close'), 'the offer claimed and in its handler');
    const started = Date.now();
    const outcome = await bob.close({ timeoutMs: 1_000 });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(outcome.unfinished.map((offer) => offer.handoffId)).toEqual(['h-stuck-close']);
    await expect(seen.get('h-stuck-close')!.aborted).resolves.toBeInstanceOf(SubscriptionStoppingError);
    await expect(bob.closed).resolves.toBeUndefined();
    expect(errors).toEqual([]);
    unstick();
  }, 30_000);

  it('credentials revoked under a running agent: closed resolves with ConnectionClosed (credentials_revoked), onError hears it once, the subscription stops and the offer in flight is told', async () => {
    bob = await createBatonClient({ natsUrl: url, natsCreds: bobCreds, prefix, project: P, agent: 'bob' });
    const errors: unknown[] = [];
    const subscription = await bob.handoffs({ onOffer, onError: (error) => errors.push(error) });
    await create('h-revoked');
    await waitFor(() => seen.has('h-revoked'), 'the offer claimed and in its handler');

    revokeUsers(deployment, [bobUser]);
    await server!.reload();
    const closed = await bob.closed;
    expect(closed).toBeInstanceOf(ConnectionClosed);
    expect(closed).toMatchObject({ code: 'connection_closed', reason: 'credentials_revoked' });
    await expect(subscription.done).resolves.toBeUndefined();
    await expect(seen.get('h-revoked')!.aborted).resolves.toBe(closed);
    // A few seconds later still: the close was told once, and nothing raw.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    expect(errors).toEqual([closed]);
  }, 60_000);
});
