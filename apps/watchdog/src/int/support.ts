// Shared set-up for the watchdog's integration tests: a random prefix on the real NATS, Baton's
// streams for it, a minimal ledger (a real NATS participant deciding with the real handoff decider
// through the real event store) and cleanup. Not a test file.
import { createHash, randomBytes } from 'node:crypto';
import {
  createEventRegistry,
  HandoffCommandSchemas,
  mayIssue,
  resolveLedgerCaller,
  splitIdentityClaims,
  StopRunRequestSchema,
  SubjectTable,
  Subjects,
  type EventEnvelope,
  type StopRunRequest,
  type HandoffCommandName,
  type HandoffEvent,
} from '@baton/contracts';
import {
  evolveHandoff,
  handoffDecider,
  initialHandoffState,
  runTurnFold,
  toHandoffRecord,
  type HandoffCommand,
  type HandoffState,
  type RunEvent,
  type RunTurn,
} from '@baton/domain';
import {
  batonStreamNames,
  batonTopology,
  connectNats,
  hopTrace,
  JetStreamEventStore,
  provision,
  subscribeCore,
  type CoreSubscription,
  type HopTrace,
  type NatsHandle,
  type StoredEvent,
  TRACEPARENT_HEADER,
  deploymentStreamNames,
} from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { startWatchdog } from '../bootstrap';
import type { RequeueOutcome } from '../requeue/requeue-loop';

