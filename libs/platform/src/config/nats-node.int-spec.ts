import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats, ensureServiceCreds, openDeployment, writeServerConfig } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
// Test only: the free loopback port every project's specs share (not part of @baton/eventstore's API).
// eslint-disable-next-line @nx/enforce-module-boundaries
import { freePort } from '../../../eventstore/src/int/servers';

/*
 * The production NATS node (infra/nats/node.conf.template) as infra/README.md says to deploy it:
 * the README's own commands render three nodes and start them through the guard, on the
 * nats-server on the PATH (2.9.10 on the development machines), with only the listeners moved to
 * free loopback ports and the store to a temporary folder. They must form an authenticated
 * cluster with a JetStream meta leader, with the route secret in no file.
 */

const root = join(__dirname, '..', '..', '..', '..');
const readme = readFileSync(join(root, 'infra', 'README.md'), 'utf8');
const SECRET = randomBytes(32).toString('hex');

/** The one line of infra/README.md that matches `pattern` (a command the README tells to run). */
function readmeLine(pattern: RegExp): string {
  const lines = readme
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => pattern.test(line));
  if (lines.length !== 1) throw new Error(`infra/README.md holds ${lines.length} lines matching ${pattern}, not one`);
  return lines[0]!;
}

const RENDER = readmeLine(/^NODE_NAME=nats-1 sh infra\/nats\/render-node\.sh > \/etc\/nats\/node\.conf$/);
const RENDER_2_9 = readmeLine(/^NODE_NAME=nats-1 NATS_SERVER_VERSION=2\.9\.10 sh infra\/nats\/render-node\.sh > \/etc\/nats\/node\.conf$/);
const COPY_AUTH = readmeLine(/^cp <folder>\/auth\.conf \/etc\/nats\/auth\.conf$/);
const COPY_GUARD = readmeLine(/^cp infra\/nats\/start-node\.sh \/etc\/nats\/start-node\.sh$/);
const START = readmeLine(/^exec sh \/etc\/nats\/start-node\.sh \/etc\/nats\/node\.conf$/);

/** `nats-server --version` as major.minor.patch. */
function installedVersion(): { text: string; below2_10: boolean } {
  const out = spawnSync('nats-server', ['--version'], { encoding: 'utf8' });
  const found = /v?(\d+)\.(\d+)\.(\d+)/.exec(`${out.stdout}${out.stderr}`);
  if (!found) throw new Error(`nats-server --version said ${JSON.stringify(`${out.stdout}${out.stderr}`)}${out.error ? ` (${out.error.message})` : ''}`);
  const [major, minor] = [Number(found[1]), Number(found[2])];
  return { text: `${found[1]}.${found[2]}.${found[3]}`, below2_10: major < 2 || (major === 2 && minor < 10) };
}

/** Run one of the README's commands in the repository, `/etc/nats/` being the node's own folder. */
function shell(command: string, dir: string, env: Record<string, string> = {}) {
  return spawnSync('sh', ['-c', command.replaceAll('/etc/nats/', `${dir}/`)], {
    cwd: root,
    encoding: 'utf8',
    env: { PATH: process.env['PATH'] ?? '', ...env },
  });
}

interface Node {
  name: string;
  dir: string;
  client: number;
  http: number;
  route: number;
  output: string[];
  child?: ChildProcess;
}

async function makeNode(name: string, deploymentDir: string, render: string, base: string): Promise<Node> {
  const node: Node = { name, dir: join(base, name), client: await freePort(), http: await freePort(), route: await freePort(), output: [] };
  mkdirSync(node.dir);
  const rendered = shell(render.replace('NODE_NAME=nats-1', `NODE_NAME=${name}`), node.dir);
  if (rendered.status !== 0) throw new Error(`render-node.sh failed (${rendered.status}): ${rendered.stderr}`);
  for (const copy of [COPY_AUTH.replace('<folder>', deploymentDir), COPY_GUARD]) {
    const done = shell(copy, node.dir);
    if (done.status !== 0) throw new Error(`${copy} failed: ${done.stderr}`);
  }
  // Only the listeners and the store move (free loopback ports, a temporary folder): each line
  // must be there once, as the template writes it.
  const file = join(node.dir, 'node.conf');
  let text = readFileSync(file, 'utf8');
  const moves: [string, string][] = [
    ['\nlisten: 0.0.0.0:4222\n', `\nlisten: 127.0.0.1:${node.client}\n`],
    ['\nhttp: 127.0.0.1:8222\n', `\nhttp: 127.0.0.1:${node.http}\n`],
    ['\n  store_dir: /data/jetstream\n', `\n  store_dir: "${join(node.dir, 'jetstream')}"\n`],
    ['\n  listen: 0.0.0.0:6222\n', `\n  listen: 127.0.0.1:${node.route}\n`],
  ];
  for (const [from, to] of moves) {
    expect(text.split(from)).toHaveLength(2);
    text = text.replace(from, to);
  }
  writeFileSync(file, text);
  return node;
}

