import type { Redis } from 'ioredis';
import { z } from 'zod';
import { ADMIN_ACTOR, ActorNameSchema, IsoTimeSchema, ProjectIdSchema, ServiceActors } from '@baton/contracts';
import {
  API_TOKEN_HASH_PATTERN,
  API_TOKEN_ID_PATTERN,
  API_TOKEN_ROLES,
  API_TOKEN_SALT_PATTERN,
  ApiTokenKeys,
  apiTokenExpired,
  mintApiToken,
  type ApiTokenRecord,
  type ApiTokenRole,
} from './api-token';

/**
 * The one reader and writer of a deployment's operator API tokens in Redis (the format is
 * api-token.ts): `baton token create / list / revoke` and the notifier, which also verifies
 * presented tokens with it (apps/notifier/src/auth/token-store.ts adds the principal on top).
 */

/** Every project, as a token's scope. */
export const ALL_TOKEN_PROJECTS = '*';
export type ApiTokenScope = readonly string[] | typeof ALL_TOKEN_PROJECTS;

/** A stored record as Baton accepts it: the record shape, validated (a record that fails it counts as absent). */
export const ApiTokenRecordSchema = z.strictObject({
  token_id: z.string().regex(API_TOKEN_ID_PATTERN),
  name: ActorNameSchema,
  role: z.enum(API_TOKEN_ROLES),
  projects: z.union([z.literal(ALL_TOKEN_PROJECTS), z.array(ProjectIdSchema).min(1).max(100)]),
  salt: z.string().regex(API_TOKEN_SALT_PATTERN),
  hash: z.string().regex(API_TOKEN_HASH_PATTERN),
  created_at: IsoTimeSchema,
  created_by: z.string().min(1).max(200).optional(),
  revoked_at: IsoTimeSchema.nullable(),
  /** When the token stops authenticating (absent or null: never). */
  expires_at: IsoTimeSchema.nullable().optional(),
}) satisfies z.ZodType<ApiTokenRecord>;

/** A token as listed: everything but the salt and hash. */
export type ApiTokenInfo = Omit<ApiTokenRecord, 'salt' | 'hash'>;

export interface CreateApiTokenInput {
  name: string;
  role: ApiTokenRole;
  /** The projects the token may use, or `*`; admins are always `*`. */
  projects: ApiTokenScope;
  createdBy?: string;
  /** The creation time (ISO). */
  now: string;
  /** When the token stops authenticating (ISO time, after `now`); absent = never. */
  expiresAt?: string;
  /**
   * What to do when an active token (unrevoked, unexpired) already has the name: `refuse` (the
   * default) throws {@link ApiTokenNameError} `token_name_taken`; `rotate` revokes those tokens in
   * the same transaction that stores the new one (`baton token create --rotate`).
   */
  ifNameTaken?: 'refuse' | 'rotate';
}

/**
 * Names no token may carry, because Baton's own actors use them: a token's name is what the
 * timeline, the ledger and the router record as the operator who acted, so a token named like the
 * engine would write entries that read as the engine's. Compared without regard to case. Every
 * name starting `baton-` (the services' actors: `baton-router`, `baton-ledger`, `baton-watchdog`,
 * `baton-notifier`, and the CLI's `baton-cli`), and these: `admin` (what `op.admin` acts as),
 * `system`, `project-client` (a run started by a project's client, apps/router/src/shared/ids.ts),
 * `customer` (the person in a conversation), `engine_fallback`, `operator`, `watchdog`, `router`,
 * `ledger`, `notifier`, `baton`.
 */
export const RESERVED_TOKEN_NAMES: readonly string[] = [
  ...new Set([
    ADMIN_ACTOR,
    ...Object.values(ServiceActors).map((service) => service.actor),
    'baton',
    'system',
    'project-client',
    'customer',
    'engine_fallback',
    'operator',
    'watchdog',
    'router',
    'ledger',
    'notifier',
  ]),
];
/** Every name starting with it is reserved (see {@link RESERVED_TOKEN_NAMES}). */
export const RESERVED_TOKEN_NAME_PREFIX = 'baton-';

/** Whether Baton's own actors use `name` (so no token may carry it). */
export function reservedTokenName(name: string): boolean {
  const lower = name.toLowerCase();
  return lower.startsWith(RESERVED_TOKEN_NAME_PREFIX) || RESERVED_TOKEN_NAMES.includes(lower);
}

