import { Inject, Injectable } from '@nestjs/common';
import { RUNTIME, type ServiceRuntime } from '@baton/platform';
import { NOTIFIER_CONFIG, type NotifierConfig } from '../notifier.config';
import { parseCookies, SESSION_COOKIE } from './cookies';
import type { HttpRequest } from './http-types';
import type { Principal } from './roles';
import { SessionStore, type Session } from './session-store';
import { TokenStore } from './token-store';

/** How a request authenticated. */
export type Authentication = { principal: Principal; session: Session | null };

/**
 * Authenticates requests: `Authorization: Bearer <token>` (the JSON API, the CLI, scripts) or the
 * browser session cookie (the web inbox). Tokens and sessions live in the notifier's Redis under
 * `<BATON_PREFIX>:auth:` (see token-store.ts). Authentication is always on.
 */
@Injectable()
export class AuthService {
  readonly tokens: TokenStore;
  readonly sessions: SessionStore;

  constructor(@Inject(RUNTIME) runtime: ServiceRuntime, @Inject(NOTIFIER_CONFIG) readonly config: NotifierConfig) {
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
    if (this.bearerOf(req) !== null) {
      const principal = await this.byToken(req);
      return principal ? { principal, session: null } : null;
    }
    if (!options.allowSession) return null;
    const session = await this.bySession(req);
    return session ? { principal: session.principal, session } : null;
  }
}
