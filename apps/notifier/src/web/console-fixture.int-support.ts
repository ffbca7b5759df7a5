// Test support for the notifier's integration suites (not a spec): a notifier on a random prefix
// against the real NATS and Redis, and helpers that write run and handoff histories through the
// event store with the real deciders.
import { randomBytes } from 'node:crypto';
import {
  createEventRegistry,
  handoffToolName,
  MeshDefinitionSchema,
  ProjectDefinitionSchema,
  type AgentDefinition,
  type HandoffEvent,
  type WorkflowDefinition,
} from '@baton/contracts';
import {
  handoffDecider,
  handoffIdFor,
  meshDecider,
  meshEntryHandoffId,
  meshHandoffId,
  reactToHandoffEvent,
  runDecider,
  type HandoffCommand,
  type MeshCommand,
  type RunCommand,
} from '@baton/domain';
import { batonStreamNames, batonTopology, connectNats, JetStreamEventStore, provision, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { createProjectionStore, createRedis, type RedisHandle } from '@baton/projections';
import { TokenStore } from '../auth/token-store';
import type { Role } from '../auth/roles';
import { startNotifier } from '../main';
import { projectionPrefix } from '../projection/tokens';

const definition = ProjectDefinitionSchema.parse({
  project: 'fixture',
  lead: 'lena',
  agents: [{ name: 'support', role: 'Support' }],
  workflows: [{ name: 'support', version: 1, entry: 'answer', steps: [{ id: 'answer', agent: 'support', terminal: true }] }],
});
export const fixtureWorkflow = definition.workflows[0] as WorkflowDefinition;
export const fixtureAgents: readonly AgentDefinition[] = definition.agents;

export interface NotifierFixture {
  prefix: string;
  nats: NatsHandle;
  redis: RedisHandle;
  events: JetStreamEventStore;
  service: RunningService;
  /** http://127.0.0.1:<port> */
  base: string;
  tokens: TokenStore;
  /** Mint a token (returns the bearer string). */
  token(name: string, role: Role, projects: readonly string[] | '*'): Promise<string>;
  /** Wait until every projection applied the whole events stream. */
  caughtUp(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

let commands = 0;
const minute = (m: number) => new Date(Date.UTC(2026, 1, 1, 10, m)).toISOString();

/**
 * Start a notifier on a fresh random prefix (extra env on top of process.env). No router runs in
 * the fixture, so an operator answer is never decided: it waits only 200 ms (NOTIFIER_ANSWER_WAIT_MS,
 * unless `env` sets it) before its 202 `pending`.
 */
export async function startFixture(env: Record<string, string> = {}): Promise<NotifierFixture> {
  const prefix = `tw${randomBytes(5).toString('hex')}`;
  const nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
  const redis = createRedis();
  await provision(nats.jsm, { streams: batonTopology(prefix).streams });
  const events = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  const service = await startNotifier({ ...process.env, BATON_PREFIX: prefix, HTTP_PORT: '0', LOG_LEVEL: 'error', NOTIFIER_ANSWER_WAIT_MS: '200', ...env });
  const base = (await service.app.getUrl()).replace('[::1]', '127.0.0.1').replace('localhost', '127.0.0.1');
  const tokens = new TokenStore(redis.client, prefix);
  const store = createProjectionStore({ redis: redis.client, prefix: projectionPrefix(prefix) });
  const streams = batonStreamNames(prefix);
  return {
    prefix,
    nats,
    redis,
    events,
    service,
    base,
    tokens,
    async token(name, role, projects) {
      // A test's token of a name another test made before it replaces that one (names are unique among active tokens).
      return (await tokens.create({ name, role, projects, now: new Date().toISOString(), ifNameTaken: 'rotate' })).token;
    },
    async caughtUp(timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const last = (await nats.jsm.streams.info(streams.events)).state.last_seq;
        const seqs = await Promise.all(
          ['inbox', 'stops', 'handoffs', 'runs', 'notices'].map(async (name) => (await store.status({ name, version: 1 })).lastSeq),
        );
        if (seqs.every((s) => s >= last)) return;
        if (Date.now() > deadline) throw new Error(`projections at ${seqs.join(',')}, stream at ${last}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async close() {
      await service.stop();
      for (const name of [streams.events, streams.inbox, streams.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
      for await (const batch of redis.client.scanStream({ match: `${prefix}:*`, count: 500 })) {
        const keys = batch as string[];
        if (keys.length > 0) await redis.client.unlink(...keys);
      }
      await redis.close();
      await nats.drain();
    },
  };
}

async function runCommand(
  events: JetStreamEventStore,
  project: string,
  id: string,
  command: RunCommand,
  actor = 'router',
  origin: 'agent' | 'operator' = 'agent',
): Promise<void> {
  const meta = {
    commandId: `cmd-${++commands}-${randomBytes(3).toString('hex')}`,
    occurredAt: command.metadata.now,
    actor,
    origin,
    causationId: null,
    correlationId: id,
  };
  const result = await events.handleCommand({ project, kind: 'run', id }, runDecider, command, meta);
  if (!result.ok) throw new Error(`${command.type} refused: ${result.error.code}`);
}

/** Start a run of the fixture workflow. */
export function startRun(events: JetStreamEventStore, project: string, id: string, at = 0): Promise<void> {
  return runCommand(events, project, id, {
    type: 'start_run',
    data: { workflow_run_id: id, project, workflow: fixtureWorkflow, people: { started_by: 'sam', issue_author: null, trigger_author: null } },
    metadata: { now: minute(at), actor: 'router' },
  });
}

/** Stop a started run with a packet (`stop` command: any why, tried, pending call, detail, cap). */
export function stopRun(events: JetStreamEventStore, project: string, id: string, data: Extract<RunCommand, { type: 'stop' }>['data'], at = 1): Promise<void> {
  return runCommand(events, project, id, { type: 'stop', data, metadata: { now: minute(at), actor: 'router' } });
}

/** Hold a started run (a result with `dispatch: hold`, under the entry agent's claim on the entry handoff). */
export function holdRun(events: JetStreamEventStore, project: string, id: string, reason: string, at = 1): Promise<void> {
  const handoffId = handoffIdFor(id, { kind: 'start', id });
  const claim = { claim_id: `c-${handoffId}`, claimed_by: 'support' };
  return runCommand(events, project, id, {
    type: 'record_result',
    data: {
      result: {
        result_id: `res-${id}`,
        run_id: `ar-${id}`,
        project,
        workflow_run_id: id,
        agent: 'support',
        produced_at: minute(at),
        decision: { dispatch: { status: 'hold', reason } },
        handoff_id: handoffId,
        claim_id: claim.claim_id,
      },
      workflow: fixtureWorkflow,
      agents: fixtureAgents,
      handoff: { handoff_id: handoffId, status: 'claimed', claim },
    },
    metadata: { now: minute(at), actor: 'router' },
  });
}

/** Record an operator's answer to a run's open stop packet (as the router would). */
export function answerStop(events: JetStreamEventStore, project: string, id: string, packetId: string, at = 2): Promise<void> {
  return runCommand(
    events,
    project,
    id,
    {
      type: 'resume',
      data: {
        answer: {
          kind: 'stop_answer',
          answer: { packet_id: packetId, answer_id: `ans-${packetId}`, action: 'deny', answered_by: 'olga', answered_at: minute(at) },
        },
        workflow: fixtureWorkflow,
        agents: fixtureAgents,
      },
      metadata: { now: minute(at), actor: 'olga', actorRole: 'operator' },
    },
    'olga',
    'operator',
  );
}

/** alice's task handoff for bob (how every fixture handoff starts). */
function createCommand(project: string, id: string, summary: string, now: string): HandoffCommand {
  return {
    type: 'create',
    data: {
      handoff_id: id,
      project,
      kind: 'task',
      priority: 'high',
      from_agent: 'alice',
      to_agent: 'bob',
      summary,
      context: {},
      acceptance: {},
      max_retries: 3,
      idempotency_key: `create:${id}`,
    },
    metadata: { now, actor: 'alice', actorKind: 'agent' },
  } as HandoffCommand;
}

/** Create a handoff for bob and leave it pending (nobody claims it). */
export async function createHandoff(events: JetStreamEventStore, project: string, id: string, summary: string, at = 3): Promise<void> {
  const now = minute(at);
  const meta = {
    commandId: `cmd-${++commands}-${randomBytes(3).toString('hex')}`,
    occurredAt: now,
    actor: 'alice',
    origin: 'agent' as const,
    causationId: null,
    correlationId: id,
  };
  const result = await events.handleCommand({ project, kind: 'handoff', id }, handoffDecider, createCommand(project, id, summary, now), meta);
  if (!result.ok) throw new Error(`create refused: ${result.error.code}`);
}

/** Create, claim and return a handoff (so a completion handback opens for `from`), with the ledger's reactions. */
export async function handbackCycle(events: JetStreamEventStore, project: string, id: string, summary: string, reportSummary: string): Promise<void> {
  const now = minute(3);
  const steps: Array<{ id: string; command: HandoffCommand }> = [
    { id, command: createCommand(project, id, summary, now) },
    {
      id,
      command: {
        type: 'claim',
        data: { handoff_id: id, claim_id: `c-${id}`, lease_ms: 60_000, claimer_roles: [], idempotency_key: `claim:${id}` },
        metadata: { now, actor: 'bob', actorKind: 'agent' },
      } as HandoffCommand,
    },
    {
      id,
      command: {
        type: 'return',
        data: {
          handoff_id: id,
          claim_id: `c-${id}`,
          report: { summary: reportSummary, files_changed: [], verification: reportSummary, next_steps: '', outcome: 'completed', evidence: {} },
          handback_id: `hb-${id}`,
          roster: { visible_actors: ['alice', 'bob'], project_lead: 'lena' },
          idempotency_key: `return:${id}`,
        },
        metadata: { now, actor: 'bob', actorKind: 'agent' },
      } as HandoffCommand,
    },
  ];
  while (steps.length > 0) {
    const step = steps.shift() as { id: string; command: HandoffCommand };
    const ref = { project, kind: 'handoff', id: step.id } as const;
    const meta = {
      commandId: `cmd-${++commands}-${randomBytes(3).toString('hex')}`,
      occurredAt: now,
      actor: step.command.metadata.actor,
      origin: 'agent' as const,
      causationId: null,
      correlationId: step.id,
    };
    const result = await events.handleCommand(ref, handoffDecider, step.command, meta);
    if (!result.ok) throw new Error(`${step.command.type} refused: ${result.error.code}`);
    let state = handoffDecider.initialState();
    for (const e of (await events.read(ref)).events) state = handoffDecider.evolve(state, { type: e.type, data: e.payload } as HandoffEvent);
    for (const stored of result.events) {
      for (const reaction of reactToHandoffEvent({ type: stored.type, data: stored.payload } as HandoffEvent, {
        state,
        deriveId: (...parts) => parts.join('-'),
        projectLead: 'lena',
      })) {
        steps.push({ id: reaction.aggregateId, command: reaction.command });
      }
    }
  }
}

/** A turn's claim on its handoff (the claim rule): `agent` holds it, as the router would have read it. */
const claimOf = (handoffId: string, agent: string) => ({
  handoff_id: handoffId,
  claim_id: `c-${handoffId}`,
  handoff: { handoff_id: handoffId, status: 'claimed' as const, claim: { claim_id: `c-${handoffId}`, claimed_by: agent } },
});

/**
 * A mesh of two agents (triage ⇄ billing, at most 2 handoffs) that hands off until its cap: the
 * mesh stops (`thrash`) with a stop packet and one human action notice for `sam`, written with
 * the real mesh decider. Returns the stop packet id.
 */
export async function thrashMesh(events: JetStreamEventStore, project: string, id: string, at = 1): Promise<string> {
  const now = minute(at);
  const mesh = MeshDefinitionSchema.parse({ name: 'support', entry: 'triage', handoffs: { triage: ['billing'], billing: ['triage'] }, max_iterations: 2 });
  const turns: MeshCommand[] = [
    { type: 'start_mesh', data: { mesh_run_id: id, project, mesh, agents: ['triage', 'billing'], started_by: 'sam' }, metadata: { now, actor: 'sam' } },
    {
      type: 'record_turn',
      data: {
        result_id: `${id}-r1`,
        run_id: `${id}-ar1`,
        agent: 'triage',
        text: 'over to billing',
        handoff_tool_calls: [{ tool: handoffToolName('billing') }],
        ...claimOf(meshEntryHandoffId(id), 'triage'),
      },
      metadata: { now, actor: 'triage' },
    },
    {
      type: 'record_turn',
      data: {
        result_id: `${id}-r2`,
        run_id: `${id}-ar2`,
        agent: 'billing',
        text: 'back to triage',
        handoff_tool_calls: [{ tool: handoffToolName('triage') }],
        ...claimOf(meshHandoffId(id, `${id}-r1`), 'billing'),
      },
      metadata: { now, actor: 'billing' },
    },
  ];
  let packetId: string | null = null;
  for (const command of turns) {
    const meta = {
      commandId: `cmd-${++commands}-${randomBytes(3).toString('hex')}`,
      occurredAt: now,
      actor: command.metadata.actor,
      origin: 'agent' as const,
      causationId: null,
      correlationId: id,
    };
    const result = await events.handleCommand({ project, kind: 'mesh', id }, meshDecider, command, meta);
    if (!result.ok) throw new Error(`${command.type} refused: ${result.error.code}`);
    const stopped = result.events.find((e) => e.type === 'mesh.stopped');
    if (stopped) packetId = (stopped.payload as { packet: { packet_id: string } }).packet.packet_id;
  }
  if (packetId === null) throw new Error(`mesh ${id} did not stop`);
  return packetId;
}
