import { Inject, Injectable } from '@nestjs/common';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';
import { parseCookies, SESSION_COOKIE } from './cookies';
import type { HttpRequest } from './http-types';
import type { Principal } from './roles';
import { SessionStore, type Session } from './session-store';
import { TokenStore, type TokenRefusal } from './token-store';

/** How a request authenticated. */
export type Authentication = { principal: Principal; session: Session | null };

/**
 * The outcome of authenticating a request: who, or why not. `presented` is true when the request
 * sent credentials that failed (a bearer token; a failed one counts towards the address's limit),
 * false when it sent none that count (no Authorization header; an expired or unknown session
 * cookie).
 */
export type AuthAttempt = { ok: true; auth: Authentication } | { ok: false; presented: boolean; reason: TokenRefusal | 'missing' | 'session' };

/**
 * Authenticates requests: `Authorization: Bearer <token>` (the JSON API, the CLI, scripts) or the
 * browser session cookie (the web inbox). Tokens and sessions live in the notifier's Redis under
 * `<BATON_PREFIX>:auth:` (see token-store.ts). Authentication is always on.
 */
@Injectable()
export class AuthService {
  readonly tokens: TokenStore;
  readonly sessions: SessionStore;

  constructor(
    @Inject(RUNTIME) runtime: ServiceRuntime,
    @Inject(NOTIFIER_CONFIG) readonly config: NotifierConfig,
  ) {
    if (!runtime.redis) throw new Error('the notifier needs Redis (REDIS_URL) for its tokens and sessions');
    this.tokens = new TokenStore(runtime.redis.client, runtime.config.BATON_PREFIX);
    this.sessions = new SessionStore(runtime.redis.client, runtime.config.BATON_PREFIX, this.tokens, config.NOTIFIER_SESSION_TTL_SEC);
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
    const session = await this.bySession(req);
    return session
      ? { ok: true, auth: { principal: session.principal, session } }
      : { ok: false, presented: false, reason: parseCookies(req.headers.cookie)[SESSION_COOKIE] ? 'session' : 'missing' };
  }
}