export const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
export const PROJECT = 'proj';
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function randomPrefix(): string {
  return `wd${randomBytes(5).toString('hex')}`;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const digest = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

type Reply = { ok: true; handoff: unknown; events: number } | { ok: false; error: { code: string; kind: string; message: string } };

/**
 * A minimal ledger for the commands these tests use (create, claim, heartbeat, release,
 * requeue_expired, give_up_offer; a create naming another `target_project` is made there, as the ledger makes a
 * cross-project handoff, with both rosters taken to hold its delegator and addressee; an agent's
 * create naming a run carries the run as stored, read with the domain's `runTurnFold` in the
 * subject's project as the ledger reads it, so the decider applies the ledger's `not_in_run` rule —
 * an agent names a run only while that run waits for it, run-turn.ts): takes the
 * caller from the subject's principal as the ledger does (`resolveLedgerCaller`, `mayIssue`), parses the wire body with the contracts' schemas, fills what the ledger
 * resolves (claim id from the key, default lease, escalation id; no project lead), decides with
 * `handoffDecider` and appends through `JetStreamEventStore.handleCommand` (optimistic concurrency,
 * event ids from the idempotency key; the events continue the request's trace). Answers in the
 * ledger's reply shape.
 */
export class MiniLedger {
  private subscription: CoreSubscription | null = null;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly nats: NatsHandle,
    private readonly prefix: string,
    private readonly store: JetStreamEventStore,
  ) {}

  start(): void {
    this.subscription = subscribeCore(
      this.nats,
      Subjects.ledgerCommands(this.prefix),
      (msg) => {
        const task = this.answer(msg.subject, msg.data, hopTrace(msg.headers)).then((reply) => {
          msg.respond(encoder.encode(JSON.stringify(reply)));
        });
        this.inFlight.add(task);
        void task.finally(() => this.inFlight.delete(task));
      },
      { queue: 'ledger' },
    );
  }

  async stop(): Promise<void> {
    await this.subscription?.drain().catch(() => undefined);
    await Promise.allSettled([...this.inFlight]);
  }

  /** `trace`: the request's hop, continued by the events the command appends (as the ledger does). */
  private async answer(subject: string, data: Uint8Array, trace: HopTrace): Promise<Reply> {
    const address = SubjectTable.ledgerCommand.parse(this.prefix, subject);
    if (address === null || !(address.command in HandoffCommandSchemas))
      return { ok: false, error: { code: 'unknown_command', kind: 'rejected', message: subject } };
    const { project } = address;
    const name = address.command as HandoffCommandName;
    const { claims, command: body } = splitIdentityClaims(JSON.parse(decoder.decode(data)) as Record<string, unknown>);
    const who = resolveLedgerCaller(address.principal, claims);
    if (!who.ok) return { ok: false, error: { code: who.code, kind: 'forbidden', message: who.message } };
    if (!mayIssue(name, who.caller))
      return { ok: false, error: { code: 'principal_not_allowed', kind: 'forbidden', message: `${name} is not for this principal` } };
    const schema = HandoffCommandSchemas[name];
    const parsed = schema.safeParse(body);
    if (!parsed.success) return { ok: false, error: { code: 'schema_violation', kind: 'rejected', message: parsed.error.message } };
    const metadata: HandoffCommand['metadata'] = { now: new Date().toISOString(), actor: who.caller.actor, actorKind: who.caller.kind };
    const wire = parsed.data as Record<string, unknown> & { handoff_id: string; idempotency_key: string };
    let command: HandoffCommand;
    // Where the handoff lives: the command's project, or the target of a cross-project create.
    let lives = project;
    switch (name) {
      case 'create': {
        // An agent naming a run: the run as stored now (in the subject's project, the source of a
        // cross-project create), which the decider checks waits for it (`not_in_run`), as the ledger does.
        const turn = await this.runTurnOf(project, wire['workflow_run_id'], metadata);
        const target = wire['target_project'];
        if (typeof target === 'string' && target !== project) {
          lives = target;
          const cross = {
            source_project: project,
            source_visible: [String(wire['from_agent'])],
            target_visible: [String(wire['to_agent'])],
            target_accepts: true,
          };
          command = { type: 'create', data: { ...wire, ...turn, project: target, cross_project: cross } as never, metadata };
          break;
        }
        command = { type: 'create', data: { ...wire, ...turn } as never, metadata };
        break;
      }
      case 'claim':
        command = {
          type: 'claim',
          data: {
            handoff_id: wire.handoff_id,
            idempotency_key: wire.idempotency_key,
            claim_id: `c-${digest(wire.idempotency_key)}`,
            lease_ms: (wire['lease_ms'] as number | undefined) ?? 60_000,
            claimer_roles: [],
          },
          metadata,
        };
        break;
      case 'heartbeat':
        command = {
          type: 'heartbeat',
          data: {
            handoff_id: wire.handoff_id,
            claim_id: String(wire['claim_id']),
            idempotency_key: wire.idempotency_key,
            lease_ms: (wire['lease_ms'] as number | undefined) ?? 60_000,
          },
          metadata,
        };
        break;
      case 'release':
        command = { type: 'release', data: wire as never, metadata };
        break;
      case 'expire_deadline':
        command = { type: 'expire_deadline', data: { handoff_id: wire.handoff_id, idempotency_key: wire.idempotency_key }, metadata };
        break;
      case 'fail':
        command = { type: 'fail', data: wire as never, metadata };
        break;
      case 'requeue_expired':
        command = {
          type: 'requeue_expired',
          data: {
            handoff_id: wire.handoff_id,
            claim_id: String(wire['claim_id']),
            idempotency_key: wire.idempotency_key,
            escalation_handoff_id: `esc-${digest(wire.idempotency_key)}`,
          },
          metadata,
        };
        break;
      case 'complete_from_result':
        // The router closing a run's handoff with the result it accepted (rule 4a/4b: it may void a lapse).
        command = { type: 'complete_from_result', data: wire as never, metadata };
        break;
      case 'give_up_offer':
        // No project lead here: past the cap the give-up escalates to nobody (a guard_failed stop) unless escalate_to says.
        command = { type: 'give_up_offer', data: { ...wire, escalation_handoff_id: `esc-${digest(wire.idempotency_key)}` } as never, metadata };
        break;
      default:
        return { ok: false, error: { code: 'unknown_command', kind: 'rejected', message: `the test ledger does not serve ${name}` } };
    }
    const result = await this.store.handleCommand({ project: lives, kind: 'handoff', id: wire.handoff_id }, handoffDecider, command, {
      commandId: `${name}-${digest(wire.idempotency_key)}`,
      occurredAt: metadata.now,
      actor: metadata.actor,
      origin: metadata.actorKind === 'watchdog' ? 'watchdog' : metadata.actorKind === 'system' ? 'engine_fallback' : 'agent',
      causationId: null,
      correlationId: wire.handoff_id,
      trace,
    });
    if (!result.ok) return { ok: false, error: { code: result.error.code, kind: result.error.kind, message: result.error.message } };
    return { ok: true, handoff: toHandoffRecord(result.state), events: result.events.length };
  }

  /** The run an agent's create names, as the ledger reads it (`runTurnOf`): nothing for no run, nor for a service's create. */
  private async runTurnOf(project: string, workflowRunId: unknown, metadata: HandoffCommand['metadata']): Promise<{ run_turn?: RunTurn }> {
    if (typeof workflowRunId !== 'string' || metadata.actorKind !== 'agent') return {};
    const { state } = await this.store.current<RunEvent, RunTurn>({ project, kind: 'run', id: workflowRunId }, runTurnFold);
    return { run_turn: state };
  }
}

