import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What `npm start` writes to `<deployment folder>/local.json` for the platform it runs: the
 * nats-server's URL, the admin's credentials file, the Redis the services use, the operator API's
 * URL and the nats-server's pid and log. The CLI and `npm run demo` find that platform through it
 * when NATS_URL is not set.
 */
export interface LocalDeployment {
  url: string;
  admin: string;
  redis?: string;
  /** The notifier's operator API (its port may have been moved with NOTIFIER_HTTP_PORT). */
  api?: string;
  /** The nats-server npm start runs: its pid and its log file. */
  natsServer?: { pid: number; log: string };
}

/** What local.json in the deployment folder `dir` says (null: none, or not one npm start wrote). */
export function readLocalDeployment(dir: string): LocalDeployment | null {
  const file = join(dir, 'local.json');
  if (!existsSync(file)) return null;
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as {
      url?: unknown;
      creds?: { admin?: unknown };
      redis?: unknown;
      api?: unknown;
      nats_server?: { pid?: unknown; log?: unknown };
    };
    if (typeof parsed.url !== 'string' || typeof parsed.creds?.admin !== 'string') return null;
    const { pid, log } = parsed.nats_server ?? {};
    return {
      url: parsed.url,
      admin: parsed.creds.admin,
      ...(typeof parsed.redis === 'string' ? { redis: parsed.redis } : {}),
      ...(typeof parsed.api === 'string' && /^https?:\/\//.test(parsed.api) ? { api: parsed.api } : {}),
      ...(typeof pid === 'number' && Number.isInteger(pid) && pid > 0 && typeof log === 'string' ? { natsServer: { pid, log } } : {}),
    };
  } catch {
    return null;
  }
}
