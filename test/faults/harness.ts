import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEventRegistry, EventHeader, MsgIds, type AggregateKind, type ProjectDefinition } from '@baton/contracts';
import { batonStreamNames, deploymentStreamNames, connectNats, JetStreamEventStore, type NatsHandle, type StoredEvent } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import {
  AgentClaims,
  freePort,
  lastLines,
  pauseProcess,
  removeDeploymentKeys,
  resumeProcess,
  repoRoot,
  startService as startBuiltService,
  stopService,
  waitReady,
  type ServiceProcess,
} from '@baton/testing';

export { freePort, stopService, waitReady, type ServiceProcess };

/**
 * Where the built services are: the repo root (`dist/apps/<name>/src/main.js`), or
 * `BATON_FAULT_ROOT` to run the suite against another build of Baton.
 */
export const distRoot = process.env['BATON_FAULT_ROOT'] ?? repoRoot();

/** Start one built service as its own process from {@link distRoot}; BATON_INSTANCE from `env`, else `<name>-fault`. */
export function startService(name: string, port: number, env: Record<string, string>): ServiceProcess {
  return startBuiltService(name, port, env, { root: distRoot, instance: env['BATON_INSTANCE'] ?? `${name}-fault` });
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Connect once JetStream answers. On a cluster whose node just died (or came back) the meta
 * leader may be mid-election for several seconds, and the account info call that `connectNats`
 * makes times out meanwhile: retry until `withinMs`, then fail with the last error.
 */
export async function connectWhenJetStreamReady(servers: string | string[], name: string, withinMs = 30_000): Promise<NatsHandle> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    try {
      return await connectNats({ servers, name, reconnect: true });
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(500);
    }
  }
}
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Resolve once something accepts TCP connections on 127.0.0.1:port. */
export async function waitPort(port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = tcpConnect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(100);
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
}

/** A server process this suite started (nats-server or redis-server) and can stop, kill and restart. */
export interface ServerProcess {
  name: string;
  port: number;
  url: string;
  dir: string;
  output: string[];
  child: ChildProcess;
  /** SIGKILL (default) or SIGTERM, and wait for the exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Start the same server again on the same port and data directory. */
  restart(): Promise<void>;
  /** SIGSTOP, resolved once every thread of the server has stopped (`kill` returns before that): it answers nothing until {@link resume}. */
  pause(): Promise<void>;
  /** SIGCONT: a paused server goes on. */
  resume(): void;
}

function spawnServer(name: string, command: string, args: string[], port: number, url: string, dir: string): Promise<ServerProcess> {
  const output: string[] = [];
  const launch = () => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk: Buffer) => {
      output.push(chunk.toString());
      if (output.length > 300) output.splice(0, output.length - 300);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    return child;
  };
  const server: ServerProcess = {
    name,
    port,
    url,
    dir,
    output,
    child: launch(),
    async stop(signal: NodeJS.Signals = 'SIGKILL') {
      if (server.child.exitCode !== null || server.child.signalCode !== null) return;
      const exited = once(server.child, 'exit');
      // A paused server would not act on a SIGTERM until it is let go.
      server.child.kill('SIGCONT');
      server.child.kill(signal);
      await exited;
    },
    pause: () => pauseProcess(server.child),
    resume: () => resumeProcess(server.child),
    async restart() {
      await server.stop();
      server.child = launch();
      await waitPort(port).catch((error: Error) => {
        throw new Error(`${name} did not restart: ${error.message}\n${output.join('').slice(-2000)}`);
      });
    },
  };
  return waitPort(port).then(
    () => server,
    (error: Error) => {
      server.child.kill('SIGKILL');
      throw new Error(`${name} did not start: ${error.message}\n${output.join('').slice(-2000)}`);
    },
  );
}

