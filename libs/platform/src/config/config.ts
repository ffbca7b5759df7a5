import { nearestKey } from '@baton/contracts';
import { z } from 'zod';

/** A configuration problem found at start. The message names each bad variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(
    message: string,
    readonly problems: { variable: string; problem: string }[],
  ) {
    super(message);
  }
}

/**
 * A server a service needs could not be used at start: unreachable, or it refused the credentials.
 * The message names the server and the variable to look at (`variable`); nothing was started.
 */
export class StartupError extends Error {
  override name = 'StartupError';
  constructor(
    message: string,
    readonly variable: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * How a service's entry point ends a start that failed: a configuration problem exits 78 with the
 * variables named, a server it could not use exits 1 with one line naming the server and the
 * variable, anything else exits 1 with its stack (a defect to report).
 */
export function exitOnStartFailure(service: string): (error: unknown) => never {
  return (error: unknown) => {
    if (error instanceof ConfigError) {
      process.stderr.write(`baton ${service}: ${error.message}\n`);
      process.exit(78);
    }
    if (error instanceof StartupError) {
      process.stderr.write(`baton ${service}: failed to start: ${error.message}\n`);
      process.exit(1);
    }
    process.stderr.write(`baton ${service}: failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  };
}

/**
 * A whole-number setting, held to `[min, max]`: digits only (surrounding blanks ignored). A blank,
 * a sign, a fraction, an exponent (`7.1e3`) or a hexadecimal form (`0x1BBC`) is refused rather
 * than read as some number nobody wrote. Numbers (a schema parsed from an object, not from the
 * environment) are taken as they are.
 */
export function envInt(min: number, max: number) {
  return z
    .union([z.number(), z.string()])
    .transform((value, ctx) => {
      if (typeof value === 'number') return value;
      const digits = value.trim();
      if (/^\d+$/.test(digits)) return Number(digits);
      ctx.addIssue({ code: 'custom', message: 'must be a whole number written in digits' });
      return z.NEVER;
    })
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));
}

/**
 * A server address (or a text holding some: a comma-separated list, a message) as it may be shown:
 * the password of every `scheme://user:password@` replaced by `***`, the user kept (a NATS URL's
 * token, `nats://<token>@host`, masked whole). The one place
 * Baton masks a URL's password (config problems, start failures, the CLI's messages). The userinfo
 * runs to the last `@` before a blank, a comma or a quote, so a password holding `@`, `/` or `:`
 * (a URL that does not parse, which is when its text is shown) is masked whole.
 */
export function redactUrl(text: string): string {
  return text.replace(/([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^\s,"'@]*(?:@[^\s,"'@]*)*)@/g, (whole, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    // A NATS URL's userinfo without a colon is a token (`nats://<token>@host`): masked whole.
    if (colon < 0) return /^(nats|tls|ws|wss):\/\/$/i.test(scheme) ? `${scheme}***@` : whole;
    return `${scheme}${userinfo.slice(0, colon)}:***@`;
  });
}

/**
 * One `scheme://host[:port][/path]` address, as a client library will parse it: a problem, or
 * null. The address is named with its password masked ({@link redactUrl}): a config problem is
 * printed and logged.
 */
export function addressProblem(value: string, schemes: readonly string[]): string | null {
  const scheme = value.slice(0, Math.max(0, value.indexOf('://')));
  if (!schemes.includes(scheme)) return `must start with ${schemes.map((s) => `${s}://`).join(' or ')}`;
  const shown = JSON.stringify(redactUrl(value));
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return `${shown} is not a valid URL`;
  }
  if (parsed.hostname === '') return `${shown} names no host`;
  // URL accepts an empty port and refuses one past 65535; a port of 0 is no server's.
  if (parsed.port === '0') return `${shown}: the port must be 1-65535`;
  return null;
}

/**
 * A server address setting. `list`: several addresses separated by commas (a NATS cluster's seed
 * servers), each checked; one bad entry names itself.
 */
const url = (schemes: string[], list = false) =>
  z
    .string()
    .min(1)
    .superRefine((value, ctx) => {
      const entries = list ? value.split(',').map((entry) => entry.trim()) : [value.trim()];
      for (const entry of entries) {
        const problem = entry === '' ? 'an empty entry in the list (two commas, or one at an end)' : addressProblem(entry, schemes);
        if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
      }
    });

/** The largest dead-letter age JetStream can hold (its `max_age` is an int64 of nanoseconds): about 292 years. */
const DLQ_MAX_AGE_MS_LIMIT = Math.floor(Number.MAX_SAFE_INTEGER / 1000);

/** Settings every Baton service reads from its environment. */
export const BaseConfigSchema = z.object({
  NATS_URL: url(['nats', 'tls', 'ws', 'wss'], true).default('nats://127.0.0.1:4222'),
  REDIS_URL: url(['redis', 'rediss']).default('redis://127.0.0.1:6379'),
  /**
   * How long one Redis command may wait for its reply before it fails (default 1000 ms): a stalled
   * Redis makes the operator API answer 503 `projections_unavailable` at once instead of hanging,
   * and the client carries on by itself when Redis answers again. Projection batches (one Lua
   * script each) must fit in it too: raise it if the notifier logs timed-out applies on a slow Redis.
   */
  REDIS_COMMAND_TIMEOUT_MS: envInt(50, 60_000).default(1000),
  /** Prefix of every subject, stream and Redis key; lets several Baton deployments share servers. */
  BATON_PREFIX: z
    .string()
    .regex(/^[a-z][a-z0-9_-]{0,31}$/, 'must be 1-32 lowercase letters, digits, _ or -, starting with a letter')
    .default('baton'),
  /** Replicas for Baton's streams (1 on a single server; 3 on a cluster). */
  BATON_STREAM_REPLICAS: envInt(1, 5).default(1),
  /** Deliveries before a failing message is dead-lettered. */
  BATON_MAX_DELIVER: envInt(1, 100).default(5),
  /**
   * Ack wait of the services' durable consumers, ms (default 10 s): how long a message a process
   * took and never acknowledged — the process was killed, or lost its connection — waits before
   * the stream delivers it again, to another instance or to the process restarted. A handler that
   * runs longer is not redelivered: the runner sends an in-progress signal every third of it. A
   * change is applied to the existing durables when the service starts.
   */
  BATON_ACK_WAIT_MS: envInt(1_000, 300_000).default(10_000),
  /**
   * Dead letters of refusals redrive would not republish each sender may cause per minute, per
   * service instance and path (0 = no cap): inbox messages on the subjects agents publish (results,
   * starts, messages, mesh results and starts) a consumer refuses for themselves, and in the ledger
   * agent edge messages relayed nowhere and rejected ledger commands. Refusals beyond it are counted
   * and written as one `refusals_suppressed` letter when the sender's minute ends. An inbox message
   * whose letter redrive would republish (`redrivableLetter`) always gets its own, outside the budget.
   */
  BATON_REFUSED_LETTERS_PER_MINUTE: envInt(0, 1_000_000).default(60),
  /**
   * Aggregates whose folded state the event store keeps in memory (least recently used first out;
   * 0 = none). A larger cache spares reads when deciding on many aggregates; each entry costs
   * memory (a few KB for a handoff, more for a long run).
   */
  // Unset: the service's own default (DEFAULT_FOLD_CACHE_SIZE; the ledger's is smaller).
  BATON_FOLD_CACHE_SIZE: envInt(0, 1_000_000).optional(),
  /**
   * Most the folded states the event store keeps may weigh together, in MiB of estimated heap
   * (least recently used first out, whatever their count). Holds the cache to the service's heap
   * when aggregates are large (a handoff's context, a long run): size the heap
   * (`--max-old-space-size`) to this plus what the service needs besides (docs/performance.md).
   */
  // Unset: the service's own default (DEFAULT_FOLD_CACHE_MB; the ledger's and the router's are smaller).
  BATON_FOLD_CACHE_MB: envInt(1, 65_536).optional(),
  /**
   * How long dead letters are kept in `<PREFIX>_DLQ`, in ms (default 30 days; 0 = forever). Every
   * service provisions the stream at start, so give every service the same value.
   */
  BATON_DLQ_MAX_AGE_MS: envInt(0, DLQ_MAX_AGE_MS_LIMIT).default(30 * 24 * 60 * 60 * 1000),
  /** Most bytes of dead letters kept (default 1 GiB; 0 = no limit). Past either limit the oldest go first. */
  BATON_DLQ_MAX_BYTES: envInt(0, Number.MAX_SAFE_INTEGER).default(1024 * 1024 * 1024),
  /**
   * Most bytes `<PREFIX>_INBOX` holds (0 = no limit, the default). Full, it refuses new messages —
   * each publisher gets the typed `storage_full` error (JetStream's "maximum bytes exceeded") and
   * nothing is stored — and never drops a message it acknowledged (discard new); its messages
   * leave only with their age (30 days). Every service provisions the stream at start, so give
   * every service the same value; it is applied only with a quarter of it (at most 64 MiB) free
   * above what the stream holds (lowering a stream's limit below what it holds drops the oldest,
   * and publishes keep landing meanwhile), else kept back with a warning naming the smallest value
   * that would be applied. docs/sre.md, "Capacity".
   */
  BATON_INBOX_MAX_BYTES: envInt(0, Number.MAX_SAFE_INTEGER).default(0),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  /** An id for this process, in logs and consumer names. */
  BATON_INSTANCE: z.string().min(1).max(64).optional(),
  /**
   * How this process proves who it is to NATS: `creds` (default) — a credentials file made by
   * `baton creds` / `baton nats-config` (NATS_CREDS), so the server decides what it may publish and
   * read; `none` — no authentication, for a development server only (every service logs a warning).
   */
  BATON_NATS_AUTH: z.enum(['creds', 'none']).default('creds'),
  /** This principal's NATS credentials file (user JWT + nkey seed); secrets come only from files the environment names. */
  NATS_CREDS: z.string().min(1).optional(),
  /** A NATS user and password instead of a credentials file (servers configured with users; Baton's own configuration uses NATS_CREDS). */
  NATS_USER: z.string().min(1).max(128).optional(),
  NATS_PASSWORD: z.string().min(1).max(512).optional(),
});
export type BaseConfig = z.infer<typeof BaseConfigSchema>;

/**
 * The NATS authentication a service starts with, or a {@link ConfigError} that says how to get
 * credentials. A service refuses to start without them unless `BATON_NATS_AUTH=none` says so.
 */
export function checkNatsAuth(config: Pick<BaseConfig, 'BATON_NATS_AUTH' | 'NATS_CREDS' | 'NATS_USER'>, principal: string): void {
  if (config.BATON_NATS_AUTH === 'none' || config.NATS_CREDS !== undefined || config.NATS_USER !== undefined) return;
  const problem = `required: the path of this ${principal}'s credentials file (\`baton nats-config\` writes one per service; \`npm start\` sets it), or BATON_NATS_AUTH=none for a development server without authentication`;
  throw new ConfigError(`invalid configuration:\n  NATS_CREDS: ${problem}`, [{ variable: 'NATS_CREDS', problem }]);
}

/**
 * Does this process connect to NATS with authentication — a credentials file (NATS_CREDS) or a
 * user and password (NATS_USER) — so that the server decides who may publish what? False only with
 * `BATON_NATS_AUTH=none` and neither set (a development server). Where a service answers a request
 * depends on it (`replyRefusal` in @baton/contracts).
 */
export function natsAuthenticated(config: Pick<BaseConfig, 'BATON_NATS_AUTH' | 'NATS_CREDS' | 'NATS_USER'>): boolean {
  return config.BATON_NATS_AUTH !== 'none' || config.NATS_CREDS !== undefined || config.NATS_USER !== undefined;
}

/**
 * Validate `env` against a zod object schema. Unknown variables are ignored; a missing or malformed
 * one fails with a {@link ConfigError} whose message lists every bad variable and why.
 */
export function loadConfig<S extends z.ZodObject>(schema: S, env: Record<string, string | undefined> = process.env): z.infer<S> {
  const cleaned: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined && value !== '') cleaned[key] = value;
  const parsed = schema.safeParse(cleaned);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => ({
    variable: issue.path.map(String).join('.') || '(environment)',
    problem: issue.message,
  }));
  const lines = problems.map((p) => `  ${p.variable}: ${p.problem}`).join('\n');
  throw new ConfigError(`invalid configuration:\n${lines}`, problems);
}

/**
 * A service's own settings (`LEDGER_*`, `WATCHDOG_*`, `NOTIFIER_*`), checked in one pass with the
 * settings every service shares, so that a start with bad variables of both kinds names all of
 * them at once instead of the service's first and the shared ones on the next try. Returns the
 * service's own; the shared ones are read (again) when the service starts (`runService`).
 */
export function loadServiceSettings<S extends z.ZodObject>(schema: S, env: Record<string, string | undefined> = process.env): z.infer<S> {
  loadConfig(BaseConfigSchema.extend(schema.shape), env);
  return loadConfig(schema, env);
}

/** A variable of a service's own prefix that it does not read, with the known name nearest to it (a misspelling), if any. */
export interface UnknownVariable {
  variable: string;
  nearest?: string;
}

/**
 * The variables of `env` under the service's own prefix (`LEDGER_`, `WATCHDOG_`…: its name in
 * capitals) that are not among `known`: a misspelt setting is otherwise ignored without a word and
 * its default used. Each comes with the known name nearest to it when one is close (at most a
 * third of the name's length of single-character edits away).
 */
export function unknownOwnVariables(service: string, known: readonly string[], env: Record<string, string | undefined>): UnknownVariable[] {
  const prefix = `${service.toUpperCase()}_`;
  const knownSet = new Set(known);
  const unknown: UnknownVariable[] = [];
  for (const variable of Object.keys(env).sort()) {
    if (!variable.startsWith(prefix) || knownSet.has(variable) || env[variable] === undefined) continue;
    const nearest = nearestKey(variable, known);
    unknown.push(nearest !== undefined ? { variable, nearest } : { variable });
  }
  return unknown;
}
