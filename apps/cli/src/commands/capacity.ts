import { connect as tcpConnect } from 'node:net';
import { existsSync } from 'node:fs';
import { inboxPrefixOf } from '@baton/contracts';
import { batonTopology, connectNats, type NatsHandle } from '@baton/eventstore';
import { BaseConfigSchema, loadConfig } from '@baton/platform';

type JetStreamManager = NatsHandle['jsm'];
type StreamInfo = Awaited<ReturnType<JetStreamManager['streams']['info']>>;

/*
 * What the account's JetStream storage must hold, and what fills it: read by `baton streams`
 * (capacity columns) and `baton nats-config --max-store` (refusing a limit below what the streams
 * reserve). nats-server reserves every stream's `max_bytes` × replicas against the account's
 * limit (a stream whose reservation does not fit is not created — nor loaded after a restart);
 * a stream without a limit (the events) takes what it stores.
 */

/** One stream's capacity, as `baton streams --json` prints it (besides its health). */
export interface StreamCapacity {
  /** Its `max_bytes`; null: no limit of its own (the account's bounds it). */
  max_bytes: number | null;
  /** `new`: full, it refuses what comes (nothing it acknowledged is dropped); `old`: it drops its oldest. */
  discard: 'new' | 'old';
  /** Its `max_age`, ms; null: kept forever. */
  max_age_ms: number | null;
  replicas: number;
  /** `bytes` as a percentage of `max_bytes` (one decimal); null without a limit. */
  used_pct: number | null;
}

/** The account's JetStream file storage (`jsm.getAccountInfo()`): the same on every stream of the account. */
export interface AccountStorage {
  /** `--max-store` in force on the server (`limits.max_storage`); null: no limit. */
  limit: number | null;
  /** Bytes its streams store (`storage`). */
  used: number;
  /** `used` as a percentage of `limit` (one decimal); null without a limit. */
  used_pct: number | null;
}

const pct = (part: number, whole: number | null): number | null => (whole === null || whole <= 0 ? null : Math.round((part / whole) * 1000) / 10);

/** A stream's capacity from its info. */
export function streamCapacity(info: StreamInfo): StreamCapacity {
  const maxBytes = info.config.max_bytes !== undefined && info.config.max_bytes > 0 ? info.config.max_bytes : null;
  const maxAge = info.config.max_age > 0 ? Math.round(info.config.max_age / 1_000_000) : null;
  return {
    max_bytes: maxBytes,
    discard: String(info.config.discard) === 'new' ? 'new' : 'old',
    max_age_ms: maxAge,
    replicas: info.config.num_replicas > 0 ? info.config.num_replicas : 1,
    used_pct: pct(info.state.bytes, maxBytes),
  };
}

/** The account's JetStream storage limit and usage. */
export async function accountStorage(jsm: JetStreamManager): Promise<AccountStorage> {
  const info = await jsm.getAccountInfo();
  const limit = info.limits.max_storage > 0 ? info.limits.max_storage : null;
  return { limit, used: info.storage, used_pct: pct(info.storage, limit) };
}

/** What one stream takes of the account's storage. */
export interface StreamNeed {
  stream: string;
  /** null: no limit of its own. */
  max_bytes: number | null;
  replicas: number;
  /** Bytes it holds (null: not known, the server was not read). */
  bytes: number | null;
  /** What it takes: `max_bytes × replicas` (reserved), else `bytes × replicas` (stored). */
  takes: number;
  /** `server`: read from the server; `configured`: the limit the services' settings give it (BATON_DLQ_MAX_BYTES, BATON_INBOX_MAX_BYTES, BATON_STREAM_REPLICAS). */
  from: 'server' | 'configured';
}

/** What the account's streams need of its storage: `required = reserved + stored`. */
export interface StorageNeed {
  /** Σ max_bytes × replicas of the streams with a limit. */
  reserved: number;
  /** Σ bytes × replicas of the streams without one (null: not read). */
  stored: number | null;
  required: number;
  streams: StreamNeed[];
}

/** The stream limits the services' settings give Baton's streams (what they provision at start), from the environment. */
export function configuredStreams(prefix: string, env: Readonly<Record<string, string | undefined>>): StreamNeed[] {
  const cfg = loadConfig(BaseConfigSchema.pick({ BATON_DLQ_MAX_BYTES: true, BATON_INBOX_MAX_BYTES: true, BATON_STREAM_REPLICAS: true }), env);
  const topology = batonTopology(prefix, {
    dlqMaxBytes: cfg.BATON_DLQ_MAX_BYTES,
    inboxMaxBytes: cfg.BATON_INBOX_MAX_BYTES,
    replicas: cfg.BATON_STREAM_REPLICAS,
  });
  return topology.streams.map((spec) => {
    const maxBytes = spec.maxBytes !== undefined && spec.maxBytes > 0 ? spec.maxBytes : null;
    return {
      stream: spec.name,
      max_bytes: maxBytes,
      replicas: spec.replicas,
      bytes: null,
      takes: maxBytes === null ? 0 : maxBytes * spec.replicas,
      from: 'configured',
    };
  });
}

