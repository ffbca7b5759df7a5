import { edgeSubjectOf, MsgIds, Subjects, type ProjectDefinition, type PublishDefinitionReply } from '@baton/contracts';
import type { NatsHandle } from '@baton/eventstore';

/*
 * The cycle workflow the bench and the scale test drive: three agents that hand a run on forever
 * (ping → pong → pang → ping ...), so every result dispatches. Three, not two: each edge is always
 * taken in the same direction, so the watchdog's ping-pong guard (thrash) never trips (the bench
 * raises the hop budget with WATCHDOG_MAX_HOPS). Everything goes through Baton's documented
 * subjects: the router's `publish_definition`, the inbox's run starts and agent results, offers.
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The agents of the cycle workflow `loop`, in the order it cycles through them. */
export const CYCLE_AGENTS = ['ping', 'pong', 'pang'] as const;

/** A project whose workflow `loop` cycles through {@link CYCLE_AGENTS}. */
export function cycleDefinition(project: string): ProjectDefinition {
  return {
    project,
    lead: 'lead',
    agents: [...CYCLE_AGENTS.map((name) => ({ name, role: name })), { name: 'lead', role: 'lead' }],
    workflows: [
      {
        name: 'loop',
        version: 1,
        entry: 'ping',
        steps: CYCLE_AGENTS.map((agent, i) => ({ id: agent, agent, next: CYCLE_AGENTS[(i + 1) % CYCLE_AGENTS.length] })),
      },
    ],
  } as ProjectDefinition;
}

/** Publish {@link cycleDefinition} through the router (request/reply); throws with the router's code on a refusal. */
export async function publishCycleDefinition(nats: NatsHandle, prefix: string, project: string): Promise<void> {
  const subject = Subjects.routerCommand(prefix, project, 'publish_definition');
  const reply = await nats.connection.request(subject, encoder.encode(JSON.stringify(cycleDefinition(project))), { timeout: 10_000 });
  const body = JSON.parse(decoder.decode(reply.data)) as PublishDefinitionReply;
  if (!body.ok) throw new Error(`the router refused the cycle definition: ${body.error.code}: ${body.error.message}`);
}

/** Start a run of `loop` (JetStream publish into the inbox, deduplicated by run id). */
export async function startCycleRun(nats: NatsHandle, prefix: string, project: string, runId: string, startedBy: string): Promise<void> {
  const body = { workflow_run_id: runId, project, workflow: 'loop', started_by: startedBy };
  await nats.js.publish(Subjects.runStart(prefix, project), encoder.encode(JSON.stringify(body)), { msgID: MsgIds.start(project, runId) });
}

/**
 * Agent result `n` of a run, under the claim its agent holds on the run's current handoff when
 * given (the claim rule, docs/runs.md): advance (the workflow edge dispatches the next agent), or
 * terminate the run.
 */
export function cycleResult(
  project: string,
  runId: string,
  agent: string,
  n: number,
  claim?: { handoffId: string; claimId: string },
  terminate = false,
): Record<string, unknown> {
  return {
    result_id: `${runId}-r${n}`,
    run_id: `ar-${runId}-${n}`,
    project,
    workflow_run_id: runId,
    agent,
    body: 'Step done.',
    decision: terminate ? { dispatch: { status: 'terminate', reason: 'done' } } : { dispatch: { status: 'advance' } },
    ...(claim ? { handoff_id: claim.handoffId, claim_id: claim.claimId } : {}),
    produced_at: new Date().toISOString(),
  };
}

/**
 * Publish an agent result (acked by JetStream; `Nats-Msg-Id` = `result:<project>:<workflow_run_id>/<result_id>`).
 * With `edge`, on the agent's edge subject (an agent with credentials: the ledger relays it, and
 * JetStream acks on the agent's own inbox — `nats` must be that agent's connection).
 */
export async function publishAgentResult(nats: NatsHandle, prefix: string, result: Record<string, unknown>, opts: { edge?: boolean } = {}): Promise<void> {
  const inbox = Subjects.agentResult(prefix, String(result['project']), String(result['agent']));
  const subject = opts.edge === true ? edgeSubjectOf(prefix, inbox) : inbox;
  await nats.js.publish(subject, encoder.encode(JSON.stringify(result)), {
    msgID: MsgIds.result(String(result['project']), String(result['workflow_run_id']), String(result['result_id'])),
  });
}

/** An offer as the ledger publishes it: which run, which agent, which handoff, at which event seq. */
export interface CycleOffer {
  runId: string;
  agent: string;
  handoffId: string;
  /** Stream sequence of the event that made the handoff pending (its `handoff.created`). */
  seq: number;
}

/**
 * Listen to the offers of a project with a core subscription (JetStream-stored messages reach
 * plain subscribers as they are stored). Returns a stop function.
 */
export function onOffers(nats: NatsHandle, prefix: string, project: string, handler: (offer: CycleOffer) => void): () => void {
  const sub = nats.connection.subscribe(Subjects.offer(prefix, project, '*'), {
    callback: (err, msg) => {
      if (err) return;
      const seq = Number(msg.headers?.get('Baton-Event-Seq') ?? '0');
      const handoffId = msg.headers?.get('Baton-Handoff-Id') ?? '';
      const record = JSON.parse(decoder.decode(msg.data)) as { to_agent?: string; workflow_run_id?: string; context?: { workflow_run_id?: string } };
      const runId = record.workflow_run_id ?? record.context?.workflow_run_id;
      if (!runId || !record.to_agent || !handoffId) return;
      handler({ runId, agent: record.to_agent, handoffId, seq });
    },
  });
  return () => sub.unsubscribe();
}