/** Our own nats-server with JetStream and file storage in a fresh temp dir, on a free loopback port. */
export async function startNatsServer(
  opts: { name?: string; port?: number; dir?: string; cluster?: { port: number; routes: number[] } } = {},
): Promise<ServerProcess> {
  const port = opts.port ?? (await freePort());
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'baton-fault-nats-')));
  const name = opts.name ?? `n${port}`;
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir, '-server_name', name];
  if (opts.cluster) {
    args.push('-cluster', `nats://127.0.0.1:${opts.cluster.port}`, '-cluster_name', 'baton-fault');
    args.push('-routes', opts.cluster.routes.map((p) => `nats://127.0.0.1:${p}`).join(','));
  }
  return spawnServer(`nats-server ${name}`, 'nats-server', args, port, `nats://127.0.0.1:${port}`, dir);
}

/** Our own redis-server (no persistence) on a free loopback port. */
export async function startRedisServer(): Promise<ServerProcess> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'baton-fault-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
  return spawnServer('redis-server', 'redis-server', args, port, `redis://127.0.0.1:${port}`, dir);
}

/** Stop servers (SIGKILL) and delete their data directories. */
export async function removeServers(servers: ServerProcess[]): Promise<void> {
  for (const server of servers) {
    await server.stop('SIGKILL').catch(() => undefined);
    await rm(server.dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

export const SERVICES = ['ledger', 'router', 'watchdog', 'notifier'] as const;
export type ServiceName = (typeof SERVICES)[number];

/** The four services as processes from dist, each restartable (kill -9 and start again). */
export class Platform {
  readonly services = new Map<string, ServiceProcess>();
  constructor(readonly env: Record<string, string>) {}

  static async start(env: Record<string, string>, names: readonly string[] = SERVICES): Promise<Platform> {
    const platform = new Platform(env);
    try {
      for (const name of names) await platform.startOne(name);
      await Promise.all([...platform.services.values()].map((s) => waitReady(s, 60_000)));
    } catch (error) {
      await platform.stop();
      throw error;
    }
    return platform;
  }

  /** Start (or start again) a service; `key` names a second instance of the same app. */
  async startOne(app: string, key = app, extraEnv: Record<string, string> = {}): Promise<ServiceProcess> {
    const port = await freePort();
    const service = startService(app, port, { ...this.env, ...extraEnv, BATON_INSTANCE: `${key}-${port}` });
    this.services.set(key, service);
    return service;
  }

  get(key: string): ServiceProcess {
    const service = this.services.get(key);
    if (!service) throw new Error(`no service ${key}`);
    return service;
  }

  /** kill -9 a service, then start a fresh process and wait until it is ready. */
  async killAndRestart(key: string, app = key, downMs = 500): Promise<void> {
    await stopService(this.get(key), 'SIGKILL');
    await sleep(downMs);
    await waitReady(await this.startOne(app, key), 60_000);
  }

  /** Write each service's last output lines to `<dir>/<key>.log` (for a failing test's post-mortem). */
  async dumpLogs(dir: string): Promise<void> {
    const { writeFile, mkdir } = await import('node:fs/promises');
    await mkdir(dir, { recursive: true });
    for (const [key, service] of this.services) await writeFile(join(dir, `${key}.log`), service.output.join(''));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.services.values()].map((s) => stopService(s, 'SIGKILL')));
  }

  /**
   * `error` with the last `lines` lines each service printed added to its message (the services
   * log warnings and errors at the suite's level), so a failure in CI shows what the services saw.
   */
  withLogs(error: unknown, lines = 30): Error {
    const tails = [...this.services.entries()].map(([key, service]) => {
      const tail = lastLines(service, lines).join('\n');
      return `--- ${key} (${service.child.exitCode === null ? 'running' : `exited ${service.child.exitCode}`}):\n${tail || '(nothing printed)'}`;
    });
    const failure = error instanceof Error ? error : new Error(String(error));
    failure.message = `${failure.message}\n\nwhat the services printed last:\n${tails.join('\n')}`;
    return failure;
  }
}

/**
 * The load tests' platform: the four services (or FAULT_SERVICES) against `natsUrl` with the
 * fault suite's settings (FAULT_LOG_LEVEL, a 500 ms watchdog tick, `extraEnv` on top), and the
 * fault project's definition published.
 */
export async function startLoadPlatform(natsUrl: string | string[], prefix: string, project: string, extraEnv: Record<string, string> = {}): Promise<Platform> {
  const servers = Array.isArray(natsUrl) ? natsUrl : [natsUrl];
  const platform = await Platform.start(
    {
      NATS_URL: servers.join(','),
      REDIS_URL: process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379',
      BATON_PREFIX: prefix,
      LOG_LEVEL: process.env['FAULT_LOG_LEVEL'] ?? 'error',
      WATCHDOG_TICK_MS: '500',
      ...extraEnv,
    },
    process.env['FAULT_SERVICES'] ? process.env['FAULT_SERVICES'].split(',') : undefined,
  );
  const handle = await connectNats({ servers, reconnect: false });
  try {
    await publishDefinition(handle, prefix, project);
  } finally {
    await handle.close();
  }
  return platform;
}

/** Undo {@link startLoadPlatform} and the servers a test started: services, streams, servers. */
export async function stopLoadPlatform(platform: Platform | undefined, natsUrl: string | string[], prefix: string, servers: ServerProcess[]): Promise<void> {
  await platform?.stop();
  await deleteStreams(natsUrl, prefix);
  await deleteRedisKeys(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379', prefix);
  await removeServers(servers);
}

/** Delete a prefix's Redis keys (the projections the notifier wrote on the shared Redis); best effort. */
export async function deleteRedisKeys(redisUrl: string, prefix: string): Promise<void> {
  const redis = createRedis(redisUrl, { maxRetriesPerRequest: 1, commandTimeout: 10_000 });
  try {
    await removeDeploymentKeys(redis.client, prefix);
  } catch {
    // best effort: a test that stopped Redis itself has nothing to clean there
  } finally {
    await redis.close();
  }
}

/** A random subject prefix for one test. */
export const randomPrefix = (tag: string) => `f${tag}${randomBytes(4).toString('hex')}`;

/** The project every fault test runs: a two-step workflow (worker-a → worker-b, terminal). */
export function faultDefinition(project: string): ProjectDefinition {
  return {
    project,
    lead: 'lead-agent',
    agents: [
      { name: 'worker-a', role: 'first step' },
      { name: 'worker-b', role: 'second step' },
      { name: 'lead-agent', role: 'lead' },
      ...Array.from({ length: 50 }, (_, i) => ({ name: `claimer-${i}`, role: 'claimer' })),
    ],
    workflows: [
      {
        name: 'pair',
        version: 1,
        entry: 'first',
        steps: [
          { id: 'first', agent: 'worker-a', next: 'second' },
          { id: 'second', agent: 'worker-b', terminal: true },
        ],
      },
    ],
  } as ProjectDefinition;
}

/** Publish the definition through the router (retrying while the router is not subscribed yet). */
export async function publishDefinition(nats: NatsHandle, prefix: string, project: string): Promise<void> {
  const subject = `${prefix}.cmd.router.${project}.publish_definition`;
  let last = '';
  for (let attempt = 0; attempt < 40; attempt++) {
    try {
      const reply = await nats.connection.request(subject, encoder.encode(JSON.stringify(faultDefinition(project))), { timeout: 5000 });
      const body = JSON.parse(decoder.decode(reply.data)) as { ok: boolean; error?: unknown };
      if (body.ok) return;
      last = JSON.stringify(body);
    } catch (error) {
      last = String(error);
    }
    await sleep(250);
  }
  throw new Error(`publishing the definition failed: ${last}`);
}

/** What the load generator did: every run it started and every result the inbox acknowledged. */
export interface LoadReport {
  runs: string[];
  /** result_id → workflow_run_id, only results whose publish was acknowledged. */
  results: Map<string, string>;
  /** Runs that did not reach their end within the wait (reported by the checks). */
  unfinished: string[];
  publishRetries: number;
}

export interface LoadOptions {
  natsUrl: string | string[];
  prefix: string;
  project: string;
  runs: number;
  concurrency: number;
  /** How long to wait for one run to advance one step, ms. */
  stepTimeoutMs?: number;
  /** Tag for ids (unique per load). */
  tag?: string;
  onProgress?: (done: number) => void;
}

/**
 * Drive `runs` workflow runs of `pair` through the real platform, `concurrency` at a time: publish
 * the start, wait until the router routed it to worker-a, claim the handoff as worker-a (through
 * the ledger, retried while it is away) and publish its result under that claim, wait for the
 * route to worker-b, the same for worker-b, wait for the run to complete. Publishes are retried (with
 * the same Nats-Msg-Id) until acknowledged; waits poll the run's last event (`last_by_subj`).
 * Only acknowledged publishes count as published.
 */
export async function driveLoad(opts: LoadOptions): Promise<LoadReport> {
  const nats = await connectNats({ servers: opts.natsUrl, name: 'fault-load', reconnect: true, timeoutMs: 3000 });
  const tag = opts.tag ?? randomBytes(3).toString('hex');
  const report: LoadReport = { runs: [], results: new Map(), unfinished: [], publishRetries: 0 };
  const stepTimeout = opts.stepTimeoutMs ?? 90_000;
  const events = batonStreamNames(opts.prefix).events;
  let next = 0;
  let done = 0;

  const publish = async (subject: string, body: object, msgID: string) => {
    const deadline = Date.now() + stepTimeout;
    for (;;) {
      try {
        await nats.js.publish(subject, encoder.encode(JSON.stringify(body)), { msgID, timeout: 3000 });
        return;
      } catch (error) {
        report.publishRetries++;
        if (Date.now() > deadline) throw error;
        await sleep(200);
      }
    }
  };
  type LastEvent = { seq: number; type: string; handoffId?: string };
  const lastEvent = async (runId: string): Promise<LastEvent | null> => {
    try {
      const msg = await nats.jsm.streams.getMessage(events, { last_by_subj: `${opts.prefix}.ev.${opts.project}.run.${runId}` });
      const type = msg.header.get(EventHeader.type);
      if (type !== 'run.routed') return { seq: msg.seq, type };
      const routed = JSON.parse(new TextDecoder().decode(msg.data)) as { payload: { handoff_id: string } };
      return { seq: msg.seq, type, handoffId: routed.payload.handoff_id };
    } catch {
      return null;
    }
  };
  // A result is accepted only under its agent's claim on the run's current handoff (docs/runs.md).
  const agents = new AgentClaims(nats, opts.prefix, opts.project, 300_000);
  const claimed = async (routed: LastEvent, body: ReturnType<typeof result>) => {
    const handoffId = routed.handoffId as string;
    return { ...body, handoff_id: handoffId, claim_id: await agents.claim(body.agent, handoffId, stepTimeout) };
  };
  const waitUntil = async (runId: string, ok: (last: LastEvent) => boolean): Promise<LastEvent | null> => {
    const deadline = Date.now() + stepTimeout;
    while (Date.now() < deadline) {
      const last = await lastEvent(runId);
      if (last && ok(last)) return last;
      await sleep(60);
    }
    return null;
  };
  const result = (runId: string, agent: string, n: number) => ({
    result_id: `res-${runId}-${n}`,
    run_id: `ar-${runId}-${n}`,
    project: opts.project,
    workflow_run_id: runId,
    agent,
    body: `step ${n} done`,
    decision: { dispatch: { status: 'advance' } },
    produced_at: new Date().toISOString(),
  });

  const one = async (runId: string) => {
    report.runs.push(runId);
    await publish(
      `${opts.prefix}.in.${opts.project}.start`,
      { workflow_run_id: runId, project: opts.project, workflow: 'pair', started_by: 'fault-suite' },
      MsgIds.start(opts.project, runId),
    );
    const first = await waitUntil(runId, (last) => last.type === 'run.routed');
    if (!first) return report.unfinished.push(runId);
    const a = await claimed(first, result(runId, 'worker-a', 1));
    await publish(`${opts.prefix}.in.${opts.project}.result.worker-a`, a, MsgIds.result(opts.project, a.workflow_run_id, a.result_id));
    report.results.set(a.result_id, runId);
    const second = await waitUntil(runId, (last) => last.type === 'run.routed' && last.seq > first.seq);
    if (!second) return report.unfinished.push(runId);
    const b = await claimed(second, result(runId, 'worker-b', 2));
    await publish(`${opts.prefix}.in.${opts.project}.result.worker-b`, b, MsgIds.result(opts.project, b.workflow_run_id, b.result_id));
    report.results.set(b.result_id, runId);
    const end = await waitUntil(runId, (last) => last.seq > second.seq && (last.type === 'run.completed' || last.type === 'run.notice_emitted'));
    if (!end) return report.unfinished.push(runId);
    return undefined;
  };

  const worker = async () => {
    while (next < opts.runs) {
      const index = next++;
      await one(`run-${tag}-${index}`);
      done++;
      opts.onProgress?.(done);
      if (process.env['FAULT_DEBUG'] && done % 10 === 0)
        process.stderr.write(
          `[load ${new Date().toISOString()}] ${done}/${opts.runs} runs, ${report.unfinished.length} unfinished, ${report.publishRetries} publish retries\n`,
        );
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.concurrency }, () => worker()));
  } finally {
    await agents.close();
    await nats.close();
  }
  return report;
}