/** What the account's streams on the server take (every stream of the account, Baton's or not). */
export async function serverStreams(jsm: JetStreamManager): Promise<StreamNeed[]> {
  const streams: StreamNeed[] = [];
  for await (const info of jsm.streams.list()) {
    const capacity = streamCapacity(info);
    const bytes = info.state.bytes;
    streams.push({
      stream: info.config.name,
      max_bytes: capacity.max_bytes,
      replicas: capacity.replicas,
      bytes,
      takes: (capacity.max_bytes ?? bytes) * capacity.replicas,
      from: 'server',
    });
  }
  return streams;
}

/**
 * What the streams need: the server's streams when read (`server`, null when it could not be), each of
 * Baton's own at the larger of its reservation there and the one the services' settings give it (a
 * service started with them provisions that), plus Baton's streams the server does not hold yet.
 */
export function storageNeed(configured: StreamNeed[], server: StreamNeed[] | null): StorageNeed {
  const byName = new Map<string, StreamNeed>();
  for (const stream of server ?? []) byName.set(stream.stream, stream);
  for (const want of configured) {
    const have = byName.get(want.stream);
    if (have === undefined) byName.set(want.stream, want);
    else if (want.max_bytes !== null && want.takes > (have.max_bytes !== null ? have.takes : 0)) byName.set(want.stream, { ...want, bytes: have.bytes });
  }
  const streams = [...byName.values()].sort((a, b) => a.stream.localeCompare(b.stream));
  const reserved = streams.filter((s) => s.max_bytes !== null).reduce((sum, s) => sum + s.takes, 0);
  const stored = server === null ? null : streams.filter((s) => s.max_bytes === null).reduce((sum, s) => sum + (s.bytes ?? 0) * s.replicas, 0);
  return { reserved, stored, required: reserved + (stored ?? 0), streams };
}

/** Whether something accepts a TCP connection at `host:port` now (a refused or timed-out dial: false). */
function accepts(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const socket = tcpConnect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** The server of a deployment folder, as `nats-config` found it at the listen its configuration names. */
export type DeploymentServer =
  | { reached: true; url: string; handle: NatsHandle }
  | {
      reached: false;
      url: string;
      /**
       * `not_listening`: nothing accepts connections there; `no_admin_creds`: the folder holds no
       * admin credentials yet; `refused`: a server answered and refused the folder's admin
       * credentials, or requires none (another deployment's server); `failed`: the connection or
       * JetStream failed (`detail`).
       */
      reason: 'not_listening' | 'no_admin_creds' | 'refused' | 'failed';
      detail: string;
    };

/**
 * Connect to the nats-server a deployment folder configures (its `listen`; a wildcard host is
 * reached on loopback) with the folder's admin credentials. Only a server that requires
 * credentials and takes these counts as the deployment's (a server without authentication takes
 * anyone's). The caller closes `handle`.
 */
export async function reachDeploymentServer(listen: string, adminCreds: string, prefix: string): Promise<DeploymentServer> {
  const at = listen.lastIndexOf(':');
  let host = listen.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  const port = Number(listen.slice(at + 1));
  if (host === '0.0.0.0' || host === '::' || host === '') host = '127.0.0.1';
  const url = `nats://${host.includes(':') ? `[${host}]` : host}:${port}`;
  if (!(await accepts(host, port))) return { reached: false, url, reason: 'not_listening', detail: `nothing accepts connections at ${url}` };
  if (!existsSync(adminCreds)) return { reached: false, url, reason: 'no_admin_creds', detail: `no admin credentials in the folder yet (${adminCreds})` };
  let handle: NatsHandle;
  try {
    handle = await connectNats({
      servers: url,
      credsFile: adminCreds,
      inboxPrefix: inboxPrefixOf(prefix, { kind: 'op', relay: 'admin' }),
      reconnect: false,
      name: 'baton-nats-config',
      connectTimeoutMs: 3000,
      checkJetStream: false,
    });
  } catch (error) {
    return { reached: false, url, reason: 'refused', detail: `the server at ${url} refused the folder's admin credentials (${(error as Error).message})` };
  }
  if (handle.connection.info?.auth_required !== true) {
    await handle.close().catch(() => undefined);
    return { reached: false, url, reason: 'refused', detail: `the server at ${url} requires no credentials: it is not configured from this folder` };
  }
  return { reached: true, url, handle };
}