export interface Harness {
  prefix: string;
  nats: NatsHandle;
  store: JetStreamEventStore;
  ledger: MiniLedger;
  /** Start a watchdog service in-process (fast ticks, quiet logs); stopped by `cleanup`. */
  startWatchdog(name: string, env?: Record<string, string>): Promise<TestWatchdog>;
  /** Events of one handoff (of the test project unless `project` names another), in order. */
  events(handoffId: string, project?: string): Promise<StoredEvent[]>;
  state(handoffId: string, project?: string): Promise<HandoffState>;
  cleanup(): Promise<void>;
}

export interface TestWatchdog {
  service: RunningService;
  outcomes: RequeueOutcome[];
  /** `expire_deadline` outcomes of the handoff-deadline loop. */
  deadlineOutcomes: RequeueOutcome[];
  stop(): Promise<void>;
}

export async function startHarness(): Promise<Harness> {
  const prefix = randomPrefix();
  const nats = await connectNats({ servers: NATS_URL, name: 'watchdog-int', reconnect: false });
  // The same topology runService provisions, so the services find it unchanged.
  await provision(nats.jsm, { streams: batonTopology(prefix).streams });
  const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  const ledger = new MiniLedger(nats, prefix, store);
  ledger.start();
  await nats.connection.flush();
  const watchdogs: TestWatchdog[] = [];

  const harness: Harness = {
    prefix,
    nats,
    store,
    ledger,
    async startWatchdog(name, extraEnv = {}) {
      const outcomes: RequeueOutcome[] = [];
      const deadlineOutcomes: RequeueOutcome[] = [];
      const service = await startWatchdog({
        env: {
          ...process.env,
          NATS_URL,
          BATON_PREFIX: prefix,
          BATON_INSTANCE: name,
          HTTP_PORT: '0',
          LOG_LEVEL: process.env['WATCHDOG_TEST_LOG_LEVEL'] ?? 'error',
          WATCHDOG_TICK_MS: '100',
          WATCHDOG_RETRY_MS: '300',
          ...extraEnv,
        },
        onRequeueOutcome: (outcome) => outcomes.push(outcome),
        onDeadlineOutcome: (outcome) => deadlineOutcomes.push(outcome),
      });
      const watchdog: TestWatchdog = { service, outcomes, deadlineOutcomes, stop: () => service.stop() };
      watchdogs.push(watchdog);
      return watchdog;
    },
    async events(handoffId, project = PROJECT) {
      return (await store.read({ project, kind: 'handoff', id: handoffId })).events;
    },
    async state(handoffId, project = PROJECT) {
      const events = await harness.events(handoffId, project);
      return events.reduce<HandoffState>((s, e) => evolveHandoff(s, { type: e.type, data: e.payload } as HandoffEvent), initialHandoffState());
    },
    async cleanup() {
      for (const watchdog of watchdogs) await watchdog.stop().catch(() => undefined);
      await ledger.stop();
      for (const stream of deploymentStreamNames(prefix)) await nats.jsm.streams.delete(stream).catch(() => undefined);
      await nats.close();
    },
  };
  return harness;
}

