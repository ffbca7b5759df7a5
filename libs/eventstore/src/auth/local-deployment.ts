import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * What `npm start` writes to `<deployment folder>/local.json` for the platform it runs: the
 * nats-server's URL, the admin's credentials file, the subject prefix the services run with
 * (`BATON_PREFIX`), the Redis the services use, the operator API's URL, the token key file and the
 * nats-server's pid and log. The CLI and `npm run demo` find that
 * platform through it when NATS_URL is not set.
 */
export interface LocalDeployment {
  url: string;
  admin: string;
  /** The services' `BATON_PREFIX` (absent in a local.json an earlier npm start wrote). */
  prefix?: string;
  redis?: string;
  /** The notifier's operator API (its port may have been moved with NOTIFIER_HTTP_PORT). */
  api?: string;
  /** The deployment's token key file (`baton token create` signs with it; the notifier checks with it). */
  tokenKey?: string;
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
      prefix?: unknown;
      redis?: unknown;
      api?: unknown;
      token_key?: unknown;
      nats_server?: { pid?: unknown; log?: unknown };
    };
    if (typeof parsed.url !== 'string' || typeof parsed.creds?.admin !== 'string') return null;
    const { pid, log } = parsed.nats_server ?? {};
    return {
      url: parsed.url,
      admin: parsed.creds.admin,
      ...(typeof parsed.prefix === 'string' && parsed.prefix !== '' ? { prefix: parsed.prefix } : {}),
      ...(typeof parsed.redis === 'string' ? { redis: parsed.redis } : {}),
      ...(typeof parsed.api === 'string' && /^https?:\/\//.test(parsed.api) ? { api: parsed.api } : {}),
      ...(typeof parsed.token_key === 'string' && parsed.token_key !== '' ? { tokenKey: parsed.token_key } : {}),
      ...(typeof pid === 'number' && Number.isInteger(pid) && pid > 0 && typeof log === 'string' ? { natsServer: { pid, log } } : {}),
    };
  } catch {
    return null;
  }
}

/** The deployment folder: BATON_NATS_DIR, else ./var/nats-auth (relative to the working directory). */
export function deploymentDir(env: Readonly<Record<string, string | undefined>>): string {
  return resolve(env['BATON_NATS_DIR'] ?? join('var', 'nats-auth'));
}

/** The files that say a deployment folder is a deployment's (written by `baton nats-config` and `npm start`). */
const DEPLOYMENT_MARKS = ['nats-server.conf', 'npm-start.json'] as const;

/** A deployment folder whose platform is not running, as {@link stoppedDeployment} finds it. */
export interface StoppedDeployment {
  dir: string;
  /** The files that say it is a deployment's. */
  found: string[];
  /** Its local.json is gone (npm start removes it when it stops), or is not one npm start wrote. */
  localJson: 'missing' | 'unreadable';
}

/**
 * The deployment a client (the CLI, `npm run demo`) would have reached through local.json, when it
 * cannot: NATS_URL is not set, the deployment folder holds a deployment (a nats-server.conf or
 * npm-start.json), and local.json is missing or is not one npm start wrote. The client then falls
 * back to its built-in defaults, which may be another deployment's servers: it says so. Null
 * otherwise (no deployment here, local.json read, or NATS_URL set).
 */
export function stoppedDeployment(env: Readonly<Record<string, string | undefined>>, local: LocalDeployment | null): StoppedDeployment | null {
  if (env['NATS_URL'] !== undefined || local !== null) return null;
  const dir = deploymentDir(env);
  const found = DEPLOYMENT_MARKS.filter((name) => existsSync(join(dir, name)));
  if (found.length === 0) return null;
  return { dir, found, localJson: existsSync(join(dir, 'local.json')) ? 'unreadable' : 'missing' };
}
