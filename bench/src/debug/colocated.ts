// Diagnosis tool (not part of `npm run bench`): what a hop costs when services share a process.
// SETS lists the processes, `;` between processes and `,` between the services one hosts:
//   SETS="ledger;router;watchdog;notifier" SECS=20 RUNS=32 node dist/bench/src/debug/colocated.js
//   SETS="ledger,router,watchdog,notifier" SECS=20 RUNS=32 node dist/bench/src/debug/colocated.js
// Each process runs the built services (dist/apps) through their own start functions, on its own
// HTTP port, with the same Node flags (HEAP, default a 4 MB young generation and a 256 MB old one,
// so no set of services is held back by a heap sized for one). Prints one JSON line: hops/s and CPU
// per hop per process. Alternate the sets, in both orders: the machine drifts.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { connectNats } from '@baton/eventstore';
import { createRedis } from '@baton/projections';
import { cleanupDeployment, freePort, publishCycleDefinition, repoRoot, SERVICES, type ServiceName } from '@baton/testing';
import { measureHops } from '../hops';
import { type ProcessLookup } from '../listener';
import { brokerProcesses, readCpu } from '../platform';

const HOST_FLAG = 'BATON_COLOCATED_SERVICES';

/** The start function of each built service, loaded from dist at run time (the bench builds no app). */
function starter(name: ServiceName): (env: Record<string, string | undefined>) => Promise<unknown> {
  const start = async (file: string, fn: string, arg: unknown) => {
    const app = (await import(join(repoRoot(), 'dist', 'apps', name, 'src', file))) as Record<string, (arg: unknown) => Promise<unknown>>;
    return app[fn]!(arg);
  };
  switch (name) {
    case 'ledger':
      return (env) => start('ledger.js', 'startLedger', env);
    case 'router':
      return (env) => start('router.app.js', 'startRouter', env);
    case 'watchdog':
      return (env) => start('bootstrap.js', 'startWatchdog', { env });
    case 'notifier':
      return (env) => start('main.js', 'startNotifier', env);
  }
}

/** Child mode: start the services named in BATON_COLOCATED_SERVICES here, one port each, then say READY. */
async function host(): Promise<void> {
  const names = (process.env[HOST_FLAG] ?? '').split(',') as ServiceName[];
  const ports = (process.env['BATON_COLOCATED_PORTS'] ?? '').split(',');
  for (const [i, name] of names.entries()) {
    await starter(name)({ ...process.env, HTTP_PORT: ports[i], HTTP_HOST: '127.0.0.1', BATON_INSTANCE: `${name}-1` });
  }
  process.stdout.write('READY\n');
}

async function startHost(services: ServiceName[], env: Record<string, string>, flags: string[]): Promise<ChildProcess> {
  const ports: number[] = [];
  for (let i = 0; i < services.length; i++) ports.push(await freePort());
  const child = spawn(process.execPath, [...flags, __filename], {
    env: { ...process.env, ...env, [HOST_FLAG]: services.join(','), BATON_COLOCATED_PORTS: ports.join(',') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('READY')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the process of ${services.join(',')} exited (${code}) before it was ready`)));
  });
  return child;
}

async function drive(): Promise<void> {
  const sets = (process.env['SETS'] ?? SERVICES.join(';')).split(';').map((set) => set.split(',') as ServiceName[]);
  const named = new Set(sets.flat());
  if (named.size !== SERVICES.length || sets.flat().length !== SERVICES.length || SERVICES.some((s) => !named.has(s))) {
    throw new Error(`SETS must name each of ${SERVICES.join(', ')} once`);
  }
  const flags = (process.env['HEAP'] ?? '--max-semi-space-size=4 --max-old-space-size=256').split(' ').filter((f) => f.length > 0);
  const nats = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  const prefix = `col${Date.now().toString(36)}`;
  const env = { BATON_PREFIX: prefix, LOG_LEVEL: 'warn', WATCHDOG_MAX_HOPS: '100000', BATON_NATS_AUTH: 'none' };
  const hosts: Array<{ name: string; child: ChildProcess }> = [];
  try {
    for (const set of sets) hosts.push({ name: set.join(','), child: await startHost(set, env, flags) });
    await publishCycleDefinition(nats, prefix, 'bench');
    const targets: Record<string, ProcessLookup> = {
      ...Object.fromEntries(
        hosts.map((h): [string, ProcessLookup] => [h.name, h.child.pid === undefined ? { pid: null, reason: 'no pid' } : { pid: h.child.pid, via: 'proc' }]),
      ),
      ...brokerProcesses(),
      bench: { pid: process.pid, via: 'proc' },
    };
    const result = await measureHops({
      nats,
      redis: redis.client,
      prefix,
      project: 'bench',
      runs: Number(process.env['RUNS'] ?? 32),
      warmupSeconds: 2,
      throughputSeconds: Number(process.env['SECS'] ?? 20),
      latencySeconds: 3,
      log: () => undefined,
      cpu: () => readCpu(targets),
    });
    console.log(
      JSON.stringify({
        sets: sets.map((s) => s.join(',')),
        hops_per_s: result.hops_per_s,
        cpu_ms_per_hop: result.cpu_ms_per_hop,
        total: result.cpu_ms_per_hop_total,
      }),
    );
  } finally {
    for (const h of hosts) {
      if (h.child.exitCode !== null) continue;
      const exited = new Promise((resolve) => h.child.once('exit', resolve));
      h.child.kill('SIGTERM');
      await exited;
    }
    await cleanupDeployment(nats, redis.client, prefix);
    await redis.close();
    await nats.close();
  }
}

(process.env[HOST_FLAG] ? host() : drive()).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