/** What folding the streams found. Every list is empty when the platform kept its promises. */
export interface Anomalies {
  /** result ids with no routing outcome, or with more than one. */
  resultOutcomes: string[];
  /** Runs that did not complete. */
  incompleteRuns: string[];
  /** Handoff transitions duplicated or missing. */
  handoffs: string[];
  /** Events whose id appears twice in a stream. */
  duplicateEventIds: string[];
  counts: { runs: number; results: number; handoffs: number; runEvents: number; handoffEvents: number };
}

/**
 * The checks, by folding the streams (read with JetStreamEventStore), not by asking the services:
 * - every acknowledged result has exactly one routing outcome on its run: one `run.result_recorded`
 *   or one `run.result_rejected` with its result_id;
 * - every run completed;
 * - every handoff the router dispatched (`run.routed.handoff_id`) has exactly one `handoff.created`
 *   and exactly one completion (`handoff.completed_by_result`), and no event id appears twice.
 */
export async function foldAndCheck(natsUrl: string | string[], prefix: string, project: string, load: LoadReport): Promise<Anomalies> {
  const nats = await connectWhenJetStreamReady(natsUrl, 'fault-check');
  const store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  const anomalies: Anomalies = {
    resultOutcomes: [],
    incompleteRuns: [],
    handoffs: [],
    duplicateEventIds: [],
    counts: { runs: 0, results: 0, handoffs: 0, runEvents: 0, handoffEvents: 0 },
  };
  const readAll = async (kind: AggregateKind, id: string): Promise<StoredEvent[]> => {
    for (let attempt = 0; ; attempt++) {
      try {
        return (await store.read({ project, kind, id })).events;
      } catch (error) {
        if (attempt >= 5) throw error;
        await sleep(500);
      }
    }
  };
  try {
    const byRun = new Map<string, string[]>();
    for (const [resultId, runId] of load.results) byRun.set(runId, [...(byRun.get(runId) ?? []), resultId]);
    const handoffIds: string[] = [];
    for (const runId of load.runs) {
      const events = await readAll('run', runId);
      anomalies.counts.runs++;
      anomalies.counts.runEvents += events.length;
      const ids = new Set<string>();
      for (const event of events) {
        if (ids.has(event.id)) anomalies.duplicateEventIds.push(`${runId}:${event.id}`);
        ids.add(event.id);
      }
      for (const resultId of byRun.get(runId) ?? []) {
        anomalies.counts.results++;
        const outcomes = events.filter(
          (e) => (e.type === 'run.result_recorded' || e.type === 'run.result_rejected') && (e.payload as { result_id?: string }).result_id === resultId,
        );
        if (outcomes.length !== 1) anomalies.resultOutcomes.push(`${resultId}: ${outcomes.length} outcomes (${outcomes.map((e) => e.type).join(', ')})`);
      }
      if (!events.some((e) => e.type === 'run.completed')) anomalies.incompleteRuns.push(`${runId}: ${events.map((e) => e.type).join(' → ')}`);
      for (const event of events) {
        if (event.type === 'run.routed') {
          const id = (event.payload as { handoff_id?: string }).handoff_id;
          if (id) handoffIds.push(id);
        }
      }
    }
    for (const handoffId of handoffIds) {
      const events = await readAll('handoff', handoffId);
      anomalies.counts.handoffs++;
      anomalies.counts.handoffEvents += events.length;
      const types = events.map((e) => e.type);
      const count = (type: string) => types.filter((t) => t === type).length;
      if (count('handoff.created') !== 1 || count('handoff.completed_by_result') !== 1) {
        anomalies.handoffs.push(`${handoffId}: ${types.join(' → ') || '(no events)'}`);
      }
      const keys = new Set<string>();
      for (const event of events) {
        const key = `${event.type}/${(event.payload as { idempotency_key?: string }).idempotency_key ?? event.id}`;
        if (event.type !== 'handoff.heartbeat' && keys.has(key)) anomalies.handoffs.push(`${handoffId}: ${event.type} twice for one command`);
        keys.add(key);
        if (keys.has(`id:${event.id}`)) anomalies.duplicateEventIds.push(`${handoffId}:${event.id}`);
        keys.add(`id:${event.id}`);
      }
    }
  } finally {
    await nats.close();
  }
  return anomalies;
}

