// eslint-disable-next-line @nx/enforce-module-boundaries
import { startNatsServer, startRedisServer, type PrivateServer } from '../../../../libs/eventstore/src/int/servers';

/*
 * A server of the test's own (redis-server, nats-server) on a free loopback port, in a temp dir:
 * what a test that pauses or kills a server runs, so the shared servers other tests use are never
 * touched. The specs' shared servers (libs/eventstore/src/int/servers.ts), named as the notifier's
 * specs start them.
 */

export type { PrivateServer };

/** Start `kind` (a nats-server with JetStream) with its own data dir on a free loopback port and wait until it listens. */
export function startPrivateServer(kind: 'redis-server' | 'nats-server'): Promise<PrivateServer> {
  return kind === 'redis-server' ? startRedisServer() : startNatsServer({ jetstream: true });
}
