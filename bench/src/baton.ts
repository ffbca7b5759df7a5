import type Redis from 'ioredis';
import { MsgIds, Subjects, type ProjectDefinition, type PublishDefinitionReply } from '@baton/contracts';
import type { NatsHandle } from '@baton/eventstore';
import { batonProjections } from '@baton/projections';
import { sleep } from './stats';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The agents of the bench workflow, in the order the workflow cycles through them. */
export const BENCH_AGENTS = ['ping', 'pong', 'pang'] as const;

/**
 * The bench project: three agents that hand the run on in a cycle forever (ping → pong → pang →
 * ping ...), so every result dispatches. Three, not two: each edge is always taken in the same
 * direction, so the watchdog's ping-pong guard (thrash) never trips; the hop budget is raised
 * through WATCHDOG_MAX_HOPS for the bench.
 */
export function benchDefinition(project: string): ProjectDefinition {
  return {
    project,
    lead: 'lead',
    agents: [...BENCH_AGENTS.map((name) => ({ name, role: name })), { name: 'lead', role: 'lead' }],
    workflows: [
      {
        name: 'loop',
        version: 1,
        entry: 'ping',
        steps: BENCH_AGENTS.map((agent, i) => ({ id: agent, agent, next: BENCH_AGENTS[(i + 1) % BENCH_AGENTS.length] })),
      },
    ],
  } as ProjectDefinition;
}

/** Publish the bench project's definition through the router (request/reply). */
export async function publishDefinition(nats: NatsHandle, prefix: string, project: string): Promise<void> {
  const subject = Subjects.routerCommand(prefix, project, 'publish_definition');
  const reply = await nats.connection.request(subject, encoder.encode(JSON.stringify(benchDefinition(project))), { timeout: 10_000 });
  const body = JSON.parse(decoder.decode(reply.data)) as PublishDefinitionReply;
  if (!body.ok) throw new Error(`the router refused the bench definition: ${body.error.code}: ${body.error.message}`);
}

/** Start a run of the loop workflow (JetStream publish into the inbox, deduplicated by run id). */
export async function startRun(nats: NatsHandle, prefix: string, project: string, runId: string): Promise<void> {
  const body = { workflow_run_id: runId, project, workflow: 'loop', started_by: 'bench' };
  await nats.js.publish(Subjects.runStart(prefix, project), encoder.encode(JSON.stringify(body)), { msgID: MsgIds.start(project, runId) });
}

/** An agent result that advances the run (the workflow edge dispatches the other agent), under the claim `claim` when given. */
export function advanceResult(
  project: string,
  runId: string,
  agent: string,
  n: number,
  claim?: { handoffId: string; claimId: string },
): Record<string, unknown> {
  return {
    result_id: `${runId}-r${n}`,
    run_id: `ar-${runId}-${n}`,
    project,
    workflow_run_id: runId,
    agent,
    body: 'Step done.',
    decision: { dispatch: { status: 'advance' } },
    ...(claim ? { handoff_id: claim.handoffId, claim_id: claim.claimId } : {}),
    produced_at: new Date().toISOString(),
  };
}

/** Publish an agent result (acked by JetStream; `Nats-Msg-Id` = `result:<project>:<result id>`). */
export async function publishResult(nats: NatsHandle, prefix: string, result: Record<string, unknown>): Promise<void> {
  const subject = Subjects.agentResult(prefix, String(result['project']), String(result['agent']));
  await nats.js.publish(subject, encoder.encode(JSON.stringify(result)), { msgID: MsgIds.result(String(result['project']), String(result['result_id'])) });
}

/** An offer as the ledger publishes it: which run, which agent, which handoff, at which event seq. */
export interface Offer {
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
export function onOffers(nats: NatsHandle, prefix: string, project: string, handler: (offer: Offer) => void): () => void {
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

const MIN_SEQ_SCRIPT = `
local low = nil
for i = 1, #ARGV do
  local base = KEYS[1] .. ':' .. ARGV[i]
  local gen = redis.call('GET', base .. ':active')
  local seq = 0
  if gen then seq = tonumber(redis.call('HGET', base .. ':g' .. gen .. ':~meta', 'seq') or '0') end
  if low == nil or seq < low then low = seq end
end
return low or 0
`;

/**
 * Watches how far the notifier's projections have applied the events stream (the lowest last
 * applied seq over every projection, read in one Lua call) and resolves waiters as their event
 * becomes visible. Polls every `intervalMs`.
 */
export class VisibilityWatcher {
  private lastSeq = 0;
  private readonly waiters = new Map<number, Array<(at: number) => void>>();
  private running = true;
  private readonly loop: Promise<void>;
  private readonly names = batonProjections().map((p) => p.name);

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly intervalMs = 1,
    private readonly clock: () => number = () => Date.now(),
  ) {
    this.loop = this.poll();
  }

  /** The lowest last applied seq over the projections, as last polled. */
  get applied(): number {
    return this.lastSeq;
  }

  /** Read it now. */
  async read(): Promise<number> {
    return Number(await this.redis.eval(MIN_SEQ_SCRIPT, 1, `${this.prefix}:proj`, ...this.names));
  }

  /** Resolves with the clock's time when the projections have applied `seq`. */
  visible(seq: number): Promise<number> {
    if (seq <= this.lastSeq) return Promise.resolve(this.clock());
    return new Promise((resolve) => {
      const list = this.waiters.get(seq) ?? [];
      list.push(resolve);
      this.waiters.set(seq, list);
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  private async poll(): Promise<void> {
    while (this.running) {
      try {
        this.lastSeq = await this.read();
        const at = this.clock();
        for (const [seq, list] of this.waiters) {
          if (seq > this.lastSeq) continue;
          this.waiters.delete(seq);
          for (const resolve of list) resolve(at);
        }
      } catch {
        // Redis hiccup: poll again
      }
      await sleep(this.intervalMs);
    }
  }
}
