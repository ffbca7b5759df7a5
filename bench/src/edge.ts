import { randomBytes } from 'node:crypto';
import type Redis from 'ioredis';
import { inboxPrefixOf, Principals } from '@baton/contracts';
import { connectNats, credsPath, issueCreds, type NatsHandle } from '@baton/eventstore';
import {
  AgentClaims,
  CYCLE_AGENTS,
  cleanupDeployment,
  endedServices,
  publishAgentResult,
  publishCycleDefinition,
  serviceCredsEnv,
  startAuthNatsServer,
  startPlatform,
  stopService,
  type AuthNatsServer,
  type ServiceProcess,
} from '@baton/testing';
import { measureHops, type HopAgents, type HopsResult } from './hops';
import { accountedTargets, benchNodeArgs, brokerProcesses, readCpu } from './platform';

/*
 * Hops on an authenticated server, as a deployment runs them: each service with its own
 * credentials, each agent with its own, its results crossing the agent edge (the ledger relays
 * `<prefix>.edge.<project>.result.<agent>` into the inbox; JetStream acks on the agent's inbox)
 * and its claims asked of the ledger from its own connection. The default hop phase runs on the
 * machine's server without authentication, where agents publish into the inbox directly: the two
 * set side by side give what the edge and the credentials cost a hop.
 */

export interface EdgeHopsOptions {
  redis: Redis;
  redisUrl: string;
  runs: number;
  warmupSeconds: number;
  throughputSeconds: number;
  latencySeconds: number;
  log: (line: string) => void;
}

export interface EdgeHopsResult {
  /** The nats-server of the phase (its own, on a free loopback port, with the deployment's operator). */
  server: { port: number; pid: number | null };
  hops: HopsResult;
}

/** The cycle's agents, each on a connection of its own with credentials `baton creds agent` would issue. */
async function edgeAgents(server: AuthNatsServer, prefix: string, project: string): Promise<HopAgents> {
  const handles = new Map<string, NatsHandle>();
  try {
    for (const agent of CYCLE_AGENTS) {
      const principal = Principals.agent(project, agent);
      const issued = issueCreds(server.deployment, principal);
      handles.set(
        agent,
        await connectNats({
          servers: server.url,
          name: `baton-bench-${agent}`,
          credsFile: issued.file,
          inboxPrefix: inboxPrefixOf(prefix, principal),
          reconnect: false,
          checkJetStream: false,
        }),
      );
    }
  } catch (error) {
    await Promise.all([...handles.values()].map((h) => h.close().catch(() => undefined)));
    throw error;
  }
  const handleOf = (agent: string): NatsHandle => {
    const handle = handles.get(agent);
    if (handle === undefined) throw new Error(`no connection for agent ${agent}`);
    return handle;
  };
  const claims = new AgentClaims(handleOf, prefix, project);
  return {
    publishResult: (result) => publishAgentResult(handleOf(String(result['agent'])), prefix, result, { edge: true }),
    claim: (agent, handoffId) => claims.claim(agent, handoffId),
    async close() {
      await claims.close();
      await Promise.all([...handles.values()].map((h) => h.close().catch(() => undefined)));
    },
  };
}

/**
 * Start a nats-server with a fresh deployment's operator, the four services with their
 * credentials, and measure hops as {@link measureHops} does, with agents on the edge. The bench
 * itself watches (offers, stream state, quiet) as the deployment's admin. Everything it started is
 * stopped and removed before it returns.
 */
export async function measureEdgeHops(opts: EdgeHopsOptions): Promise<EdgeHopsResult> {
  const prefix = `benchedge${randomBytes(3).toString('hex')}`;
  const project = 'bench';
  const server = await startAuthNatsServer(prefix);
  let services: ServiceProcess[] = [];
  let admin: NatsHandle | null = null;
  try {
    const principal = Principals.operator('admin');
    admin = await connectNats({
      servers: server.url,
      name: 'baton-bench-admin',
      credsFile: credsPath(server.deployment, principal),
      inboxPrefix: inboxPrefixOf(prefix, principal),
      reconnect: false,
    });
    const env = {
      NATS_URL: server.url,
      REDIS_URL: opts.redisUrl,
      BATON_PREFIX: prefix,
      LOG_LEVEL: 'warn',
      WATCHDOG_MAX_HOPS: '100000',
    };
    services = await startPlatform(env, { nodeArgs: benchNodeArgs, envFor: serviceCredsEnv(server) });
    await publishCycleDefinition(admin, prefix, project);
    const targets = { nats: server.url, redis: opts.redisUrl };
    const agents = await edgeAgents(server, prefix, project);
    const hops = await measureHops({
      nats: admin,
      redis: opts.redis,
      prefix,
      project,
      runs: opts.runs,
      warmupSeconds: opts.warmupSeconds,
      throughputSeconds: opts.throughputSeconds,
      latencySeconds: opts.latencySeconds,
      cpu: () => readCpu(accountedTargets(services, targets)),
      agents,
      log: opts.log,
    });
    return { server: { port: server.port, pid: brokerProcesses(targets)['nats-server']?.pid ?? null }, hops };
  } catch (error) {
    for (const ended of endedServices(services)) opts.log(ended);
    throw error;
  } finally {
    await Promise.all(services.map((service) => stopService(service)));
    if (admin !== null) {
      await cleanupDeployment(admin, opts.redis, prefix).catch((error: unknown) =>
        opts.log(`could not remove the edge phase's Redis keys (prefix ${prefix}): ${error instanceof Error ? error.message : String(error)}`),
      );
      await admin.close().catch(() => undefined);
    }
    await server.stop();
  }
}
