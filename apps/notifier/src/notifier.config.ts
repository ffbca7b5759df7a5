import { isIP } from 'node:net';
import { z } from 'zod';
import { envInt, loadServiceSettings, TokenKeyFileSetting } from '@baton/platform';
import { ProjectIdSchema } from '@baton/contracts';

/** Injection token of the {@link NotifierConfig}. */
export const NOTIFIER_CONFIG = Symbol('NOTIFIER_CONFIG');

/**
 * What a webhook's configured `name` may be: a letter or digit, then letters, digits and
 * `. _ : @ / -`, at most 64 characters — one token in a log line, a letter's detail or a CLI line.
 */
export const WEBHOOK_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,63}$/;

/** A webhook id's form (16 hex digits): no name may take it, or a name would read as another webhook's id. */
export const WEBHOOK_ID_PATTERN = /^[0-9a-f]{16}$/;

/** One webhook that receives human action notices. `projects` limits it to those projects (default: all). */
export const WebhookTargetSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/ }),
  /** The HMAC-SHA256 key of the `Baton-Signature` header (at least 16 characters). */
  secret: z.string().min(16).max(512),
  /**
   * What operators call it (logs, dead letters' detail, the API, `baton notice redeliver`), beside
   * its id: a letter or digit, then letters, digits and `. _ : @ / -`, at most 64 characters, not 16
   * hex digits (an id's form), unique among the webhooks. Default: derived from the URL, host and
   * path, each segment that may be a secret shown as `***` (`derivedWebhookName`).
   */
  name: z
    .string()
    .regex(WEBHOOK_NAME_PATTERN, 'a letter or digit, then letters, digits and . _ : @ / - (at most 64 characters)')
    .refine((name) => !WEBHOOK_ID_PATTERN.test(name), 'may not be 16 hex digits: that is the form of a webhook id')
    .optional(),
  projects: z.array(ProjectIdSchema).min(1).max(100).optional(),
});
export type WebhookTarget = z.infer<typeof WebhookTargetSchema>;

const webhookList = z
  .string()
  .transform((raw, ctx) => {
    try {
      return JSON.parse(raw) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON list of {url, secret, name?, projects?}' });
      return z.NEVER;
    }
  })
  .pipe(
    z
      .array(WebhookTargetSchema)
      .max(20)
      .superRefine((targets, ctx) => {
        // A name says which webhook failed: two of one name would not.
        const seen = new Map<string, number>();
        targets.forEach((target, i) => {
          if (target.name === undefined) return;
          const first = seen.get(target.name);
          if (first === undefined) seen.set(target.name, i);
          else ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `webhook names are unique: "${target.name}" is the name of webhook ${first} too` });
        });
      }),
  );

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/** The names Express's `trust proxy` takes for address ranges. */
const PROXY_RANGE_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** Is `entry` an IP address, an address with a prefix length (`10.0.0.0/8`, `fd00::/8`), or a named range? */
function isProxyRange(entry: string): boolean {
  if (PROXY_RANGE_NAMES.has(entry)) return true;
  const [address, prefix, ...rest] = entry.split('/');
  if (rest.length > 0 || address === undefined) return false;
  const family = isIP(address);
  if (family === 0) return false;
  if (prefix === undefined) return true;
  if (!/^\d{1,3}$/.test(prefix)) return false;
  return Number(prefix) <= (family === 4 ? 32 : 128);
}

/**
 * Which proxies in front of the notifier are believed about the client's address
 * (`X-Forwarded-For`): none (`false`, the default: the socket's peer is the client), a number of
 * hops (`1` = the nearest proxy), or a comma-separated list of addresses, prefixes and the named
 * ranges `loopback`, `linklocal`, `uniquelocal`. Given to Express as `trust proxy`.
 */
export type TrustProxy = false | number | string[];

