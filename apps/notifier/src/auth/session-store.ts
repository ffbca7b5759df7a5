import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { sessionRecordMac, sessionRecordMacValid, TOKEN_MAC_PATTERN, type TokenKey } from '@baton/platform';
import { AuthKeys, type TokenStore } from './token-store';
import type { Principal } from './roles';

const SessionSchema = z.strictObject({
  token_id: z.string().min(1),
  csrf: z.string().min(1),
  created_at: z.string(),
  /** HMAC-SHA256 under the deployment's token key (`sessionRecordMac`), when the notifier holds one. */
  mac: z.string().regex(TOKEN_MAC_PATTERN).optional(),
});

/** A live browser session: who it authenticates and the CSRF token its forms must carry. */
export interface Session {
  id: string;
  principal: Principal;
  csrf: string;
}

const sessionHash = (id: string) => createHash('sha256').update(id).digest('hex');

/** Constant-time string equality (false on any length difference). */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * Browser sessions in Redis (`<prefix>:auth:session:<sha256(id)>`, expiring after the TTL). A
 * session remembers the token that opened it and a synchronizer CSRF token; every read re-checks
 * the token, so revoking a token ends its sessions too. With the deployment's token key, a session
 * is signed (bound to its key, its token and its CSRF token) and one that is not — written into
 * Redis by anything but this notifier, say for an admin's token id — is no session.
 */
export class SessionStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly tokens: TokenStore,
    private readonly ttlSec: number,
    private readonly key: TokenKey | null = null,
  ) {}

  /**
   * Open a session for an authenticated token. The id goes into the cookie; only its hash is stored.
   * The id is always new; the CSRF token is new too, unless `csrf` carries over the one of the
   * session this browser already holds for the same token (a second sign-in from another tab: see
   * `WebController.login`), so the pages that browser has open keep posting.
   */
  async create(principal: Principal, now: string, options: { csrf?: string } = {}): Promise<{ id: string; csrf: string }> {
    const id = randomBytes(32).toString('base64url');
    const csrf = options.csrf ?? randomBytes(32).toString('base64url');
    const hash = sessionHash(id);
    const fields = { token_id: principal.tokenId, csrf, created_at: now };
    const mac = this.key === null ? undefined : sessionRecordMac(this.key, this.prefix, { session_hash: hash, ...fields });
    await this.redis.set(AuthKeys.session(this.prefix, hash), JSON.stringify({ ...fields, ...(mac !== undefined ? { mac } : {}) }), 'EX', this.ttlSec);
    return { id, csrf };
  }

  /** The session behind a cookie value, or null (unknown, expired, or its token revoked; or the revocation log unreadable now). */
  async read(id: string): Promise<Session | null> {
    const found = await this.lookup(id);
    return found.ok ? found.session : null;
  }

  /**
   * {@link read}, saying why not: `revocations_unavailable` when the session and its token's record
   * verify but the token revocation log cannot be read now (an outage: the session is not ended),
   * `ended` otherwise.
   */
  async lookup(id: string): Promise<{ ok: true; session: Session } | { ok: false; reason: 'ended' | 'revocations_unavailable' }> {
    const ended = { ok: false, reason: 'ended' } as const;
    if (!/^[A-Za-z0-9_-]{43}$/.test(id)) return ended;
    const hash = sessionHash(id);
    const raw = await this.redis.get(AuthKeys.session(this.prefix, hash));
    if (raw === null) return ended;
    let parsed;
    try {
      parsed = SessionSchema.safeParse(JSON.parse(raw));
    } catch {
      return ended;
    }
    if (!parsed.success) return ended;
    const { mac, ...fields } = parsed.data;
    if (this.key !== null && !sessionRecordMacValid(this.key, this.prefix, { session_hash: hash, ...fields }, mac)) return ended;
    const found = await this.tokens.principalCheck(parsed.data.token_id, 'session');
    if (found.ok) return { ok: true, session: { id, principal: found.principal, csrf: parsed.data.csrf } };
    return found.reason === 'revocations_unavailable' ? { ok: false, reason: 'revocations_unavailable' } : ended;
  }

  /** End a session (idempotent). */
  async destroy(id: string): Promise<void> {
    await this.redis.del(AuthKeys.session(this.prefix, sessionHash(id)));
  }
}
