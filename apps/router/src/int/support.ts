// Shared pieces of the router's integration tests (real NATS): removing a test's streams, and
// claiming a handoff the way the ledger and an agent's SDK would (they poll with @baton/wait).
import type { PublishDefinitionReply } from '@baton/contracts';
import { deriveId, evolveRun, handoffDecider, initialRunState, type RunEvent, type RunState } from '@baton/domain';
import { batonStreamNames, headersFrom, type EventStore, type NatsHandle } from '@baton/eventstore';
import { RouterSubjects } from '../shared/subjects';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const encoder = new TextEncoder();
const decoder = new TextDecoder();

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