/** Delete a prefix's streams (best effort) on a server. */
export async function deleteStreams(natsUrl: string | string[], prefix: string): Promise<void> {
  const nats = await connectNats({ servers: natsUrl, reconnect: false }).catch(() => null);
  if (!nats) return;
  for (const stream of deploymentStreamNames(prefix)) await nats.jsm.streams.delete(stream).catch(() => undefined);
  await nats.close();
}

/** A line for the suite's log: what a fault test did and found (collected into docs/reliability.md by hand). */
export function summary(test: string, load: LoadReport, anomalies: Anomalies, extra: Record<string, unknown> = {}): string {
  const { handoffs, runEvents, handoffEvents } = anomalies.counts;
  return `[fault] ${test}: ${JSON.stringify({ runs: load.runs.length, results: load.results.size, unfinished: load.unfinished.length, publishRetries: load.publishRetries, handoffs, runEvents, handoffEvents, anomalies: anomalies.resultOutcomes.length + anomalies.incompleteRuns.length + anomalies.handoffs.length + anomalies.duplicateEventIds.length, ...extra })}`;
}

const anomalyCount = (a: Anomalies) => a.resultOutcomes.length + a.incompleteRuns.length + a.handoffs.length + a.duplicateEventIds.length;

/**
 * Fold and check until there is no anomaly or `settleMs` passed (a message a killed process held
 * unacknowledged is redelivered only after the consumer's ack wait, BATON_ACK_WAIT_MS: 10 s by default). Returns the last
 * check and how long it took to converge.
 */
export async function settleAndCheck(
  natsUrl: string | string[],
  prefix: string,
  project: string,
  load: LoadReport,
  settleMs = 45_000,
): Promise<{ anomalies: Anomalies; settledMs: number; firstCheck: Anomalies }> {
  const started = Date.now();
  const firstCheck = await foldAndCheck(natsUrl, prefix, project, load);
  let anomalies = firstCheck;
  while (anomalyCount(anomalies) > 0 && Date.now() - started < settleMs) {
    await sleep(2000);
    anomalies = await foldAndCheck(natsUrl, prefix, project, load);
  }
  return { anomalies, settledMs: Date.now() - started, firstCheck };
}