const trustProxy = z
  .string()
  .trim()
  .transform((raw, ctx): TrustProxy => {
    if (raw === '' || raw === 'false' || raw === '0') return false;
    if (/^\d+$/.test(raw)) {
      const hops = Number(raw);
      if (hops <= 16) return hops;
      ctx.addIssue({ code: 'custom', message: 'a hop count is between 0 and 16' });
      return z.NEVER;
    }
    const entries = raw.split(',').map((entry) => entry.trim());
    const bad = entries.filter((entry) => !isProxyRange(entry));
    if (bad.length === 0) return entries;
    ctx.addIssue({
      code: 'custom',
      message: `not an address, prefix or range name (loopback, linklocal, uniquelocal): ${bad.map((entry) => JSON.stringify(entry)).join(', ')}`,
    });
    return z.NEVER;
  });

/**
 * The notifier's own settings (besides the ones every service reads). Secrets — webhook keys,
 * operator tokens — come only from the environment or Redis, never from files in the repository.
 */
export const NotifierConfigSchema = z.object({
  /** JSON list of webhooks: `[{"url":"https://…","secret":"…","name":"shop-chat","projects":["shop"]}]` (default none; `name` and `projects` optional). */
  NOTIFIER_WEBHOOKS: webhookList.default([]),
  /**
   * Deliveries of one notice to a failing webhook before it is dead-lettered (default 21: with the
   * default delays the retries span {@link webhookRetryWindowMs} ≈ 63.5 minutes — 1 s doubling to
   * the 5-minute cap in 8.5 minutes, then eleven tries 5 minutes apart — so a receiver down for an
   * hour still gets every notice).
   */
  NOTIFIER_WEBHOOK_MAX_ATTEMPTS: envInt(1, 30).default(21),
  /** The first retry delay; each further retry doubles it (default 1000 ms). */
  NOTIFIER_WEBHOOK_BACKOFF_MS: envInt(10, 600_000).default(1000),
  /** The longest retry delay (default 5 minutes). */
  NOTIFIER_WEBHOOK_BACKOFF_MAX_MS: envInt(10, 3_600_000).default(300_000),
  /** How long one webhook call may take (default 5000 ms). */
  NOTIFIER_WEBHOOK_TIMEOUT_MS: envInt(100, 60_000).default(5000),
  /** How long a browser session lasts (default 8 hours). */
  NOTIFIER_SESSION_TTL_SEC: envInt(60, 30 * 24 * 3600).default(8 * 3600),
  /** Mark the session cookie `Secure` (set it when the inbox is served over HTTPS; default false). */
  NOTIFIER_COOKIE_SECURE: bool.default(false),
  /**
   * How often the notifier checks that Redis still holds every projection (a flushed or replaced
   * Redis loses them) and rebuilds the lost ones from the events stream (default 5000 ms; 0 = only
   * at start).
   */
  NOTIFIER_PROJECTION_CHECK_MS: envInt(0, 600_000).default(5000),
  /**
   * How long an operator's answer (stop packet, hold, mesh stop) waits for the router's decision
   * to appear in the run's (or mesh's) event stream before the API answers 202 with a status link
   * instead of the outcome (default 5000 ms; 0 = never wait: always 202).
   */
  NOTIFIER_ANSWER_WAIT_MS: envInt(0, 60_000).default(5000),
  /**
   * Most time a client may take to send a request's headers (default 10 s); a connection that
   * sends no complete request within it is closed too (slow-loris, idle sockets). Node's
   * `server.headersTimeout`.
   */
  NOTIFIER_HTTP_HEADERS_TIMEOUT_MS: envInt(100, 300_000).default(10_000),
  /** Most time a client may take to send a whole request, headers and body (default 30 s). Node's `server.requestTimeout`; at least the headers timeout. */
  NOTIFIER_HTTP_REQUEST_TIMEOUT_MS: envInt(100, 600_000).default(30_000),
  /** How long an idle keep-alive connection stays open after a response (default 5 s). Node's `server.keepAliveTimeout`. */
  NOTIFIER_HTTP_KEEPALIVE_TIMEOUT_MS: envInt(100, 600_000).default(5000),
  /**
   * Most open connections (default 1000, live streams included); past it new connections are
   * closed at once. Keep it under the process's file limit (`ulimit -n`) with room for NATS,
   * Redis and logs. Node's `server.maxConnections`.
   */
  NOTIFIER_HTTP_MAX_CONNECTIONS: envInt(1, 1_000_000).default(1000),
  /** Most live event streams (`GET /v1/events/stream`) one token (or its browser sessions) may hold open (default 10); more answer 429 `too_many_streams`. */
  NOTIFIER_STREAMS_PER_TOKEN: envInt(1, 10_000).default(10),
  /** Most live event streams open in all (default 500); more answer 429 `too_many_streams`. */
  NOTIFIER_STREAMS_MAX: envInt(1, 100_000).default(500),
  /** How often open live streams re-check their token (revoked, expired) or session (signed out), closing those no longer valid (default 5000 ms). */
  NOTIFIER_STREAM_AUTH_CHECK_MS: envInt(50, 600_000).default(5000),
  /**
   * Failed authentications (a bearer token or a sign-in that does not verify) one client address
   * may make per minute (default 20; 0 = no limit); past it every authentication from that address
   * answers 429 `too_many_auth_failures` with `Retry-After` until the minute ends. Counted per
   * notifier instance.
   */
  NOTIFIER_AUTH_FAILURES_PER_MINUTE: envInt(0, 100_000).default(20),
  /**
   * The proxies whose `X-Forwarded-For` names the client (default none: the socket's peer is the
   * client, and the header is ignored). Behind a load balancer set it — every client otherwise
   * shares the balancer's address, and one client's failed authentications lock out all of them.
   * A hop count (`1`) or a list of addresses, prefixes and `loopback` / `linklocal` / `uniquelocal`.
   */
  NOTIFIER_TRUST_PROXY: trustProxy.default(false),
  /**
   * The deployment's token key file (`<deployment folder>/token.key`, which `npm start` and
   * `baton nats-config` create, 0600): read at start. Set, only operator API token records (and
   * browser sessions) signed with it authenticate — one written into Redis without the key is
   * refused 401 `unsigned`. Unset, every token record in Redis is trusted as it is (whoever can
   * write Redis can make an admin token) and the notifier warns so at start (`token_key_missing`).
   * The same variable names it for `baton token`.
   */
  BATON_TOKEN_KEY_FILE: TokenKeyFileSetting.optional(),
});
export type NotifierConfig = z.infer<typeof NotifierConfigSchema>;

