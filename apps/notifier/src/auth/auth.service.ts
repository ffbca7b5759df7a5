import { Inject, Injectable, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { apiTokenExpired, RUNTIME, TOKEN_KEY_SETTING, TokenRevocationLog, tokenRevocationStreamName, type ServiceRuntime } from '@baton/platform';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';
import { parseCookies, SESSION_COOKIE } from './cookies';
import type { HttpRequest } from './http-types';
import type { Principal } from './roles';
import { SessionStore, type Session } from './session-store';
import { TokenStore, type TokenRefusal } from './token-store';

/** How long the notifier waits before trying again to make a token revocation log it could not make, ms. */
const REVOCATION_LOG_RETRY_MS = 10_000;

/** How a request authenticated. */
export type Authentication = { principal: Principal; session: Session | null };

/**
 * The outcome of authenticating a request: who, or why not. `presented` is true when the request
 * sent credentials that failed (a bearer token; a failed one counts towards the address's limit),
 * false when it sent none that count (no Authorization header; an expired or unknown session
 * cookie).
 */
export type AuthAttempt = { ok: true; auth: Authentication } | { ok: false; presented: boolean; reason: TokenRefusal | 'missing' | 'session' };
// `revocations_unavailable` (a TokenRefusal) with presented false: a session whose token verifies, while the revocation log cannot be read.

/** How long a readiness probe of the token revocation log is believed (readiness may be polled often). */
export const REVOCATION_PROBE_CACHE_MS = 2_000;
/** The token id the probe asks about: well-formed, never minted (ids are random 16-hex). */
const REVOCATION_PROBE_TOKEN_ID = '0000000000000000';

/**
 * Authenticates requests: `Authorization: Bearer <token>` (the JSON API, the CLI, scripts) or the
 * browser session cookie (the web inbox). Tokens and sessions live in the notifier's Redis under
 * `<BATON_PREFIX>:auth:` (see token-store.ts). Authentication is always on. With the deployment's
 * token key (`BATON_TOKEN_KEY_FILE`) only token records and sessions signed with it count, and
 * a token the deployment's token revocation log (`<PREFIX>_TOKEN_REVOCATIONS`, JetStream, written
 * by the admin only: libs/platform/src/auth/token-revocations.ts) says is revoked is refused
 * whatever Redis says; without the key, every record in Redis is trusted, and the notifier says so
 * when it starts.
 */
@Injectable()
export class AuthService implements OnApplicationBootstrap, OnApplicationShutdown {
  readonly tokens: TokenStore;
  readonly sessions: SessionStore;
  /** The token revocation log (with the key), made at start when missing. */
  readonly revocations: TokenRevocationLog | null;
  private ensureRetry: NodeJS.Timeout | null = null;
  private logUnavailableSaid = false;
  /** The last readiness probe of the revocation log ({@link revocationsReadable}). */
  private probed: { at: number; ok: boolean } | null = null;

  constructor(
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
    @Inject(NOTIFIER_CONFIG) readonly config: NotifierConfig,
  ) {
    if (!runtime.redis) throw new Error('the notifier needs Redis (REDIS_URL) for its tokens and sessions');
    const key = config.BATON_TOKEN_KEY_FILE ?? null;
    this.revocations =
      key === null ? null : new TokenRevocationLog(runtime.nats, runtime.config.BATON_PREFIX, key, { replicas: runtime.config.BATON_STREAM_REPLICAS });
    this.tokens = new TokenStore(runtime.redis.client, runtime.config.BATON_PREFIX, key, this.revocations);
    this.sessions = new SessionStore(runtime.redis.client, runtime.config.BATON_PREFIX, this.tokens, config.NOTIFIER_SESSION_TTL_SEC, key);
  }

  /**
   * Say at start how tokens are trusted: without a key, that every record in Redis is (a warning,
   * `token_key_missing`); with one, which key, and how many active records it refuses because they
   * are not signed with it (`token_records_unsigned`: a deployment that had no key signs the
   * tokens it keeps with `baton token sign-existing`). A Redis that does not answer now is not
   * waited for: the count is left out.
   */
  async onApplicationBootstrap(): Promise<void> {
    const key = this.config.BATON_TOKEN_KEY_FILE;
    if (key === undefined) {
      this.runtime.logger.warn(
        `${TOKEN_KEY_SETTING} is not set: every operator API token record in Redis is trusted as it is, so whoever can write this Redis can make an admin token. Set it to the deployment's token key (npm start and docker compose do; docs/operators.md §1)`,
        { warning: 'token_key_missing' },
      );
      return;
    }
    this.runtime.logger.info('operator API tokens are trusted only when signed with the token key', { token_key: key.file, fingerprint: key.fingerprint });
    await this.ensureRevocationLog();
    this.followRevocationLog();
    const now = Date.now();
    const unsigned = await this.tokens
      .records()
      .then((records) =>
        records.filter((r) => r.revoked_at === null && !apiTokenExpired(r, now) && this.tokens.signatureOf(r) !== 'valid').map((r) => r.token_id),
      )
      .catch(() => []);
    if (unsigned.length > 0)
      this.runtime.logger.warn(
        `${unsigned.length} active operator API token record(s) in Redis are not signed with the token key and are refused (401 unsigned): review them (baton token list) and sign those to keep with baton token sign-existing, or revoke them`,
        { warning: 'token_records_unsigned', token_ids: unsigned.slice(0, 20) },
      );
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.ensureRetry !== null) clearTimeout(this.ensureRetry);
    this.ensureRetry = null;
    await this.revocations?.stopFollowing();
  }

  /**
   * Follow the token revocation log (libs/platform/src/auth/token-revocations.ts): while its
   * follower is confirmed caught up, a token's revocation is looked up in memory (no NATS round
   * trip per request); meanwhile each lookup is a direct get on the stream. A follower that cannot
   * start is said once (`token_revocation_follow_failed`) and tried again.
   */
  private followRevocationLog(): void {
    let failedSaid = false;
    this.revocations?.follow({
      connection: this.runtime.nats,
      onEvent: (event) => {
        if (event.kind === 'follow_failed') {
          if (!failedSaid)
            this.runtime.logger.warn(
              `cannot follow the token revocation log (${event.error.message}): each authentication reads it directly (a NATS round trip per request) until it can`,
              { warning: 'token_revocation_follow_failed', reason: event.error.reason },
            );
          failedSaid = true;
        } else if (event.kind === 'memory_full')
          this.runtime.logger.warn(`the token revocation log holds more than ${event.limit} revocations: each authentication reads it directly from now on`, {
            warning: 'token_revocations_over_memory_limit',
          });
        else this.runtime.logger.info(`the token revocation log's follower starts again: ${event.why}`);
      },
    });
  }

  /**
   * Make the token revocation log when it is missing. While it cannot be made or read, every token
   * is refused (503 `revocations_unavailable`): said once (`token_revocation_log_unavailable`) and
   * tried again every {@link REVOCATION_LOG_RETRY_MS}.
   */
  private async ensureRevocationLog(): Promise<void> {
    const log = this.revocations;
    if (log === null) return;
    try {
      await log.ensure();
      if (this.logUnavailableSaid) this.runtime.logger.info('the token revocation log is readable again: operator API tokens are checked against it');
      this.logUnavailableSaid = false;
    } catch (error) {
      if (!this.logUnavailableSaid)
        this.runtime.logger.error(
          `cannot make or read the token revocation log ${tokenRevocationStreamName(this.runtime.config.BATON_PREFIX)}: every operator API token is refused (503 revocations_unavailable) until it can (${(error as Error).message})`,
          { warning: 'token_revocation_log_unavailable' },
        );
      this.logUnavailableSaid = true;
      this.ensureRetry = setTimeout(() => {
        this.ensureRetry = null;
        void this.ensureRevocationLog();
      }, REVOCATION_LOG_RETRY_MS);
      this.ensureRetry.unref();
    }
  }

  /**
   * For readiness (`revocations`): whether a token could be checked against the token revocation log
   * now. While it cannot, every operator token is refused (503 `revocations_unavailable`), so the
   * notifier serves nobody through its API and must not be taken for ready — the case of a notifier
   * started with credentials that may not read the log (an upgrade that did not reissue them). True
   * without a token key (no log). The probe asks the log about a token id that never exists: no
   * round trip while its follower is caught up, one read of the stream otherwise; its answer is kept
   * {@link REVOCATION_PROBE_CACHE_MS}.
   */
  async revocationsReadable(now = Date.now()): Promise<boolean> {
    const log = this.revocations;
    if (log === null) return true;
    if (this.logUnavailableSaid) return false;
    if (this.probed !== null && now - this.probed.at < REVOCATION_PROBE_CACHE_MS) return this.probed.ok;
    const ok = await log.revokedAt(REVOCATION_PROBE_TOKEN_ID).then(
      () => true,
      () => false,
    );
    this.probed = { at: now, ok };
    return ok;
  }

  /** The bearer token of a request, or null when it sends none. */
  bearerOf(req: HttpRequest): string | null {
    const header = req.headers.authorization;
    if (typeof header !== 'string') return null;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    return match ? (match[1] as string) : '';
  }

  /** Authenticate by bearer token only. Null when absent or invalid. */
  async byToken(req: HttpRequest): Promise<Principal | null> {
    const bearer = this.bearerOf(req);
    return bearer ? this.tokens.verify(bearer) : null;
  }

  /** Authenticate by session cookie only. Null when absent, expired or revoked. */
  async bySession(req: HttpRequest): Promise<Session | null> {
    const id = parseCookies(req.headers.cookie)[SESSION_COOKIE];
    return id ? this.sessions.read(id) : null;
  }

  /**
   * {@link bySession}, telling an outage apart: `unavailable` when the session's token verifies but
   * the token revocation log cannot be read now (the web console shows "try again shortly", not
   * the sign-in page).
   */
  async sessionOf(req: HttpRequest): Promise<Session | null | 'unavailable'> {
    const id = parseCookies(req.headers.cookie)[SESSION_COOKIE];
    if (!id) return null;
    const found = await this.sessions.lookup(id);
    if (found.ok) return found.session;
    return found.reason === 'revocations_unavailable' ? 'unavailable' : null;
  }

  /** Bearer token first, then the session cookie. Null when neither authenticates. */
  async authenticate(req: HttpRequest, options: { allowSession: boolean }): Promise<Authentication | null> {
    const attempt = await this.attempt(req, options);
    return attempt.ok ? attempt.auth : null;
  }

  /** {@link authenticate}, saying why a request does not authenticate. */
  async attempt(req: HttpRequest, options: { allowSession: boolean }): Promise<AuthAttempt> {
    const bearer = this.bearerOf(req);
    if (bearer !== null) {
      const checked = await this.tokens.check(bearer);
      return checked.ok ? { ok: true, auth: { principal: checked.principal, session: null } } : { ok: false, presented: true, reason: checked.reason };
    }
    if (!options.allowSession) return { ok: false, presented: false, reason: 'missing' };
    const id = parseCookies(req.headers.cookie)[SESSION_COOKIE];
    if (!id) return { ok: false, presented: false, reason: 'missing' };
    const found = await this.sessions.lookup(id);
    if (found.ok) return { ok: true, auth: { principal: found.session.principal, session: found.session } };
    return { ok: false, presented: false, reason: found.reason === 'revocations_unavailable' ? 'revocations_unavailable' : 'session' };
  }
}