/** The typed refusals of a token's name by {@link ApiTokenStore.create}. */
export const ApiTokenNameErrorCode = {
  /** Baton's own actors use the name ({@link RESERVED_TOKEN_NAMES}). */
  reserved: 'token_name_reserved',
  /** An active token (unrevoked, unexpired) has the name already (compared without regard to case); `details.token_ids` names them. */
  taken: 'token_name_taken',
} as const;
export type ApiTokenNameErrorCode = (typeof ApiTokenNameErrorCode)[keyof typeof ApiTokenNameErrorCode];

/** Thrown by {@link ApiTokenStore.create} for a name no new token may carry; nothing is written. */
export class ApiTokenNameError extends Error {
  override name = 'ApiTokenNameError';
  constructor(
    readonly code: ApiTokenNameErrorCode,
    message: string,
    readonly details: { name: string; token_ids?: string[] },
  ) {
    super(message);
  }
}

/** How long one creation holds its name's lock (the check and the write take milliseconds). */
const NAME_LOCK_MS = 10_000;

/**
 * Why a token id does not authenticate: no such record (or one that does not parse), a record
 * outside the token set (written by something other than this store), revoked, or expired.
 * `malformed` and `secret_mismatch` are the verifier's (a presented token that is not one, a
 * wrong secret).
 */
export type ApiTokenRefusal = 'malformed' | 'unknown' | 'not_in_token_set' | 'revoked' | 'expired' | 'secret_mismatch';

/** Which rule a token input breaks (`field` is the record's field, or `token` for the whole). */
export interface ApiTokenInputIssue {
  field: string;
  message: string;
}

/** Thrown by {@link ApiTokenStore.create} when the input breaks the rules (e.g. a viewer with no project). */
export class ApiTokenInputError extends Error {
  override name = 'ApiTokenInputError';
  constructor(readonly issues: readonly ApiTokenInputIssue[]) {
    super(issues.map((issue) => `${issue.field}: ${issue.message}`).join('; '));
  }
}

/** Create, read, list and revoke the tokens of the deployment under `prefix`. */
export class ApiTokenStore {
  constructor(
    protected readonly redis: Redis,
    protected readonly prefix: string,
  ) {}

  /**
   * Mint a token and store its hash (record and token-set membership in one transaction). Returns
   * the token (shown once; only its hash is kept), its record without salt and hash, and the ids
   * of the tokens a rotation revoked. A token's name is the operator's identity: it may not be a
   * name Baton's own actors use, nor one an active token has already (unless `ifNameTaken` is
   * `rotate`); creations of one name are serialized by a lock key (`<prefix>:auth:name-lock:<name>`).
   * @throws ApiTokenInputError on a bad name, role, project list or expiry.
   * @throws ApiTokenNameError `token_name_reserved` / `token_name_taken`.
   */
  async create(input: CreateApiTokenInput): Promise<{ token: string; info: ApiTokenInfo; rotated: string[] }> {
    const minted = mintApiToken();
    const projects = input.role === 'admin' ? ALL_TOKEN_PROJECTS : input.projects;
    if (input.expiresAt !== undefined && !(Date.parse(input.expiresAt) > Date.parse(input.now)))
      throw new ApiTokenInputError([{ field: 'expires_at', message: 'must be after the creation time' }]);
    const parsed = ApiTokenRecordSchema.safeParse({
      token_id: minted.tokenId,
      name: input.name,
      role: input.role,
      projects: projects === ALL_TOKEN_PROJECTS ? ALL_TOKEN_PROJECTS : [...new Set(projects)],
      salt: minted.salt,
      hash: minted.hash,
      created_at: input.now,
      ...(input.createdBy !== undefined ? { created_by: input.createdBy } : {}),
      revoked_at: null,
      ...(input.expiresAt !== undefined ? { expires_at: new Date(Date.parse(input.expiresAt)).toISOString() } : {}),
    });
    if (!parsed.success) throw new ApiTokenInputError(parsed.error.issues.map((i) => ({ field: i.path.join('.') || 'token', message: i.message })));
    const name = parsed.data.name;
    if (reservedTokenName(name))
      throw new ApiTokenNameError(
        ApiTokenNameErrorCode.reserved,
        `"${name}" is a name Baton's own actors use (baton-*, admin, system, project-client…); choose another`,
        {
          name,
        },
      );
    const lock = `${this.prefix}:auth:name-lock:${name.toLowerCase()}`;
    const holder = minted.tokenId;
    if ((await this.redis.set(lock, holder, 'PX', NAME_LOCK_MS, 'NX')) !== 'OK')
      throw new ApiTokenNameError(ApiTokenNameErrorCode.taken, `another token named "${name}" is being created right now`, { name });
    try {
      const holders = await this.activeNamed(name, Date.parse(input.now));
      if (holders.length > 0 && (input.ifNameTaken ?? 'refuse') === 'refuse') {
        const ids = holders.map((r) => r.token_id);
        throw new ApiTokenNameError(
          ApiTokenNameErrorCode.taken,
          `an active token is named "${name}" already (${ids.join(', ')}): a token's name is who acted; revoke it, choose another name, or rotate`,
          { name, token_ids: ids },
        );
      }
      const write = this.redis.multi();
      for (const old of holders) write.set(ApiTokenKeys.token(this.prefix, old.token_id), JSON.stringify({ ...old, revoked_at: input.now }));
      await write
        .set(ApiTokenKeys.token(this.prefix, minted.tokenId), JSON.stringify(parsed.data), 'NX')
        .sadd(ApiTokenKeys.tokens(this.prefix), minted.tokenId)
        .exec();
      return { token: minted.token, info: apiTokenInfo(parsed.data), rotated: holders.map((r) => r.token_id) };
    } finally {
      // Released only by its holder (a lock that outlived NAME_LOCK_MS may be another's now).
      if ((await this.redis.get(lock)) === holder) await this.redis.del(lock);
    }
  }