/** Validate the notifier's settings from `env`; throws ConfigError naming each bad variable. */
export function loadNotifierConfig(env: Record<string, string | undefined>): NotifierConfig {
  return loadServiceSettings(NotifierConfigSchema, env);
}

/**
 * How long after a notice's first delivery the notifier gives up on a webhook that keeps failing:
 * the sum of the delays before each retry (NOTIFIER_WEBHOOK_MAX_ATTEMPTS − 1 of them, see
 * {@link webhookBackoff}), not counting the calls themselves (each at most
 * NOTIFIER_WEBHOOK_TIMEOUT_MS). With the defaults: 1 + 2 + … + 256 s, then eleven times 300 s =
 * 3,811 s ≈ 63.5 minutes.
 */
export function webhookRetryWindowMs(
  config: Pick<NotifierConfig, 'NOTIFIER_WEBHOOK_MAX_ATTEMPTS' | 'NOTIFIER_WEBHOOK_BACKOFF_MS' | 'NOTIFIER_WEBHOOK_BACKOFF_MAX_MS'>,
): number {
  return webhookBackoff(config)
    .slice(0, config.NOTIFIER_WEBHOOK_MAX_ATTEMPTS - 1)
    .reduce((sum, delay) => sum + delay, 0);
}

/** Retry delays for a webhook delivery: base, 2·base, 4·base, … capped, one per attempt. */
export function webhookBackoff(
  config: Pick<NotifierConfig, 'NOTIFIER_WEBHOOK_MAX_ATTEMPTS' | 'NOTIFIER_WEBHOOK_BACKOFF_MS' | 'NOTIFIER_WEBHOOK_BACKOFF_MAX_MS'>,
): number[] {
  return Array.from({ length: config.NOTIFIER_WEBHOOK_MAX_ATTEMPTS }, (_, i) =>
    Math.min(config.NOTIFIER_WEBHOOK_BACKOFF_MS * 2 ** i, config.NOTIFIER_WEBHOOK_BACKOFF_MAX_MS),
  );
}
