import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
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

describe('service processes', () => {
  let root: string;
  const started: ServiceProcess[] = [];

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'baton-testing-'));
    for (const [name, source] of [
      ['fake', FAKE_SERVICE],
      ['broken', BROKEN_SERVICE],
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

  it("picks a free loopback port below the kernel's ephemeral range, so no client socket can take it first", async () => {
    const port = await freePort();
    expect(port).toBeGreaterThan(0);
    if (existsSync('/proc/sys/net/ipv4/ip_local_port_range')) {
      const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
      const picks = [port, ...(await Promise.all(Array.from({ length: 20 }, () => freePort())))];
      for (const pick of picks) expect(pick).toBeLessThan(low);
      expect(new Set(picks).size).toBeGreaterThan(1);
    }
    const server = createServer();
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
    await new Promise((resolve) => server.close(resolve));
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
    await expect(waitReady(service, 10_000)).rejects.toThrow(/broken-1 did not become ready:\s+config: NATS_URL is not a URL/);
    expect(service.child.exitCode).toBe(78);
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
