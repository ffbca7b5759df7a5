import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectNats } from '@baton/eventstore';

/*
 * A private nats-server cluster for the CLI's tests of a node lost under a command and of a
 * cluster without a JetStream leader: three nodes with JetStream on free loopback ports (as the
 * fault suite's, test/faults/harness.ts, without its services), each with its monitoring port so a
 * test can see which node holds a connection. None of them is the shared server.
 */

/** One node of a {@link PrivateCluster}. */
export interface ClusterNode {
  name: string;
  port: number;
  url: string;
  /** Its monitoring port (`/connz`, `/jsz`). */
  httpPort: number;
  /** Whether its process runs. */
  running(): boolean;
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>;
}

export interface PrivateCluster {
  nodes: ClusterNode[];
  /** Every node's URL, comma-separated: a NATS_URL. */
  natsUrl: string;
  /** The node whose `/connz` lists a client connection named `name`, or null. */
  nodeHolding(name: string): Promise<ClusterNode | null>;
  /** Kill every node and delete their storage. */
  remove(): Promise<void>;
}

/** A loopback port nothing listens on now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function listening(port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nats-server did not listen on ${port} within ${timeoutMs} ms`);
}

/**
 * Start nodes of a three-node cluster: all three (`started` 3, the default), or fewer — one node
 * of three is NATS that answers with no JetStream meta leader (no quorum), what a cluster that lost
 * two nodes is. `jetStreamReady` (default: all three started) waits until JetStream answers.
 */
export async function startPrivateCluster(options: { started?: number; jetStreamReady?: boolean } = {}): Promise<PrivateCluster> {
  const started = options.started ?? 3;
  const ports = [await freePort(), await freePort(), await freePort()];
  const routes = [await freePort(), await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'baton-cli-cluster-'));
  const children: ChildProcess[] = [];
  const nodes: ClusterNode[] = [];
  const remove = async () => {
    for (const child of children) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < started; i++) {
      const name = `n${i + 1}`;
      const httpPort = await freePort();
      const args = ['-a', '127.0.0.1', '-p', String(ports[i]), '-m', String(httpPort), '-js', '-sd', join(dir, name), '-server_name', name];
      args.push('-cluster', `nats://127.0.0.1:${routes[i]}`, '-cluster_name', 'baton-cli-test');
      args.push(
        '-routes',
        routes
          .filter((_, j) => j !== i)
          .map((p) => `nats://127.0.0.1:${p}`)
          .join(','),
      );
      const child = spawn('nats-server', args, { stdio: 'ignore' });
      children.push(child);
      nodes.push({
        name,
        port: ports[i]!,
        url: `nats://127.0.0.1:${ports[i]}`,
        httpPort,
        running: () => child.exitCode === null && child.signalCode === null,
        async kill() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = once(child, 'exit');
          child.kill('SIGKILL');
          await exited;
        },
      });
    }
    for (const node of nodes) await listening(node.port);
    if (options.jetStreamReady ?? started === 3) {
      // A cluster's JetStream answers once it has elected a meta leader.
      const deadline = Date.now() + 30_000;
      for (;;) {
        const handle = await connectNats({ servers: nodes.map((n) => n.url), reconnect: false, timeoutMs: 2000 }).catch(() => null);
        if (handle) {
          await handle.close();
          break;
        }
        if (Date.now() > deadline) throw new Error('the private cluster elected no JetStream meta leader within 30 s');
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  } catch (error) {
    await remove();
    throw error;
  }
  return {
    nodes,
    natsUrl: nodes.map((n) => n.url).join(','),
    async nodeHolding(name) {
      for (const node of nodes.filter((n) => n.running())) {
        const connz = (await (await fetch(`http://127.0.0.1:${node.httpPort}/connz`)).json()) as { connections?: Array<{ name?: string }> };
        if ((connz.connections ?? []).some((c) => c.name === name)) return node;
      }
      return null;
    },
    remove,
  };
}
