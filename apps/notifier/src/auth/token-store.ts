import type { Redis } from 'ioredis';
import { z } from 'zod';
import { ActorNameSchema, IsoTimeSchema, ProjectIdSchema } from '@baton/contracts';
import {
  API_TOKEN_HASH_PATTERN,
  API_TOKEN_ID_PATTERN,
  API_TOKEN_SALT_PATTERN,
  ApiTokenKeys,
  apiTokenExpired,
  mintApiToken,
  parseApiToken,
  tokenSecretMatches,
  type ApiTokenRecord,
} from '@baton/platform';
import { ALL_PROJECTS, RoleSchema, type Principal, type ProjectScope, type Role } from './roles';

/**
 * Operator API tokens, stored hashed in Redis under the deployment's prefix. The format (the
 * token string, the salted hash, the record and its keys) is libs/platform/src/auth/api-token.ts,
 * shared with `baton token create` (apps/cli/src/commands/token.ts), which writes tokens straight
 * to Redis; the browser suite authenticates with a CLI-made token against this store. Salted
 * SHA-256 rather than scrypt: the secret is 256 random bits, and scrypt would only add latency to
 * every request.
 */

/** A stored record as the notifier accepts it: the shared record shape, validated. */
export const TokenRecordSchema = z.strictObject({
  token_id: z.string().regex(API_TOKEN_ID_PATTERN),
  name: ActorNameSchema,
  role: RoleSchema,
  projects: z.union([z.literal(ALL_PROJECTS), z.array(ProjectIdSchema).min(1).max(100)]),
  salt: z.string().regex(API_TOKEN_SALT_PATTERN),
  hash: z.string().regex(API_TOKEN_HASH_PATTERN),
  created_at: IsoTimeSchema,
  created_by: z.string().min(1).max(200).optional(),
  revoked_at: IsoTimeSchema.nullable(),
  /** When the token stops authenticating (absent or null: never). */
  expires_at: IsoTimeSchema.nullable().optional(),
}) satisfies z.ZodType<ApiTokenRecord>;
export type TokenRecord = z.infer<typeof TokenRecordSchema>;

/** A token as listed: everything but the salt and hash. */
export type TokenInfo = Omit<TokenRecord, 'salt' | 'hash'>;

/** The Redis keys of the auth data of a deployment. */
export const AuthKeys = {
  ...ApiTokenKeys,
  /** Keyed by sha256 of the session id, so a Redis dump holds no live session cookie. */
  session: (prefix: string, sessionHash: string) => `${prefix}:auth:session:${sessionHash}`,
} as const;

export interface CreateTokenInput {
  name: string;
  role: Role;
  projects: ProjectScope;
  createdBy?: string;
  now: string;
  /** When the token stops authenticating (ISO time, after `now`); absent = never. */
  expiresAt?: string;
}

/**
 * Why a presented token does not authenticate (for the log; the caller only ever hears 401):
 * not a token at all, no such record, a record outside the token set (written by something other
 * than `baton token create`), revoked, expired, or a wrong secret.
 */
export type TokenRefusal = 'malformed' | 'unknown' | 'not_in_token_set' | 'revoked' | 'expired' | 'secret_mismatch';

/** What {@link TokenStore.check} found: the principal, or why not. */
export type TokenCheck = { ok: true; principal: Principal } | { ok: false; reason: TokenRefusal; tokenId?: string };

/** Thrown by {@link TokenStore.create} when the input breaks the rules (e.g. a viewer with no project). */
export class TokenInputError extends Error {
  override name = 'TokenInputError';
}

