import type { NatsHandle } from '@baton/eventstore';

/** The part of a NATS connection the probe uses. */
export type JetStreamProbeConnection = Pick<NatsHandle['connection'], 'request' | 'isClosed'>;

export interface JetStreamProbeOptions {
  /** How long one probe waits for JetStream's answer, ms (default 800: inside the readiness check's second). */
  timeoutMs?: number;
  /** How long an answer stands before a readiness check asks JetStream again, ms (default 5000). */
  cacheMs?: number;
  /** The JetStream API prefix (default `$JS.API`). */
  apiPrefix?: string;
  /** The clock (tests). */
  now?: () => number;
}

/** What the last probe found. */
export interface JetStreamProbeResult {
  ok: boolean;
  /** When it was asked, ms since the epoch. */
  at: number;
  /** Why JetStream is not available: its API error (`JetStream system temporarily unavailable`), `timeout`, `no responders`…; null when it is. */
  why: string | null;
}

/** What the readiness probe asks JetStream by default: the account's info, answered by the meta leader. */
export const JETSTREAM_PROBE_TIMEOUT_MS = 800;
export const JETSTREAM_PROBE_CACHE_MS = 5000;

/**
 * Whether JetStream answers on a connection, for `/health/ready`: NATS being connected says
 * nothing of JetStream — a cluster that lost quorum keeps every client connected while no append
 * or read can succeed. The probe asks for the account's info (`$JS.API.INFO`: a few hundred
 * bytes, answered through the meta leader, which a leaderless cluster answers "JetStream system
 * temporarily unavailable" or not at all) with a short timeout, and keeps the answer for
 * `cacheMs`: however often readiness is asked, at most one probe is in flight and at most one is
 * sent per `cacheMs`; the checks in between read the kept answer.
 */
export class JetStreamProbe {
  private readonly timeoutMs: number;
  private readonly cacheMs: number;
  private readonly subject: string;
  private readonly now: () => number;
  private result: JetStreamProbeResult | null = null;
  private inFlight: Promise<boolean> | null = null;
  private sent = 0;

  constructor(
    private readonly connection: JetStreamProbeConnection,
    options: JetStreamProbeOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? JETSTREAM_PROBE_TIMEOUT_MS;
    this.cacheMs = options.cacheMs ?? JETSTREAM_PROBE_CACHE_MS;
    this.subject = `${options.apiPrefix ?? '$JS.API'}.INFO`;
    this.now = options.now ?? Date.now;
  }

  /** Whether JetStream answered (the kept answer while it is fresh, else a new probe). */
  available(): Promise<boolean> {
    const kept = this.result;
    if (kept !== null && this.now() - kept.at < this.cacheMs) return Promise.resolve(kept.ok);
    this.inFlight ??= this.probe().finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  /** The last probe's answer, or null before the first. */
  last(): JetStreamProbeResult | null {
    return this.result;
  }

  /** How many probes were sent so far. */
  probes(): number {
    return this.sent;
  }

  private async probe(): Promise<boolean> {
    this.sent++;
    const at = this.now();
    let why: string | null;
    if (this.connection.isClosed()) why = 'connection closed';
    else {
      try {
        const reply = await this.connection.request(this.subject, '', { timeout: this.timeoutMs });
        why = apiErrorOf(reply.data);
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        why = code === 'TIMEOUT' ? 'timeout' : code === '503' ? 'no responders' : (error as Error).message;
      }
    }
    this.result = { ok: why === null, at, why };
    return why === null;
  }
}

/** The API error of a JetStream reply (`<description> (<err_code>)`), or null when it carries none. */
function apiErrorOf(data: Uint8Array): string | null {
  let body: { error?: { description?: unknown; err_code?: unknown } };
  try {
    body = JSON.parse(new TextDecoder().decode(data)) as typeof body;
  } catch {
    return 'not a JetStream reply';
  }
  if (body.error === undefined) return null;
  return `${String(body.error.description ?? 'error')} (${String(body.error.err_code ?? '?')})`;
}
