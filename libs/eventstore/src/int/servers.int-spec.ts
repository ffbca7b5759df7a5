import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats } from '../connection';
import { freePort, pauseProcess, startNatsCluster, startNatsServer, startRedisServer } from './servers';

/*
 * The private servers the integration specs of every project start (never the shared 4222 /
 * 6379): a free port, a nats-server stopped and started again on it, reloaded, refusing a bad
 * configuration, a redis-server, each removed with what it stored.
 */

/** Whether something accepts a TCP connection on 127.0.0.1:`port` now. */
const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

describe('private servers for integration specs', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-servers-spec-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("freePort: a loopback port below the kernel's ephemeral range (no client socket can take it first), free to bind", async () => {
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

  it('a nats-server with JetStream: stopped (SIGTERM) and started again on its port, killed, and removed with its store', async () => {
    const server = await startNatsServer({ jetstream: true });
    try {
      expect(server.url).toBe(`nats://127.0.0.1:${server.port}`);
      const handle = await connectNats({ servers: server.url, reconnect: false });
      await handle.close();
      const store = server.output.join('').match(/Starting JetStream[\s\S]*?Store Directory:\s+"([^"]+)"/)?.[1];
      expect(store && existsSync(store)).toBe(true);

      await server.stop();
      expect(server.running()).toBe(false);
      expect(await accepts(server.port)).toBe(false);
      await server.stop(); // not running: nothing to do
      await server.start();
      expect(server.running()).toBe(true);
      await expect(server.start()).rejects.toThrow('runs already');
      const again = await connectNats({ servers: server.url, reconnect: false });
      await again.close();

      await server.kill();
      expect(server.child.signalCode).toBe('SIGKILL');
      await server.remove();
      expect(existsSync(store!)).toBe(false);
    } finally {
      await server.remove();
    }
  });

  it('a nats-server with a configuration file reloads it when told; a configuration it refuses to reload rejects with its words; one it cannot start with fails the start at once', async () => {
    const config = join(dir, 'reload.conf');
    writeFileSync(config, 'max_payload: 100000\n');
    const server = await startNatsServer({ config });
    try {
      writeFileSync(config, 'max_payload: 200000\n');
      await server.reload();
      expect(server.output.join('')).toContain('Reloaded server configuration');
      // A file that does not parse: the server keeps running on the configuration it has.
      writeFileSync(config, 'this is { not a configuration\n');
      await expect(server.reload()).rejects.toThrow(/refused the reload: Failed to reload server configuration/);
    } finally {
      await server.remove();
    }

    const broken = join(dir, 'broken.conf');
    writeFileSync(broken, 'this is { not a configuration\n');
    await expect(startNatsServer({ config: broken })).rejects.toThrow(/nats-server ended \(1\) before it listened/);
  });

  it('a nats-server started with `monitor` serves its monitoring endpoints on monitorPort; one without has none (null)', async () => {
    const server = await startNatsServer({ monitor: true });
    try {
      expect(server.monitorPort).toEqual(expect.any(Number));
      const varz = (await (await fetch(`http://127.0.0.1:${server.monitorPort}/varz`)).json()) as { port: number };
      expect(varz.port).toBe(server.port);
    } finally {
      await server.remove();
    }
    const plain = await startNatsServer();
    try {
      expect(plain.monitorPort).toBeNull();
    } finally {
      await plain.remove();
    }
  });

  it('a cluster of three with only its first node started: that node (n1) answers NATS, JetStream has no meta leader, and the start did not wait for one', async () => {
    const cluster = await startNatsCluster({ started: 1, monitor: true });
    try {
      expect(cluster.nodes).toHaveLength(1);
      const [node] = cluster.nodes;
      expect(cluster.natsUrl).toBe(node!.url);
      const varz = (await (await fetch(`http://127.0.0.1:${node!.monitorPort}/varz`)).json()) as { server_name: string; cluster: { urls?: string[] } };
      expect(varz.server_name).toBe('n1');
      expect(varz.cluster.urls).toHaveLength(2);
      const plain = await connectNats({ servers: cluster.natsUrl, checkJetStream: false, reconnect: false });
      await plain.close();
      await expect(connectNats({ servers: cluster.natsUrl, reconnect: false, timeoutMs: 2_000 })).rejects.toThrow();
    } finally {
      await cluster.remove();
    }
    expect(cluster.nodes[0]!.running()).toBe(false);
  }, 30_000);

  it('pause: resolved only once every thread of the server has stopped, so nothing it was sent after is answered until resume; a process not running cannot be paused', async () => {
    const server = await startNatsServer({ jetstream: true });
    const handle = await connectNats({ servers: server.url, reconnect: false });
    try {
      const pid = server.child.pid as number;
      const threadStates = () =>
        readdirSync(`/proc/${pid}/task`).map((tid) => {
          const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
          return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
        });
      for (let round = 0; round < 5; round++) {
        await server.pause();
        // Read at once: every thread (a Go server runs many) says stopped, none is left to answer.
        if (existsSync(`/proc/${pid}/task`)) expect(new Set(threadStates())).toEqual(new Set(['T']));
        await expect(handle.connection.request('$JS.API.INFO', undefined, { timeout: 300 })).rejects.toThrow(/TIMEOUT/i);
        server.resume();
        await expect(handle.connection.request('$JS.API.INFO', undefined, { timeout: 5_000 })).resolves.toBeDefined();
      }
    } finally {
      await handle.close();
      await server.remove();
    }
    await expect(server.pause()).rejects.toThrow('cannot pause a process that is not running');
    await expect(pauseProcess(server.child)).rejects.toThrow('not running');
  });

  it('a redis-server answers PING on its port, and is gone after remove (its dir deleted)', async () => {
    const server = await startRedisServer();
    try {
      expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
      const reply = await new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port: server.port }, () => socket.write('PING\r\n'));
        socket.once('data', (chunk) => (socket.destroy(), resolve(chunk.toString())));
        socket.once('error', reject);
      });
      expect(reply).toBe('+PONG\r\n');
    } finally {
      await server.remove();
    }
    expect(server.running()).toBe(false);
    expect(await accepts(server.port)).toBe(false);
  });
});
