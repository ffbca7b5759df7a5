import { CanActivate, createParamDecorator, ExecutionContext, HttpStatus, Inject, Injectable } from '@nestjs/common';
import { raiseDeferredBodyError, RUNTIME, type ServiceRuntime } from '@baton/platform';
import { ApiError } from '../api/http';
import { AuthFailureLimiter, clientAddress } from './auth-failures';
import { AuthService } from './auth.service';
import type { HttpRequest } from './http-types';
import type { Principal } from './roles';
import { publicRefusal, type PublicAuthRefusal } from './token-store';

/** What each 401 says (`details.reason` is the code a client switches on). */
const UNAUTHENTICATED_HINTS: Record<PublicAuthRefusal, string> = {
  missing: 'send Authorization: Bearer <token> (create one with `baton token create`)',
  malformed: 'the bearer token is not a Baton token (bt_<id>_<secret>, as `baton token create` printed it)',
  unknown: 'the bearer token is not one of this deployment (`baton token list` shows its tokens; create one with `baton token create`)',
  unsigned:
    "the bearer token's record is not signed with this deployment's token key (made without the key, or altered): the admin signs the tokens to keep with `baton token sign-existing`, or makes a new one with `baton token create`",
  expired: 'the bearer token has expired (`baton token create` makes a new one)',
  revoked: 'the bearer token was revoked (`baton token create` makes a new one)',
  // A browser whose session ended (signed out, its token revoked or expired) signs in again.
  session_ended: 'the session has ended (signed out, or its token revoked or expired): sign in again at /login',
};

/** Seconds a client waits before trying again while the token revocation log cannot be read (the `Retry-After` of the 503). */
export const REVOCATIONS_RETRY_AFTER_SEC = 2;

/**
 * The answer while the deployment's token revocation log cannot be read (NATS down or slow, the
 * stream missing): 503 `revocations_unavailable` with `Retry-After`. An outage, not bad
 * credentials: the client keeps its token and tries again. Said only to a caller whose token's
 * record verifies and whose secret matches (or whose session's token does); anyone else hears 401.
 */
export function revocationsUnavailable(): ApiError {
  return new ApiError(
    HttpStatus.SERVICE_UNAVAILABLE,
    'revocations_unavailable',
    "the deployment's token revocation log (a JetStream stream) cannot be read just now, so no token can be checked: keep the token and try again after Retry-After; the notifier's log says why (token_revocation_log_unavailable)",
    [],
    { retry_after_sec: REVOCATIONS_RETRY_AFTER_SEC },
  );
}

/**
 * Guards the JSON API (`/v1/...`). Every request must authenticate: `Authorization: Bearer
 * <token>`, or — for GET requests only (reads and the event stream the inbox page opens) — the
 * browser session cookie. A POST never authenticates by cookie alone, so the JSON API needs no
 * CSRF token; browser forms post to the web routes, which check one. 401 `unauthenticated`
 * otherwise (with `WWW-Authenticate: Bearer`), saying why in `details.reason` ({@link publicRefusal}:
 * missing, malformed, unknown, unsigned, expired, revoked, session_ended). A bearer token that does not verify is logged with
 * the client address and counted against it ({@link AuthFailureLimiter}; an `unsigned` record, whose
 * secret matched, is not counted): an address over the
 * limit is answered 429 `too_many_auth_failures` with `Retry-After`, whatever it sends. While the
 * token revocation log cannot be read, a token (or session) that would otherwise authenticate is
 * answered 503 `revocations_unavailable` with `Retry-After` ({@link revocationsUnavailable}), not
 * counted as a failure.
 */
@Injectable()
export class ApiAuthGuard implements CanActivate {
  constructor(
    private readonly auth: AuthService,
    private readonly failures: AuthFailureLimiter,
    @Inject(RUNTIME) private readonly runtime: ServiceRuntime,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<HttpRequest>();
    const res = context.switchToHttp().getResponse<{ setHeader(name: string, value: string): void }>();
    const address = clientAddress(req);
    const allowance = this.failures.check(address);
    if (allowance.blocked) {
      res.setHeader('Retry-After', String(allowance.retryAfterSec));
      throw this.failures.refusal(allowance.retryAfterSec);
    }
    const attempt = await this.auth.attempt(req, { allowSession: req.method === 'GET' || req.method === 'HEAD' });
    if (!attempt.ok) {
      if (attempt.reason === 'revocations_unavailable') {
        this.runtime.logger.warn('api authentication deferred: the token revocation log cannot be read', { address, path: req.path });
        res.setHeader('Retry-After', String(REVOCATIONS_RETRY_AFTER_SEC));
        throw revocationsUnavailable();
      }
      // `unsigned` is said only to a caller holding the token's secret (its record predates the
      // token key, or was signed with another): nothing is being guessed, so it does not count —
      // clients still sending such tokens between an upgrade and `sign-existing` lock nobody out.
      if (attempt.presented) {
        const count = attempt.reason === 'unsigned' ? this.failures.count(address) : this.failures.fail(address);
        this.runtime.logger.warn('api authentication failed', { address, reason: attempt.reason, path: req.path, failures_this_minute: count });
      }
      res.setHeader('WWW-Authenticate', 'Bearer realm="baton"');
      const reason = publicRefusal(attempt.reason);
      throw new ApiError(HttpStatus.UNAUTHORIZED, 'unauthenticated', UNAUTHENTICATED_HINTS[reason], [], { reason });
    }
    req.principal = attempt.auth.principal;
    if (attempt.auth.session) req.session = attempt.auth.session;
    // The body's refusal, kept until the caller was known (a 401 comes first).
    raiseDeferredBodyError(req);
    return true;
  }
}

/** The authenticated caller (set by {@link ApiAuthGuard} or the web guard). */
export const Caller = createParamDecorator((_data: unknown, context: ExecutionContext): Principal => {
  const principal = context.switchToHttp().getRequest<HttpRequest>().principal;
  if (!principal) throw new ApiError(HttpStatus.UNAUTHORIZED, 'unauthenticated', 'not authenticated');
  return principal;
});
