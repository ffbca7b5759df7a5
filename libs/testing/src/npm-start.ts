import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './processes';

/**
 * Whether a spec may run `npm start` (scripts/start.js) with its own nats-server: nats-server is
 * installed, and no `npm start` of this checkout runs (its local.json) — npm start's nats-server
 * keeps its JetStream data in the checkout's var/nats, which a developer's running platform holds.
 */
export function npmStartMayRun(): boolean {
  const haveNatsServer = ['/usr/sbin', '/usr/local/sbin', ...(process.env['PATH'] ?? '').split(':')].some(
    (dir) => dir !== '' && existsSync(join(dir, 'nats-server')),
  );
  return haveNatsServer && !existsSync(join(repoRoot(), 'var', 'nats-auth', 'local.json'));
}
