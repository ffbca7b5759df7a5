import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { ActorNameSchema, IsoTimeSchema, ProjectIdSchema } from '@baton/contracts';
import { ALL_PROJECTS, RoleSchema, type Principal, type ProjectScope, type Role } from './roles';

/**
 * Operator API tokens, stored hashed in Redis under the deployment's prefix.
 *
 * A token reads `bt_<id>_<secret>`: `id` is 16 hex characters (the lookup key, not secret),
 * `secret` 32 random bytes in base64url. Redis keeps, per token, `<prefix>:auth:token:<id>` =
 * JSON {@link TokenRecord} holding a random salt and `sha256(salt ":" secret)`, never the secret.
 * A salted SHA-256 suffices because the secret is 256 random bits (nothing to brute-force, unlike
 * a password); scrypt would only add latency to every request. `<prefix>:auth:tokens` is the set of
 * token ids. `baton token create` (apps/cli/src/commands/token.ts) writes the same format — keep
 * the two in step; the browser suite authenticates with a CLI-made token against this store.
 */

export const TOKEN_PATTERN = /^bt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

export const TokenRecordSchema = z.strictObject({
  token_id: z.string().regex(/^[0-9a-f]{16}$/),
  name: ActorNameSchema,
  role: RoleSchema,
  projects: z.union([z.literal(ALL_PROJECTS), z.array(ProjectIdSchema).min(1).max(100)]),
  salt: z.string().regex(/^[0-9a-f]{32}$/),
  hash: z.string().regex(/^[0-9a-f]{64}$/),
  created_at: IsoTimeSchema,
  created_by: z.string().min(1).max(200).optional(),
  revoked_at: IsoTimeSchema.nullable(),
});
export type TokenRecord = z.infer<typeof TokenRecordSchema>;

/** A token as listed: everything but the salt and hash. */
export type TokenInfo = Omit<TokenRecord, 'salt' | 'hash'>;

/** The Redis keys of the auth data of a deployment. */
export const AuthKeys = {
  token: (prefix: string, tokenId: string) => `${prefix}:auth:token:${tokenId}`,
  tokens: (prefix: string) => `${prefix}:auth:tokens`,
  /** Keyed by sha256 of the session id, so a Redis dump holds no live session cookie. */
  session: (prefix: string, sessionHash: string) => `${prefix}:auth:session:${sessionHash}`,
} as const;

/** `sha256(salt ":" secret)` in hex. */
export function hashTokenSecret(salt: string, secret: string): string {
  return createHash('sha256').update(`${salt}:${secret}`).digest('hex');
}

export interface CreateTokenInput {
  name: string;
  role: Role;
  projects: ProjectScope;
  createdBy?: string;
  now: string;
}

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
    const tokenId = randomBytes(8).toString('hex');
    const secret = randomBytes(32).toString('base64url');
    const salt = randomBytes(16).toString('hex');
    const projects = input.role === 'admin' ? ALL_PROJECTS : input.projects;
    const parsed = TokenRecordSchema.safeParse({
      token_id: tokenId,
      name: input.name,
      role: input.role,
      projects: projects === ALL_PROJECTS ? ALL_PROJECTS : [...new Set(projects)],
      salt,
      hash: hashTokenSecret(salt, secret),
      created_at: input.now,
      ...(input.createdBy !== undefined ? { created_by: input.createdBy } : {}),
      revoked_at: null,
    });
    if (!parsed.success) throw new TokenInputError(parsed.error.issues.map((i) => `${i.path.join('.') || 'token'}: ${i.message}`).join('; '));
    await this.redis.multi().set(AuthKeys.token(this.prefix, tokenId), JSON.stringify(parsed.data), 'NX').sadd(AuthKeys.tokens(this.prefix), tokenId).exec();
    return { token: `bt_${tokenId}_${secret}`, info: infoOf(parsed.data) };
  }

  /**
   * The principal a presented token authenticates, or null when it is malformed, unknown, revoked
   * or its secret does not match (compared in constant time). Reads Redis on every call, so a
   * revocation takes effect at once.
   */
  async verify(presented: string): Promise<Principal | null> {
    const match = TOKEN_PATTERN.exec(presented.trim());
    if (!match) return null;
    const [, tokenId, secret] = match as unknown as [string, string, string];
    const record = await this.get(tokenId);
    if (!record || record.revoked_at !== null) return null;
    const expected = Buffer.from(record.hash, 'hex');
    const actual = Buffer.from(hashTokenSecret(record.salt, secret), 'hex');
    if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) return null;
    return principalOf(record, 'token');
  }

  /** The principal of a token id that is still valid (sessions re-check their token on every request). */
  async principalOf(tokenId: string, via: Principal['via']): Promise<Principal | null> {
    const record = await this.get(tokenId);
    return record && record.revoked_at === null ? principalOf(record, via) : null;
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