  /** The active tokens (in the set, unrevoked, unexpired at `nowMs`) whose name is `name`, compared without regard to case. */
  async activeNamed(name: string, nowMs: number): Promise<ApiTokenRecord[]> {
    const lower = name.toLowerCase();
    const ids = await this.redis.smembers(ApiTokenKeys.tokens(this.prefix));
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records.filter((r): r is ApiTokenRecord => r !== null && r.name.toLowerCase() === lower && r.revoked_at === null && !apiTokenExpired(r, nowMs));
  }

  /** The stored record, or null. A record that does not parse counts as absent (fail closed). */
  async get(tokenId: string): Promise<ApiTokenRecord | null> {
    const raw = await this.redis.get(ApiTokenKeys.token(this.prefix, tokenId));
    if (raw === null) return null;
    try {
      const parsed = ApiTokenRecordSchema.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }

  /**
   * The record of a token id that may authenticate — in the token set, not revoked, not expired —
   * or why it may not (the secret is the verifier's to check). Reads Redis on every call, so a
   * revocation takes effect at once.
   */
  async valid(tokenId: string, nowMs: number): Promise<{ ok: true; record: ApiTokenRecord } | { ok: false; reason: ApiTokenRefusal; tokenId: string }> {
    const [record, member] = await Promise.all([this.get(tokenId), this.redis.sismember(ApiTokenKeys.tokens(this.prefix), tokenId)]);
    if (!record) return { ok: false, reason: 'unknown', tokenId };
    // Only `create` adds a token to the set, in the same transaction as its record: a record that
    // is not in it was written some other way, and is not trusted.
    if (member !== 1) return { ok: false, reason: 'not_in_token_set', tokenId };
    if (record.revoked_at !== null) return { ok: false, reason: 'revoked', tokenId };
    if (apiTokenExpired(record, nowMs)) return { ok: false, reason: 'expired', tokenId };
    return { ok: true, record };
  }

  /** Every token of the token set (without salts and hashes), oldest first. */
  async list(): Promise<ApiTokenInfo[]> {
    const ids = await this.redis.smembers(ApiTokenKeys.tokens(this.prefix));
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records
      .filter((r): r is ApiTokenRecord => r !== null)
      .map(apiTokenInfo)
      .sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  /** Revoke a token; idempotent (the first revocation time stands). Returns false for an unknown id. */
  async revoke(tokenId: string, now: string): Promise<boolean> {
    const record = await this.get(tokenId);
    if (!record) return false;
    if (record.revoked_at === null) await this.redis.set(ApiTokenKeys.token(this.prefix, tokenId), JSON.stringify({ ...record, revoked_at: now }));
    return true;
  }
}

/** A record without its salt and hash. */
export function apiTokenInfo(record: ApiTokenRecord): ApiTokenInfo {
  const { salt: _salt, hash: _hash, ...info } = record;
  return info;
}
