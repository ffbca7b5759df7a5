import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { AuthKeys, type TokenStore } from './token-store';
import type { Principal } from './roles';

const SessionSchema = z.strictObject({ token_id: z.string().min(1), csrf: z.string().min(1), created_at: z.string() });

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
 * the token, so revoking a token ends its sessions too.
 */
export class SessionStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly tokens: TokenStore,
    private readonly ttlSec: number,
  ) {}

  /** Open a session for an authenticated token. The id goes into the cookie; only its hash is stored. */
  async create(principal: Principal, now: string): Promise<{ id: string; csrf: string }> {
    const id = randomBytes(32).toString('base64url');
    const csrf = randomBytes(32).toString('base64url');
    const body = JSON.stringify({ token_id: principal.tokenId, csrf, created_at: now });
    await this.redis.set(AuthKeys.session(this.prefix, sessionHash(id)), body, 'EX', this.ttlSec);
    return { id, csrf };
  }

  /** The session behind a cookie value, or null (unknown, expired, or its token revoked). */
  async read(id: string): Promise<Session | null> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(id)) return null;
    const raw = await this.redis.get(AuthKeys.session(this.prefix, sessionHash(id)));
    if (raw === null) return null;
    let parsed;
    try {
      parsed = SessionSchema.safeParse(JSON.parse(raw));
    } catch {
      return null;
    }
    if (!parsed.success) return null;
    const principal = await this.tokens.principalOf(parsed.data.token_id, 'session');
    return principal ? { id, principal, csrf: parsed.data.csrf } : null;
  }

  /** End a session (idempotent). */
  async destroy(id: string): Promise<void> {
    await this.redis.del(AuthKeys.session(this.prefix, sessionHash(id)));
  }
}
