// Shared pieces of the router's integration tests (real NATS): the router with the real ledger and
// watchdog in-process on a test's own prefix, removing a test's streams, and claiming a handoff the
// way the ledger and an agent's SDK would (they poll with @baton/wait).
import { randomBytes } from 'node:crypto';
import { createEventRegistry, type PublishDefinitionReply } from '@baton/contracts';
import { deriveId, evolveRun, handoffDecider, initialRunState, type RunEvent, type RunState } from '@baton/domain';
import { batonStreamNames, connectNats, deploymentStreamNames, headersFrom, JetStreamEventStore, type EventStore, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
// The real ledger and watchdog in-process (test-only cross-app imports).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../ledger/src/ledger';
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startWatchdog } from '../../../watchdog/src/bootstrap';
import { startRouter } from '../router.app';
import { RouterSubjects } from '../shared/subjects';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

/** A service a router test runs in-process. */
export type InProcessService = 'ledger' | 'router' | 'watchdog';

export interface InProcessOptions {
  /** The letters the random prefix begins with (`cg` → `cg3f9a1c02d7`): which spec's streams these are. */
  tag: string;
  /** The services to start, in this order (default: the ledger, then the router); start others later with `start`. */
  services?: readonly InProcessService[];
  /** Settings over the defaults every service is given (see {@link startInProcess}). */
  env?: Record<string, string>;
}

/** The router, the ledger and the watchdog as a test runs them: in this process, on a prefix of its own, over the real NATS. */
export interface InProcessDeployment {
  readonly prefix: string;
  /** What every service is started with. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The test's own connection. */
  readonly nats: NatsHandle;
  /** The prefix's event store, on the test's connection. */
  readonly store: JetStreamEventStore;
  /** `name` as it runs now; throws when it does not run. */
  service(name: InProcessService): RunningService;
  /** Start `name` (never started, or stopped by `stop`) with {@link env}. */
  start(name: InProcessService): Promise<RunningService>;
  /** Stop `name` (as a deploy or a crash would); nothing when it does not run. */
  stop(name: InProcessService): Promise<void>;
  /** Stop what still runs (the watchdog, the router, the ledger, in that order), delete the prefix's streams, close the connection. */
  close(): Promise<void>;
}

const starters: Record<InProcessService, (env: Record<string, string | undefined>) => Promise<RunningService>> = {
  ledger: (env) => startLedger(env),
  router: (env) => startRouter(env),
  watchdog: (env) => startWatchdog({ env }),
};

/**
 * Connect to NATS (NATS_URL, default 127.0.0.1:4222) and start `services` in-process on a random
 * prefix of the spec's `tag`, each with this process's environment, `BATON_PREFIX`, `HTTP_PORT` 0,
 * `LOG_LEVEL` error and the watchdog ticking every 200 ms and retrying after 300 ms
 * (`WATCHDOG_TICK_MS`, `WATCHDOG_RETRY_MS`), then `options.env` over those. Call `close` in `afterAll`.
 */
export async function startInProcess(options: InProcessOptions): Promise<InProcessDeployment> {
  const prefix = `${options.tag}${randomBytes(5).toString('hex')}`;
  const env = {
    ...process.env,
    NATS_URL,
    BATON_PREFIX: prefix,
    HTTP_PORT: '0',
    LOG_LEVEL: 'error',
    WATCHDOG_TICK_MS: '200',
    WATCHDOG_RETRY_MS: '300',
    ...options.env,
  };
  const nats = await connectNats({ servers: NATS_URL, reconnect: false });
  const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  const running = new Map<InProcessService, RunningService>();
  const stop = async (name: InProcessService) => {
    const service = running.get(name);
    running.delete(name);
    await service?.stop();
  };
  const deployment: InProcessDeployment = {
    prefix,
    env,
    nats,
    store,
    service(name) {
      const service = running.get(name);
      if (service === undefined) throw new Error(`the ${name} does not run`);
      return service;
    },
    async start(name) {
      if (running.has(name)) throw new Error(`the ${name} runs already`);
      const service = await starters[name](env);
      running.set(name, service);
      return service;
    },
    stop,
    async close() {
      for (const name of ['watchdog', 'router', 'ledger'] as const) await stop(name);
      for (const stream of deploymentStreamNames(prefix)) await nats.jsm.streams.delete(stream).catch(() => undefined);
      await nats.close();
    },
  };
  try {
    for (const name of options.services ?? ['ledger', 'router']) await deployment.start(name);
  } catch (error) {
    await deployment.close();
    throw error;
  }
  return deployment;
}