function startNode(node: Node, env: Record<string, string>): void {
  const child = spawn('sh', ['-c', START.replaceAll('/etc/nats/', `${node.dir}/`)], {
    cwd: root,
    env: { PATH: process.env['PATH'] ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const keep = (chunk: Buffer) => node.output.push(chunk.toString());
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  node.child = child;
}

async function stopNode(node: Node): Promise<void> {
  const child = node.child;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

async function monitor<T>(node: Node, path: string): Promise<T> {
  const response = await fetch(`http://127.0.0.1:${node.http}${path}`);
  return (await response.json()) as T;
}

interface Jsz {
  meta_cluster?: { leader?: string; cluster_size?: number };
}
interface Routez {
  routes?: { remote_id: string }[] | null;
}
const remotes = async (node: Node) => new Set(((await monitor<Routez>(node, '/routez')).routes ?? []).map((r) => r.remote_id)).size;
const tails = (nodes: Node[]) => nodes.map((n) => `--- ${n.name}:\n${n.output.join('').slice(-1500)}`).join('\n');

describe('infra/nats: three nodes rendered and started as infra/README.md says form an authenticated cluster', () => {
  const version = installedVersion();
  // Rendered for the installed server: the README's 2.9 line (with this version) below 2.10, else its plain one.
  const render = version.below2_10 ? RENDER_2_9.replace('NATS_SERVER_VERSION=2.9.10', `NATS_SERVER_VERSION=${version.text}`) : RENDER;
  const base = mkdtempSync(join(tmpdir(), 'baton-nats-node-'));
  const nodes: Node[] = [];
  let rogue: Node | undefined;
  let admin: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    // The deployment folder `baton nats-config` writes (its auth.conf is copied next to each node).
    const deployment = openDeployment(join(base, 'deployment'), 'nodespec');
    admin = ensureServiceCreds(deployment)['admin']!;
    writeServerConfig(deployment, { storeDir: join(base, 'deployment', 'js') });
    for (const name of ['nats-1', 'nats-2', 'nats-3']) nodes.push(await makeNode(name, deployment.dir, render, base));
    env = { NATS_ROUTE_PASSWORD: SECRET, NATS_ROUTE_HOSTS: nodes.map((n) => `127.0.0.1:${n.route}`).join(' ') };
    for (const node of nodes) startNode(node, env);
  }, 60_000);

  afterAll(async () => {
    for (const node of [...nodes, ...(rogue ? [rogue] : [])]) await stopNode(node);
    rmSync(base, { recursive: true, force: true });
  }, 30_000);

  it(`renders for the installed nats-server (${version.text}): no secret in the file, sync_interval only where the server knows it`, () => {
    for (const node of nodes) {
      const text = readFileSync(join(node.dir, 'node.conf'), 'utf8');
      expect(text).toContain(`server_name: ${node.name}\n`);
      expect(text).toContain('  routes: $NATS_ROUTE_URLS\n');
      expect(text).toContain('    password: $NATS_ROUTE_PASSWORD_VALUE\n');
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain('${');
      if (version.below2_10) {
        expect(text).not.toMatch(/^\s*sync_interval:/m);
        expect(text).toContain(`  # sync_interval: always -- left out: nats-server ${version.text} refuses it`);
      } else {
        expect(text).toContain('\n  sync_interval: always\n');
      }
      // The guard's check of the file passes.
      const checked = shell(`${START} -t`, node.dir, env);
      expect({ status: checked.status, said: `${checked.stdout}${checked.stderr}` }).toEqual({ status: 0, said: expect.stringContaining('is valid') });
    }
    // The production render (no NATS_SERVER_VERSION) keeps sync_interval: 2.9 refuses that file.
    const plain = join(base, 'plain');
    mkdirSync(plain);
    expect(shell(RENDER, plain).status).toBe(0);
    for (const copy of [COPY_AUTH.replace('<folder>', join(base, 'deployment')), COPY_GUARD]) expect(shell(copy, plain).status).toBe(0);
    const checked = shell(`${START} -t`, plain, env);
    if (version.below2_10) {
      expect(checked.status).not.toBe(0);
      expect(`${checked.stdout}${checked.stderr}`).toContain('unknown field "sync_interval"');
    } else {
      expect(checked.status).toBe(0);
    }
  });

  it('the three nodes form a cluster with a JetStream meta leader, reachable with Baton credentials on every node', async () => {
    for (const node of nodes) {
      const meta = await waitFor(
        async () => {
          const jsz = await monitor<Jsz>(node, '/jsz');
          return jsz.meta_cluster?.leader && jsz.meta_cluster.cluster_size === 3 ? jsz.meta_cluster : null;
        },
        `a JetStream meta leader seen by ${node.name}`,
        { timeoutMs: 30_000, everyMs: 200 },
      ).catch((error: Error) => {
        throw new Error(`${error.message}\n${tails(nodes)}`);
      });
      expect(['nats-1', 'nats-2', 'nats-3']).toContain(meta.leader);
      expect(await monitor<{ status: string }>(node, '/healthz')).toEqual({ status: 'ok' });
      expect(await waitFor(async () => (await remotes(node)) === 2, `${node.name} routed to the two others`, { timeoutMs: 10_000 })).toBe(true);
      // A client with the admin's credentials gets JetStream account info through this node.
      const handle = await connectNats({ servers: `nats://127.0.0.1:${node.client}`, credsFile: admin, reconnect: false });
      await handle.close();
    }
    // No route was refused, and the secret is in no log line and no monitoring page.
    for (const node of nodes) {
      expect(node.output.join('')).not.toContain('Authentication Failure');
      expect(node.output.join('')).not.toContain(SECRET);
      expect(JSON.stringify(await monitor<unknown>(node, '/varz'))).not.toContain(SECRET);
      expect(JSON.stringify(await monitor<unknown>(node, '/routez'))).not.toContain(SECRET);
    }
  }, 60_000);

  it('a node with another route secret is refused, and the cluster stays as it was', async () => {
    rogue = await makeNode('nats-4', join(base, 'deployment'), render, base);
    startNode(rogue, { NATS_ROUTE_PASSWORD: randomBytes(32).toString('hex'), NATS_ROUTE_HOSTS: `127.0.0.1:${nodes[0]!.route}` });
    await waitFor(() => nodes[0]!.output.join('').includes('Router connection closed: Authentication Failure'), 'nats-1 refusing the route', {
      timeoutMs: 15_000,
    }).catch((error: Error) => {
      throw new Error(`${error.message}\n${tails([nodes[0]!, rogue!])}`);
    });
    expect(await remotes(rogue)).toBe(0);
    expect(await remotes(nodes[0]!)).toBe(2);
    expect((await monitor<Jsz>(nodes[0]!, '/jsz')).meta_cluster?.cluster_size).toBe(3);
  }, 30_000);

  it('a reload (after a revocation) reads the routes and the secret from the environment again', async () => {
    const node = nodes[1]!;
    node.child!.kill('SIGHUP');
    await waitFor(() => node.output.join('').includes('Reloaded server configuration'), `${node.name} reloading`, { timeoutMs: 10_000 });
    expect(node.output.join('')).not.toMatch(/\[(ERR|FTL)\].*reload/i);
    expect(await remotes(node)).toBe(2);
  });

  it('the guard starts nothing without a usable route secret; nats-server alone refuses the file', () => {
    const node = nodes[0]!;
    const refusals: [Record<string, string>, string][] = [
      [{}, 'NATS_ROUTE_PASSWORD is unset or empty'],
      [{ NATS_ROUTE_PASSWORD: '' }, 'NATS_ROUTE_PASSWORD is unset or empty'],
      [{ NATS_ROUTE_PASSWORD: SECRET.slice(0, 31) }, 'fewer than 32'],
      [{ NATS_ROUTE_PASSWORD: `${SECRET}/+` }, 'may hold only'],
      [{ NATS_ROUTE_PASSWORD: SECRET, NATS_ROUTE_HOSTS: 'nats-1' }, 'has no port'],
      [{ NATS_ROUTE_PASSWORD: SECRET, NATS_ROUTE_HOSTS: ' , ' }, 'names no node'],
    ];
    for (const [given, why] of refusals) {
      const run = shell(`${START} -t`, node.dir, given);
      expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 2, stderr: expect.stringContaining(why) });
      expect(run.stderr).toContain('nats-server not started');
      expect(run.stdout).toBe('');
    }
    const bare = spawnSync('nats-server', ['-c', join(node.dir, 'node.conf'), '-t'], {
      encoding: 'utf8',
      env: { PATH: process.env['PATH'] ?? '', NATS_ROUTE_PASSWORD: SECRET },
    });
    expect(bare.status).not.toBe(0);
    expect(`${bare.stdout}${bare.stderr}`).toMatch(/NATS_ROUTE_URLS.*can not be found/);
  });
});
