// eslint-disable-next-line @nx/enforce-module-boundaries
import { startNatsCluster } from '../../../libs/eventstore/src/int/servers';

/*
 * A private nats-server cluster for the CLI's tests of a node lost under a command and of a
 * cluster without a JetStream leader: three nodes with JetStream on free loopback ports (the
 * specs' shared servers, libs/eventstore/src/int/servers.ts), each with its monitoring port so a
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

/**
 * Start nodes of a three-node cluster: all three (`started` 3, the default), or fewer — one node
 * of three is NATS that answers with no JetStream meta leader (no quorum), what a cluster that lost
 * two nodes is. `jetStreamReady` (default: all three started) waits until JetStream answers.
 */
export async function startPrivateCluster(options: { started?: number; jetStreamReady?: boolean } = {}): Promise<PrivateCluster> {
  const cluster = await startNatsCluster({ size: 3, name: 'baton-cli-test', monitor: true, ...options });
  const nodes = cluster.nodes.map(
    (server, i): ClusterNode => ({
      name: `n${i + 1}`,
      port: server.port,
      url: server.url,
      httpPort: server.monitorPort!,
      running: () => server.running(),
      kill: () => server.kill(),
    }),
  );
  return {
    nodes,
    natsUrl: cluster.natsUrl,
    async nodeHolding(name) {
      for (const node of nodes.filter((n) => n.running())) {
        const connz = (await (await fetch(`http://127.0.0.1:${node.httpPort}/connz`)).json()) as { connections?: Array<{ name?: string }> };
        if ((connz.connections ?? []).some((c) => c.name === name)) return node;
      }
      return null;
    },
    remove: () => cluster.remove(),
  };
}
