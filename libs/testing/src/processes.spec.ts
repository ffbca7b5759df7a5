import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, repoRoot, run, startService, stopService, waitReady, type ServiceProcess } from './processes';

// A stand-in for a built service: answers /health/ready, reports how it was started, exits 0 on SIGTERM.
const FAKE_SERVICE = `
const http = require('node:http');
const server = http.createServer((req, res) => { res.statusCode = req.url === '/health/ready' ? 200 : 404; res.end(); });
server.listen(Number(process.env.HTTP_PORT), process.env.HTTP_HOST, () => {
  console.log(JSON.stringify({ instance: process.env.BATON_INSTANCE, host: process.env.HTTP_HOST, extra: process.env.EXTRA, execArgv: process.execArgv, cwd: process.cwd() }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`;
const BROKEN_SERVICE = `console.error('config: NATS_URL is not a URL'); process.exit(78);`;
// Listens but is never ready: readiness answers 503 with the failing check, as a Baton service does.
const STUCK_SERVICE = `
const http = require('node:http');
const server = http.createServer((req, res) => { res.statusCode = 503; res.end(JSON.stringify({ status: 'not_ready', checks: { nats: true, jetstream: false } })); });
server.listen(Number(process.env.HTTP_PORT), process.env.HTTP_HOST, () => console.log('stuck started'));
`;
// Never listens.
const SILENT_SERVICE = `console.log('silent started'); setInterval(() => undefined, 1000);`;

describe('service processes', () => {
  let root: string;
  const started: ServiceProcess[] = [];

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'baton-testing-'));
    for (const [name, source] of [
      ['fake', FAKE_SERVICE],
      ['broken', BROKEN_SERVICE],
      ['stuck', STUCK_SERVICE],
      ['silent', SILENT_SERVICE],
    ] as const) {
      await mkdir(join(root, 'dist', 'apps', name, 'src'), { recursive: true });
      await writeFile(join(root, 'dist', 'apps', name, 'src', 'main.js'), source);
    }
  });

  afterAll(async () => {
    await Promise.all(started.map((service) => stopService(service, 'SIGKILL')));
    await rm(root, { recursive: true, force: true });
  });

  it('finds the repository root from source and from the build output', () => {
    const found = repoRoot();
    expect(existsSync(join(found, 'package.json'))).toBe(true);
    expect(existsSync(join(found, 'nx.json'))).toBe(true);
    expect(repoRoot(join(found, 'dist', 'libs', 'testing', 'src'))).toBe(found);
  });

  it('starts a built service with its env, instance and node flags, waits until it is ready, and stops it gracefully', async () => {
    const port = await freePort();
    const service = startService('fake', port, { EXTRA: 'yes' }, { root, instance: 'fake-7', nodeArgs: ['--max-old-space-size=64'] });
    started.push(service);
    expect(service).toMatchObject({ name: 'fake', instance: 'fake-7', port });
    await waitReady(service, 10_000);
    const ready = await fetch(`http://127.0.0.1:${port}/health/ready`);
    expect(ready.status).toBe(200);
    const line = JSON.parse(service.output.join('').trim().split('\n')[0]!) as Record<string, unknown>;
    expect(line).toEqual({ instance: 'fake-7', host: '127.0.0.1', extra: 'yes', execArgv: ['--max-old-space-size=64'], cwd: root });
    expect(await stopService(service)).toBe(0);
    // Stopping again answers at once.
    expect(await stopService(service)).toBe(0);
  });

  it('the instance defaults to <name>-1', async () => {
    const service = startService('fake', await freePort(), {}, { root });
    started.push(service);
    expect(service.instance).toBe('fake-1');
    await waitReady(service, 10_000);
    expect(await stopService(service, 'SIGKILL')).toBeNull();
    expect(service.child.signalCode).toBe('SIGKILL');
    expect(await stopService(service)).toBeNull();
  });

  it('fails fast with the output of a service that exits instead of becoming ready', async () => {
    const service = startService('broken', await freePort(), {}, { root });
    started.push(service);
    await expect(waitReady(service, 10_000)).rejects.toThrow(
      /broken-1 did not become ready: it ended \(exit code 78\); its last output:\s+config: NATS_URL is not a URL/,
    );
    expect(service.child.exitCode).toBe(78);
  });

  it('a service that is not ready in time: the error carries its last readiness answer (the failing check) and its output', async () => {
    const service = startService('stuck', await freePort(), {}, { root });
    started.push(service);
    await expect(waitReady(service, 1_500)).rejects.toThrow(
      /^stuck-1 did not become ready: \d+ s passed; the last readiness answer: 503 \{"status":"not_ready","checks":\{"nats":true,"jetstream":false\}\}; its last output:\s+stuck started/,
    );
  });

  it("the deadline is the service's: a wait whose own process stalled past it still sees a service that became ready meanwhile", async () => {
    const service = startService('fake', await freePort(), {}, { root });
    started.push(service);
    const waiting = waitReady(service, 1_000);
    // This process blocked longer than the whole timeout (a loaded machine, a GC pause): no poll ran.
    const until = Date.now() + 2_500;
    while (Date.now() < until) {
      // busy
    }
    await expect(waiting).resolves.toBeUndefined();
  });

  it('a stall of the waiting process is said in the error of a service that is not ready', async () => {
    const service = startService('stuck', await freePort(), {}, { root });
    started.push(service);
    const waiting = waitReady(service, 1_000);
    const caught = waiting.catch((error: unknown) => error as Error);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const until = Date.now() + 2_500;
    while (Date.now() < until) {
      // busy
    }
    const error = await caught;
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(
      /^stuck-1 did not become ready: \d+ s passed; the last readiness answer: 503 .*; this test process's event loop stalled for up to [23] s meanwhile; its last output:/s,
    );
  });

  it('a service whose port never answers: the error says so', async () => {
    const service = startService('silent', await freePort(), {}, { root });
    started.push(service);
    await expect(waitReady(service, 1_000)).rejects.toThrow(
      /^silent-1 did not become ready: \d+ s passed; its port never answered; its last output:\s+silent started/,
    );
  });

  it('refuses to start a service that is not built', () => {
    expect(() => startService('missing', 1, {}, { root })).toThrow(/dist\/apps\/missing\/src\/main\.js is missing/);
  });

  it('runs a command to completion and collects its output', async () => {
    const result = await run(process.execPath, ['-e', 'console.log(process.env.WHO); console.error(process.cwd()); process.exit(3)'], { WHO: 'olga' }, root);
    expect(result).toEqual({ code: 3, stdout: 'olga\n', stderr: `${root}\n` });
    const inRoot = await run(process.execPath, ['-e', 'console.log(process.cwd())'], {});
    expect(inRoot.stdout.trim()).toBe(repoRoot());
  });
});