let envelopes = 0;

/** An event envelope of `project` (the test project by default), as a writer service would append it. */
function testEnvelope(kind: 'run' | 'handoff', id: string, type: string, payload: unknown, project = PROJECT): EventEnvelope {
  return {
    id: `ev-${randomBytes(6).toString('hex')}-${++envelopes}`,
    type,
    version: 1,
    aggregate: { kind, id },
    project,
    occurredAt: new Date().toISOString(),
    actor: 'test-router',
    origin: 'agent',
    causationId: null,
    correlationId: id,
    payload,
  };
}

/** Append events to run `run` of `project` (the test project by default) as its writer would (after its last event). */
export async function appendRunEvents(
  h: Harness,
  run: string,
  events: ReadonlyArray<{ type: string; payload: unknown }>,
  project = PROJECT,
  trace?: HopTrace,
): Promise<void> {
  const ref = { project, kind: 'run' as const, id: run };
  for (const { type, payload } of events) {
    const { lastSeq } = await h.store.read(ref);
    await h.store.append(ref, [testEnvelope('run', run, type, payload, project)], { expectedVersion: lastSeq, ...(trace !== undefined ? { trace } : {}) });
  }
}

/** Append `run.routed` events for run `run` (of `project`): the agents visited in order (first from the start). */
export async function route(h: Harness, run: string, agents: string[], firstHop = 1, project = PROJECT, trace?: HopTrace): Promise<void> {
  await appendRunEvents(
    h,
    run,
    agents.map((agent, i) => ({
      type: 'run.routed',
      payload: {
        decision: {
          rule: 'task',
          dispatch: { status: 'advance', reason: null, origin: 'agent' },
          callback_after: null,
          outcome: 'dispatch',
          target: { agent, step: 's' },
        },
        target: { agent, step: 's' },
        from: i === 0 ? null : { agent: agents[i - 1] as string, step: 's' },
        handoff_id: `${run}-h${firstHop + i}`,
        hop: firstHop + i,
        cause: { kind: 'result', id: `res-${run}-${firstHop + i}` },
        routed_at: new Date().toISOString(),
      },
    })),
    project,
    trace,
  );
}

/** The stop requests stored on the stop subject of `project` (the test project by default), oldest first. */
export async function stopRequests(h: Harness, project = PROJECT): Promise<StopRunRequest[]> {
  return (await stopRequestMessages(h, project)).map((m) => m.request);
}

/** The stop requests of `project` with the `traceparent` each was stored with (undefined: none). */
export async function stopRequestMessages(h: Harness, project = PROJECT): Promise<{ request: StopRunRequest; traceparent: string | undefined }[]> {
  const stream = batonStreamNames(h.prefix).inbox;
  const info = await h.nats.jsm.streams.info(stream);
  const out: { request: StopRunRequest; traceparent: string | undefined }[] = [];
  for (let s = info.state.first_seq; s <= info.state.last_seq && info.state.messages > 0; s++) {
    const msg = await h.nats.jsm.streams.getMessage(stream, { seq: s }).catch(() => null);
    if (msg && msg.subject === Subjects.stopRequest(h.prefix, project)) {
      out.push({ request: StopRunRequestSchema.parse(JSON.parse(decoder.decode(msg.data))), traceparent: msg.header.get(TRACEPARENT_HEADER) || undefined });
    }
  }
  return out;
}

/** The stop requests of `project` once there is at least one (polled until `timeoutMs`, default waitFor's). */
export function stopRequestsSoon(h: Harness, what: string, options: { timeoutMs?: number; project?: string } = {}): Promise<StopRunRequest[]> {
  return waitFor(
    async () => {
      const list = await stopRequests(h, options.project);
      return list.length > 0 ? list : undefined;
    },
    what,
    options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : undefined,
  );
}