/** Create, verify, list and revoke operator tokens (see the module comment for the format). */
export class TokenStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /**
   * Mint a token and store its hash. Returns the token (shown once; only its hash is kept) and its
   * record. Viewers and operators need at least one project or `*`; admins are always `*`.
   * @throws TokenInputError on a bad name, role or project list.
   */
  async create(input: CreateTokenInput): Promise<{ token: string; info: TokenInfo }> {
    const minted = mintApiToken();
    const projects = input.role === 'admin' ? ALL_PROJECTS : input.projects;
    if (input.expiresAt !== undefined && !(Date.parse(input.expiresAt) > Date.parse(input.now)))
      throw new TokenInputError('expires_at: must be after the creation time');
    const parsed = TokenRecordSchema.safeParse({
      token_id: minted.tokenId,
      name: input.name,
      role: input.role,
      projects: projects === ALL_PROJECTS ? ALL_PROJECTS : [...new Set(projects)],
      salt: minted.salt,
      hash: minted.hash,
      created_at: input.now,
      ...(input.createdBy !== undefined ? { created_by: input.createdBy } : {}),
      revoked_at: null,
      ...(input.expiresAt !== undefined ? { expires_at: new Date(Date.parse(input.expiresAt)).toISOString() } : {}),
    });
    if (!parsed.success) throw new TokenInputError(parsed.error.issues.map((i) => `${i.path.join('.') || 'token'}: ${i.message}`).join('; '));
    await this.redis
      .multi()
      .set(AuthKeys.token(this.prefix, minted.tokenId), JSON.stringify(parsed.data), 'NX')
      .sadd(AuthKeys.tokens(this.prefix), minted.tokenId)
      .exec();
    return { token: minted.token, info: infoOf(parsed.data) };
  }

  /**
   * The principal a presented token authenticates, or null when it is malformed, unknown, not in
   * the token set, revoked, expired or its secret does not match (compared in constant time).
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
    if (!found.ok) return found;
    if (!tokenSecretMatches(found.record.salt, parts.secret, found.record.hash)) return { ok: false, reason: 'secret_mismatch', tokenId: parts.tokenId };
    return { ok: true, principal: principalOf(found.record, 'token') };
  }

  /**
   * The principal of a token id that is still valid: in the token set, not revoked, not expired
   * (sessions and live streams re-check their token with it).
   */
  async principalOf(tokenId: string, via: Principal['via'], nowMs = Date.now()): Promise<Principal | null> {
    const found = await this.valid(tokenId, nowMs);
    return found.ok ? principalOf(found.record, via) : null;
  }

  /** The record of a token id that may authenticate, or why it may not (the secret is not checked here). */
  private async valid(tokenId: string, nowMs: number): Promise<{ ok: true; record: TokenRecord } | { ok: false; reason: TokenRefusal; tokenId: string }> {
    const [record, member] = await Promise.all([this.get(tokenId), this.redis.sismember(AuthKeys.tokens(this.prefix), tokenId)]);
    if (!record) return { ok: false, reason: 'unknown', tokenId };
    // Only `create` (and `baton token create`) add a token to the set, in the same transaction as
    // its record: a record that is not in it was written some other way, and is not trusted.
    if (member !== 1) return { ok: false, reason: 'not_in_token_set', tokenId };
    if (record.revoked_at !== null) return { ok: false, reason: 'revoked', tokenId };
    if (apiTokenExpired(record, nowMs)) return { ok: false, reason: 'expired', tokenId };
    return { ok: true, record };
  }

  /** The stored record, or null. A record that does not parse counts as absent (fail closed). */
  async get(tokenId: string): Promise<TokenRecord | null> {
    const raw = await this.redis.get(AuthKeys.token(this.prefix, tokenId));
    if (raw === null) return null;
    try {
      const parsed = TokenRecordSchema.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }

  /** Every token (without salts and hashes), oldest first. */
  async list(): Promise<TokenInfo[]> {
    const ids = await this.redis.smembers(AuthKeys.tokens(this.prefix));
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records
      .filter((r): r is TokenRecord => r !== null)
      .map(infoOf)
      .sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  /** Revoke a token; idempotent (the first revocation time stands). Returns false for an unknown id. */
  async revoke(tokenId: string, now: string): Promise<boolean> {
    const record = await this.get(tokenId);
    if (!record) return false;
    if (record.revoked_at === null) await this.redis.set(AuthKeys.token(this.prefix, tokenId), JSON.stringify({ ...record, revoked_at: now }));
    return true;
  }
}

function infoOf(record: TokenRecord): TokenInfo {
  const { salt: _salt, hash: _hash, ...info } = record;
  return info;
}

function principalOf(record: TokenRecord, via: Principal['via']): Principal {
  return { tokenId: record.token_id, name: record.name, role: record.role, projects: record.projects, via };
}
