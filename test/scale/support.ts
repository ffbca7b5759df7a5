import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { Subjects, type ProjectDefinition, type PublishDefinitionReply } from '@baton/contracts';
import { batonStreamNames, type NatsHandle } from '@baton/eventstore';
import { freePort } from '../e2e/platform';

export { freePort };

/** The repository root. */
export const root = join(__dirname, '..', '..');
const encoder = new TextEncoder();
const decoder = new TextDecoder();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export type ServiceName = 'ledger' | 'router' | 'watchdog' | 'notifier';

export interface ServiceProcess {
  name: ServiceName;
  /** BATON_INSTANCE of the process (distinct per process: it names the instance in logs and consumers). */
  instance: string;
  port: number;
  child: ChildProcess;
  output: string[];
}

/** Start one built service as its own process (`node dist/apps/<name>/src/main.js`) with its own instance id. */
export function startService(name: ServiceName, port: number, env: Record<string, string>, instance: string): ServiceProcess {
  const child = spawn(process.execPath, [join(root, 'dist', 'apps', name, 'src', 'main.js')], {
    cwd: root,
    env: { ...process.env, ...env, HTTP_PORT: String(port), HTTP_HOST: '127.0.0.1', BATON_INSTANCE: instance },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    output.push(chunk.toString());
    if (output.length > 400) output.splice(0, output.length - 400);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { name, instance, port, child, output };
}

/** Resolve when `/health/ready` answers 200, or fail with the service's last output. */
export async function waitReady(service: ServiceProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (service.child.exitCode !== null) break;
    try {
      if ((await fetch(`http://127.0.0.1:${service.port}/health/ready`)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  throw new Error(`${service.instance} did not become ready:\n${service.output.join('').slice(-3000)}`);
}

/** SIGTERM (graceful shutdown), SIGKILL after 15 s; resolves with the exit code. */
export async function stopService(service: ServiceProcess): Promise<number | null> {
  if (service.child.exitCode !== null || service.child.signalCode !== null) return service.child.exitCode;
  const exited = once(service.child, 'exit');
  service.child.kill('SIGTERM');
  const timer = setTimeout(() => service.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
  return service.child.exitCode;
}

/** `instances` processes of every service (instance ids `<name>-1`, `<name>-2`...), all ready. */
export async function startPlatform(env: Record<string, string>, instances: number): Promise<ServiceProcess[]> {
  const services: ServiceProcess[] = [];
  for (const name of ['ledger', 'router', 'watchdog', 'notifier'] as const) {
    for (let i = 1; i <= instances; i++) services.push(startService(name, await freePort(), env, `${name}-${i}`));
  }
  try {
    await Promise.all(services.map((service) => waitReady(service)));
  } catch (error) {
    await Promise.all(services.map((service) => stopService(service)));
    throw error;
  }
  return services;
}

/** Wait until every durable consumer of the deployment has nothing pending or unacknowledged. */
export async function waitQuiet(nats: NatsHandle, prefix: string, timeoutMs: number): Promise<boolean> {
  const names = batonStreamNames(prefix);
  const deadline = Date.now() + timeoutMs;
  let quiet = 0;
  while (Date.now() < deadline) {
    let busy = false;
    for (const stream of [names.events, names.inbox]) {
      for await (const info of nats.jsm.consumers.list(stream)) {
        if (info.config.durable_name && (info.num_pending > 0 || info.num_ack_pending > 0)) busy = true;
      }
    }
    quiet = busy ? 0 : quiet + 1;
    if (quiet >= 3) return true;
    await sleep(100);
  }
  return false;
}

/** Delete the deployment's streams and Redis keys. */
export async function cleanupDeployment(nats: NatsHandle, redis: { keys(pattern: string): Promise<string[]>; del(...keys: string[]): Promise<number> }, prefix: string): Promise<void> {
  const names = batonStreamNames(prefix);
  for (const stream of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(stream).catch(() => undefined);
  const keys = await redis.keys(`${prefix}:*`);
  for (let i = 0; i < keys.length; i += 1000) await redis.del(...keys.slice(i, i + 1000));
}

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
  const reply = await nats.connection.request(Subjects.routerCommand(prefix, project, 'publish_definition'), encoder.encode(JSON.stringify(definition)), { timeout: 10_000 });
  const body = JSON.parse(decoder.decode(reply.data)) as PublishDefinitionReply;
  if (!body.ok) throw new Error(`the router refused the definition: ${body.error.code}`);
}

/** Start a run of `loop` (JetStream publish into the inbox). */
export async function startRun(nats: NatsHandle, prefix: string, project: string, runId: string): Promise<void> {
  const body = { workflow_run_id: runId, project, workflow: 'loop', started_by: 'scale-test' };
  await nats.js.publish(Subjects.runStart(prefix, project), encoder.encode(JSON.stringify(body)), { msgID: `start:${runId}` });
}

/** An agent result for a run's current handoff: advance (the workflow edge dispatches the next agent), or terminate. */
export function agentResult(project: string, runId: string, agent: string, n: number, handoffId: string, terminate: boolean): Record<string, unknown> {
  return {
    result_id: `${runId}-r${n}`,
    run_id: `ar-${runId}-${n}`,
    project,
    workflow_run_id: runId,
    agent,
    body: 'Step done.',
    decision: terminate ? { dispatch: { status: 'terminate', reason: 'scale test done' } } : { dispatch: { status: 'advance' } },
    handoff_id: handoffId,
    produced_at: new Date().toISOString(),
  };
}

/** Publish an agent result (acked; `Nats-Msg-Id` = result id). */
export async function publishResult(nats: NatsHandle, prefix: string, result: Record<string, unknown>): Promise<void> {
  await nats.js.publish(Subjects.agentResult(prefix, String(result['project']), String(result['agent'])), encoder.encode(JSON.stringify(result)), { msgID: String(result['result_id']) });
}

/** Each offer the ledger publishes for the project: run, addressed agent, handoff. Returns a stop function. */
export function onOffers(nats: NatsHandle, prefix: string, project: string, handler: (offer: { runId: string; agent: string; handoffId: string }) => void): () => void {
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