/**
 * The two-step `ship` workflow of `project` the router's tests run: `code` (coder), then `review`
 * (reviewer, terminal); with `helper`, an agent of that name no step names (a delegate).
 */
export function shipDefinition(project: string, options: { helper?: boolean } = {}) {
  return {
    project,
    agents: [{ name: 'coder', role: 'Coder' }, { name: 'reviewer', role: 'Reviewer' }, ...(options.helper ? [{ name: 'helper', role: 'Helper' }] : [])],
    workflows: [
      {
        name: 'ship',
        version: 1,
        entry: 'code',
        steps: [
          { id: 'code', agent: 'coder', next: 'review' },
          { id: 'review', agent: 'reviewer', terminal: true },
        ],
      },
    ],
  };
}

/** Publish `definition` for `project` the way `baton publish-definition` does (core NATS request to the router) and return its parsed reply. */
export async function publishDefinition(
  nats: NatsHandle,
  prefix: string,
  project: string,
  definition: unknown,
  headers?: Record<string, string>,
): Promise<PublishDefinitionReply> {
  const msg = await nats.connection.request(RouterSubjects.publishDefinition(prefix, project), encoder.encode(JSON.stringify(definition)), {
    timeout: 5000,
    ...(headers !== undefined ? { headers: headersFrom(headers) } : {}),
  });
  return JSON.parse(decoder.decode(msg.data)) as PublishDefinitionReply;
}

/** Delete the events, inbox and dead-letter streams of `prefix` (their consumers go with them). */
export async function deleteStreams(nats: NatsHandle, prefix: string): Promise<void> {
  const names = batonStreamNames(prefix);
  for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
}

/** The handoff a run is on now (its last `run.routed`), or null when it has none (or does not exist). */
export async function currentHandoff(store: EventStore, project: string, workflowRunId: string): Promise<{ handoffId: string; agent: string } | null> {
  const { events } = await store.read({ project, kind: 'run', id: workflowRunId });
  const state = events.reduce<RunState>((s, e) => evolveRun(s, { type: e.type, data: e.payload } as RunEvent), initialRunState());
  return state.status === 'none' || state.handoffId === null ? null : { handoffId: state.handoffId, agent: state.agent };
}

/**
 * Stand in for the ledger and an agent's SDK on one handoff, for the claim rule (docs/runs.md):
 * create the handoff addressed to `addressee` (unless it exists; `create: false` when a real
 * ledger creates it) and claim it as `agent`, in the events stream, with the real handoff decider.
 * Returns the claim id, or null when the handoff would not be claimed by `agent` (another
 * addressee, already claimed by someone else...). Idempotent per (handoff, agent, `round`). The router
 * tests' ledger responder records requests only, so without this no handoff would exist for the
 * router to read.
 */
