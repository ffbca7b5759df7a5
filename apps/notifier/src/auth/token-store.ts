import { ApiTokenKeys, ApiTokenStore, parseApiToken, tokenSecretMatches, type ApiTokenRecord, type ApiTokenRefusal } from '@baton/platform';
import type { Principal } from './roles';

/**
 * Operator API tokens as the notifier checks them: the store is @baton/platform's ApiTokenStore
 * (libs/platform/src/auth/api-token-store.ts, the one reader and writer of token records, which
 * `baton token create / list / revoke` use too; the browser suite authenticates with a CLI-made
 * token against it); this class adds what only the notifier needs — the principal a presented
 * token authenticates. Salted SHA-256 rather than scrypt: the secret is 256 random bits, and
 * scrypt would only add latency to every request.
 */

/** The Redis keys of the auth data of a deployment. */
export const AuthKeys = {
  ...ApiTokenKeys,
  /** Keyed by sha256 of the session id, so a Redis dump holds no live session cookie. */
  session: (prefix: string, sessionHash: string) => `${prefix}:auth:session:${sessionHash}`,
} as const;

/** Why a presented token does not authenticate (for the log; the caller hears 401 with {@link publicRefusal}, or 503 `revocations_unavailable`). */
export type TokenRefusal = ApiTokenRefusal;

/**
 * What a 401 tells the caller in `details.reason`: `missing` (no credentials), `malformed` (not a
 * `bt_<id>_<secret>` token), `unknown` (no such token, or a wrong secret: which of the two is not
 * said), `unsigned` (the token's record in Redis is not signed with the deployment's token key, or
 * its signature does not verify: written without the key, or altered), `expired`, `revoked` (these
 * three said only when the secret matched; `revoked` also when the token's record in Redis says it
 * is active but the deployment's token revocation log says it was revoked: an earlier record put
 * back), `session_ended` (a browser session cookie that is no longer valid). Not a 401:
 * `revocations_unavailable` (the token revocation log could not be read, so no token is believed:
 * fail closed; said only when the secret matched, or to a session whose token verifies) is an
 * outage, answered 503 with `Retry-After` and that code (auth.guard.ts `revocationsUnavailable`).
 */
export type PublicAuthRefusal = 'missing' | 'malformed' | 'unknown' | 'unsigned' | 'expired' | 'revoked' | 'session_ended';

export function publicRefusal(reason: Exclude<TokenRefusal, 'revocations_unavailable'> | 'missing' | 'session'): PublicAuthRefusal {
  switch (reason) {
    case 'missing':
    case 'malformed':
    case 'expired':
    case 'revoked':
      return reason;
    case 'revocation_rolled_back':
      return 'revoked';
    case 'session':
      return 'session_ended';
    case 'unsigned':
    case 'signature_mismatch':
      return 'unsigned';
    case 'unknown':
    case 'not_in_token_set':
    case 'secret_mismatch':
      return 'unknown';
  }
}

/** What {@link TokenStore.check} found: the principal, or why not. */
export type TokenCheck = { ok: true; principal: Principal } | { ok: false; reason: TokenRefusal; tokenId?: string };

/**
 * Create, list and revoke operator tokens (ApiTokenStore), and verify presented ones. Given the
 * deployment's token key (`BATON_TOKEN_KEY_FILE`), only records signed with it authenticate.
 */
export class TokenStore extends ApiTokenStore {
  /**
   * The principal a presented token authenticates, or null when it is malformed, unknown, not in
   * the token set, unsigned (with a key), revoked, expired or its secret does not match (compared in constant time).
   * Reads Redis on every call, so a revocation takes effect at once.
   */
  async verify(presented: string): Promise<Principal | null> {
    const checked = await this.check(presented);
    return checked.ok ? checked.principal : null;
  }

  /** {@link verify}, saying why a token does not authenticate (for the log). */
  async check(presented: string, nowMs = Date.now()): Promise<TokenCheck> {
    const parts = parseApiToken(presented);
    if (!parts) return { ok: false, reason: 'malformed' };
    const found = await this.valid(parts.tokenId, nowMs);
    if (!found.ok) {
      // Unsigned, revoked or expired is said only to whoever holds the secret: with a wrong one the
      // id is as good as unknown (the 401's `details.reason` must not tell a guesser what an id is).
      if (['revoked', 'revocation_rolled_back', 'revocations_unavailable', 'expired', 'unsigned', 'signature_mismatch'].includes(found.reason)) {
        const record = await this.get(parts.tokenId);
        if (!record || !tokenSecretMatches(record.salt, parts.secret, record.hash)) return { ok: false, reason: 'secret_mismatch', tokenId: parts.tokenId };
      }
      return found;
    }
    if (!tokenSecretMatches(found.record.salt, parts.secret, found.record.hash)) return { ok: false, reason: 'secret_mismatch', tokenId: parts.tokenId };
    return { ok: true, principal: principalOf(found.record, 'token') };
  }

  /**
   * The principal of a token id that is still valid: in the token set, signed (with a key), not
   * revoked, not expired (sessions and live streams re-check their token with it).
   */
  async principalOf(tokenId: string, via: Principal['via'], nowMs = Date.now()): Promise<Principal | null> {
    const found = await this.principalCheck(tokenId, via, nowMs);
    return found.ok ? found.principal : null;
  }

  /** {@link principalOf}, saying why not (`revocations_unavailable`: an outage, not a revocation). */
  async principalCheck(tokenId: string, via: Principal['via'], nowMs = Date.now()): Promise<TokenCheck> {
    const found = await this.valid(tokenId, nowMs);
    return found.ok ? { ok: true, principal: principalOf(found.record, via) } : found;
  }
}

function principalOf(record: ApiTokenRecord, via: Principal['via']): Principal {
  return { tokenId: record.token_id, name: record.name, role: record.role, projects: record.projects, via };
}
