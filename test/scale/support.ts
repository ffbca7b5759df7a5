import { MsgIds, Subjects, type ProjectDefinition, type PublishDefinitionReply } from '@baton/contracts';
import type { NatsHandle } from '@baton/eventstore';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The agents of the scale workflow, in cycle order (three, so the watchdog's ping-pong guard never trips). */
export const AGENTS = ['ping', 'pong', 'pang'] as const;

/** Publish a project whose workflow `loop` cycles ping → pong → pang → ping ... */
export async function publishDefinition(nats: NatsHandle, prefix: string, project: string): Promise<void> {
  const definition = {
    project,
    lead: 'lead',
    agents: [...AGENTS.map((name) => ({ name, role: name })), { name: 'lead', role: 'lead' }],
    workflows: [{ name: 'loop', version: 1, entry: 'ping', steps: AGENTS.map((agent, i) => ({ id: agent, agent, next: AGENTS[(i + 1) % AGENTS.length] })) }],
  } as ProjectDefinition;
  const reply = await nats.connection.request(Subjects.routerCommand(prefix, project, 'publish_definition'), encoder.encode(JSON.stringify(definition)), {
    timeout: 10_000,
  });
  const body = JSON.parse(decoder.decode(reply.data)) as PublishDefinitionReply;
  if (!body.ok) throw new Error(`the router refused the definition: ${body.error.code}`);
}

/** Start a run of `loop` (JetStream publish into the inbox). */
export async function startRun(nats: NatsHandle, prefix: string, project: string, runId: string): Promise<void> {
  const body = { workflow_run_id: runId, project, workflow: 'loop', started_by: 'scale-test' };
  await nats.js.publish(Subjects.runStart(prefix, project), encoder.encode(JSON.stringify(body)), { msgID: MsgIds.start(project, runId) });
}

/**
 * An agent result for a run's current handoff, under the claim its agent holds on it (the claim
 * rule, docs/runs.md): advance (the workflow edge dispatches the next agent), or terminate.
 */
export function agentResult(
  project: string,
  runId: string,
  agent: string,
  n: number,
  claim: { handoffId: string; claimId: string },
  terminate: boolean,
): Record<string, unknown> {
  return {
    result_id: `${runId}-r${n}`,
    run_id: `ar-${runId}-${n}`,
    project,
    workflow_run_id: runId,
    agent,
    body: 'Step done.',
    decision: terminate ? { dispatch: { status: 'terminate', reason: 'scale test done' } } : { dispatch: { status: 'advance' } },
    handoff_id: claim.handoffId,
    claim_id: claim.claimId,
    produced_at: new Date().toISOString(),
  };
}

/** Publish an agent result (acked; `Nats-Msg-Id` = `result:<project>:<result id>`). */
export async function publishResult(nats: NatsHandle, prefix: string, result: Record<string, unknown>): Promise<void> {
  await nats.js.publish(Subjects.agentResult(prefix, String(result['project']), String(result['agent'])), encoder.encode(JSON.stringify(result)), {
    msgID: MsgIds.result(String(result['project']), String(result['result_id'])),
  });
}

/** Each offer the ledger publishes for the project: run, addressed agent, handoff. Returns a stop function. */
export function onOffers(
  nats: NatsHandle,
  prefix: string,
  project: string,
  handler: (offer: { runId: string; agent: string; handoffId: string }) => void,
): () => void {
  const sub = nats.connection.subscribe(Subjects.offer(prefix, project, '*'), {
    callback: (err, msg) => {
      if (err) return;
      const handoffId = msg.headers?.get('Baton-Handoff-Id') ?? '';
      const record = JSON.parse(decoder.decode(msg.data)) as { to_agent?: string; workflow_run_id?: string };
      if (record.workflow_run_id && record.to_agent && handoffId) handler({ runId: record.workflow_run_id, agent: record.to_agent, handoffId });
    },
  });
  return () => sub.unsubscribe();
}