export async function claimHandoff(
  store: EventStore,
  project: string,
  handoffId: string,
  agent: string,
  options: { addressee?: string; create?: boolean; leaseMs?: number; workflowRunId?: string; round?: number } = {},
): Promise<string | null> {
  const addressee = options.addressee ?? agent;
  const ref = { project, kind: 'handoff' as const, id: handoffId };
  const now = new Date().toISOString();
  const meta = (id: string) => ({
    commandId: deriveId('test', id),
    occurredAt: now,
    actor: agent,
    origin: 'agent' as const,
    causationId: null,
    correlationId: handoffId,
  });
  const createKey = `test-create-${handoffId}`;
  if (options.create !== false) {
    await store.handleCommand(
      ref,
      handoffDecider,
      {
        type: 'create',
        data: {
          handoff_id: handoffId,
          project,
          kind: 'task',
          priority: 'medium',
          from_agent: 'baton-router',
          to_agent: addressee,
          summary: 'test handoff',
          context: {},
          acceptance: {},
          max_retries: 3,
          idempotency_key: createKey,
          ...(options.workflowRunId !== undefined ? { workflow_run_id: options.workflowRunId } : {}),
        },
        metadata: { now, actor: 'baton-router', actorKind: 'system' },
      },
      meta(createKey),
    );
  }
  // A later round is a new claim by the same agent (after a lapse), under a claim id of its own.
  const claimOf = options.round !== undefined && options.round > 1 ? `${handoffId}-${agent}-${options.round}` : `${handoffId}-${agent}`;
  const claimKey = deriveId('test-claim', claimOf);
  const claimed = await store.handleCommand(
    ref,
    handoffDecider,
    {
      type: 'claim',
      data: {
        handoff_id: handoffId,
        idempotency_key: claimKey,
        claim_id: deriveId('claim', claimOf),
        lease_ms: options.leaseMs ?? 600_000,
        claimer_roles: [],
      },
      metadata: { now, actor: agent, actorKind: 'agent' },
    },
    meta(claimKey),
  );
  const state = claimed.state;
  return state.status === 'claimed' && state.claim.claimed_by === agent ? state.claim.claim_id : null;
}

/**
 * Stand in for the watchdog: requeue the current claim of `handoffId` as the watchdog would once
 * its lease ran out, deciding at the lease's expiry (`requeue_expired` with `now` = its
 * `lease_expires_at`, even when that is still ahead: a watchdog whose clock runs ahead). Returns
 * the expiry of the claim it took back.
 */
export async function lapseClaim(store: EventStore, project: string, handoffId: string): Promise<string> {
  const ref = { project, kind: 'handoff' as const, id: handoffId };
  const { state } = await store.current(ref, handoffDecider);
  if (state.status !== 'claimed') throw new Error(`handoff ${handoffId} is ${state.status}, not claimed`);
  const at = state.claim.lease_expires_at;
  const key = deriveId('test-lapse', `${handoffId}-${state.claim.claim_id}`);
  const lapsed = await store.handleCommand(
    ref,
    handoffDecider,
    {
      type: 'requeue_expired',
      data: { handoff_id: handoffId, claim_id: state.claim.claim_id, idempotency_key: key, escalation_handoff_id: `esc-${handoffId}` },
      metadata: { now: at, actor: 'baton-watchdog', actorKind: 'system' },
    },
    { commandId: key, occurredAt: at, actor: 'baton-watchdog', origin: 'watchdog', causationId: null, correlationId: handoffId },
  );
  if (lapsed.state.status !== 'pending') throw new Error(`the lapse left handoff ${handoffId} ${lapsed.state.status}`);
  return at;
}

/** Stand in for a person abandoning `handoffId` through the ledger (`abandon` as operator `by`). */
export async function abandonHandoff(store: EventStore, project: string, handoffId: string, by = 'olga'): Promise<void> {
  const ref = { project, kind: 'handoff' as const, id: handoffId };
  const key = deriveId('test-abandon', handoffId);
  const now = new Date().toISOString();
  const abandoned = await store.handleCommand(
    ref,
    handoffDecider,
    {
      type: 'abandon',
      data: { handoff_id: handoffId, reason: 'withdrawn by a person', idempotency_key: key },
      metadata: { now, actor: by, actorKind: 'operator' },
    },
    { commandId: key, occurredAt: now, actor: by, origin: 'operator', causationId: null, correlationId: handoffId },
  );
  if (abandoned.state.status !== 'abandoned') throw new Error(`the abandon left handoff ${handoffId} ${abandoned.state.status}`);
}
