import type { Redis } from 'ioredis';
import { z } from 'zod';
import { ADMIN_ACTOR, ActorNameSchema, IsoTimeSchema, parseIgnoringUnknownKeys, ProjectIdSchema, ServiceActors } from '@baton/contracts';
import { RedisLock } from '@baton/projections';
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
import { apiTokenRecordMac, apiTokenRecordMacValid, TOKEN_MAC_PATTERN, type TokenKey } from './token-key';
import { TokenRevocationLogError, type TokenRevocationLog } from './token-revocations';

/**
 * The one reader and writer of a deployment's operator API tokens in Redis (the format is
 * api-token.ts): `baton token create / list / revoke / sign-existing` and the notifier, which also
 * verifies presented tokens with it (apps/notifier/src/auth/token-store.ts adds the principal on
 * top). Given the deployment's token key (token-key.ts), it signs every record it writes and
 * trusts only records whose MAC verifies; without one it writes unsigned records and trusts every
 * record (a notifier without `BATON_TOKEN_KEY_FILE` says so when it starts). Given the deployment's
 * token revocation log too (token-revocations.ts, a JetStream stream only the admin writes), every
 * revocation is appended there before Redis is written, and a token the log says is revoked is
 * refused whatever its record in Redis says (a signed record from before the revocation, put back).
 */

/** Every project, as a token's scope. */
export const ALL_TOKEN_PROJECTS = '*';
export type ApiTokenScope = readonly string[] | typeof ALL_TOKEN_PROJECTS;

/** A stored record as Baton accepts it: the record shape, validated (a record that fails it counts as absent; keys a newer release added are left out, not refused). */
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
  /** HMAC-SHA256 of the other fields under the deployment's token key (absent: written without it). */
  mac: z.string().regex(TOKEN_MAC_PATTERN).optional(),
}) satisfies z.ZodType<ApiTokenRecord>;

/** The keys of a token record this release knows (any other is a newer release's, kept on rewrite). */
const RECORD_KEYS: ReadonlySet<string> = new Set(Object.keys(ApiTokenRecordSchema.shape));

/** A token as listed: everything but the salt, the hash and the MAC. */
export type ApiTokenInfo = Omit<ApiTokenRecord, 'salt' | 'hash' | 'mac'>;

/**
 * A record's signature as a store with the deployment's token key reads it: `valid`, `unsigned`
 * (no MAC: written before the deployment had a key, or by something without it), `mismatch` (a MAC
 * that does not verify: the record was altered, or signed with another key); `unchecked` when the
 * store has no key.
 */
export type ApiTokenSignature = 'valid' | 'unsigned' | 'mismatch' | 'unchecked';

/** What {@link ApiTokenStore.signExisting} found and did. */
export interface SignExistingResult {
  /** Records of the token set that had no MAC, signed now (or that would be, with `dryRun`). */
  signed: ApiTokenInfo[];
  /** Records whose MAC verifies already. */
  already_signed: number;
  /** Records whose MAC does not verify: left as they are (altered, or signed with another key); they stay refused. */
  mismatched: ApiTokenInfo[];
  /** Records that changed between the read and the write (a revocation meanwhile): left unsigned; run it again. */
  changed: string[];
  /**
   * Revoked tokens (signed records) whose revocation the revocation log lacked — revoked before the
   * deployment had the log — appended to it now (or that would be, with `dryRun`); empty without a log.
   */
  revocations_recorded: string[];
}

/** Thrown by a store method that must sign and has no token key. */
export class ApiTokenKeyRequiredError extends Error {
  override name = 'ApiTokenKeyRequiredError';
}

/** Set KEYS[1] to ARGV[2] only while it still holds ARGV[1] (a signature added to the record that was read, not to one changed since). */
const COMPARE_AND_SET = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0`;

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
 * Why a token id does not authenticate: no such record (or one that does not parse, or names
 * another id), a record outside the token set (written by something other than this store), with
 * a store that holds the token key a record without a MAC (`unsigned`) or with one that does not
 * verify (`signature_mismatch`), revoked, or expired. `malformed` and `secret_mismatch` are the
 * verifier's (a presented token that is not one, a wrong secret). With a revocation log:
 * `revocation_rolled_back` (the record in Redis says active, the log says revoked: an earlier
 * record was put back) and `revocations_unavailable` (the log could not be read: refused, fail closed).
 */
export type ApiTokenRefusal =
  | 'malformed'
  | 'unknown'
  | 'not_in_token_set'
  | 'unsigned'
  | 'signature_mismatch'
  | 'revoked'
  | 'revocation_rolled_back'
  | 'revocations_unavailable'
  | 'expired'
  | 'secret_mismatch';

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

/**
 * Create, read, list and revoke the tokens of the deployment under `prefix`. With the deployment's
 * token `key`, every record written is signed and only records whose MAC verifies are valid;
 * without one (null), records are written unsigned and every record is trusted as it is.
 */
export class ApiTokenStore {
  constructor(
    protected readonly redis: Redis,
    protected readonly prefix: string,
    protected readonly key: TokenKey | null = null,
    protected readonly revocations: TokenRevocationLog | null = null,
  ) {
    if (revocations !== null && key === null) throw new Error('a token revocation log is read and written with the token key: give the store the key too');
  }

  /** Whether this store checks and appends to the deployment's token revocation log. */
  get logsRevocations(): boolean {
    return this.revocations !== null;
  }

  /** Whether this store signs what it writes and checks what it reads. */
  get signing(): boolean {
    return this.key !== null;
  }

  /** The record as stored: signed with the key (its MAC replaced), or without a MAC when the store has no key. */
  protected sealed(record: ApiTokenRecord): ApiTokenRecord {
    const { mac: _mac, ...fields } = record;
    return this.key === null ? fields : { ...fields, mac: apiTokenRecordMac(this.key, this.prefix, fields) };
  }

  /** A record's signature under this store's key ({@link ApiTokenSignature}). */
  signatureOf(record: ApiTokenRecord): ApiTokenSignature {
    if (this.key === null) return 'unchecked';
    if (record.mac === undefined) return 'unsigned';
    return apiTokenRecordMacValid(this.key, this.prefix, record, record.mac) ? 'valid' : 'mismatch';
  }

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
    // Creations of one name one at a time (a lease released only by its holder: one that outlived
    // NAME_LOCK_MS may be another creation's now).
    const lock = new RedisLock(this.redis, `${this.prefix}:auth:name-lock:${name.toLowerCase()}`, { ttlMs: NAME_LOCK_MS });
    const attempted = await lock.tryRun(async () => {
      const holders = await this.activeNamed(name, Date.parse(input.now));
      if (holders.length > 0 && (input.ifNameTaken ?? 'refuse') === 'refuse') {
        const ids = holders.map((r) => r.token_id);
        throw new ApiTokenNameError(
          ApiTokenNameErrorCode.taken,
          `an active token is named "${name}" already (${ids.join(', ')}): a token's name is who acted; revoke it, choose another name, or rotate`,
          { name, token_ids: ids },
        );
      }
      // The log first: a rotation that could not record its revocations writes nothing.
      for (const old of holders) await this.revocations?.record(old.token_id, input.now);
      const write = this.redis.multi();
      for (const old of holders) write.set(ApiTokenKeys.token(this.prefix, old.token_id), JSON.stringify(this.sealed({ ...old, revoked_at: input.now })));
      await write
        .set(ApiTokenKeys.token(this.prefix, minted.tokenId), JSON.stringify(this.sealed(parsed.data)), 'NX')
        .sadd(ApiTokenKeys.tokens(this.prefix), minted.tokenId)
        .exec();
      return { token: minted.token, info: apiTokenInfo(parsed.data), rotated: holders.map((r) => r.token_id) };
    });
    if (!attempted.acquired) throw new ApiTokenNameError(ApiTokenNameErrorCode.taken, `another token named "${name}" is being created right now`, { name });
    return attempted.value;
  }

  /**
   * The active tokens (in the set, unrevoked, unexpired at `nowMs`) whose name is `name`, compared
   * without regard to case. Unsigned records count (a token made before the deployment had a key
   * holds its name until it is signed or revoked; a rotation revokes it, signed).
   */
  async activeNamed(name: string, nowMs: number): Promise<ApiTokenRecord[]> {
    const lower = name.toLowerCase();
    const ids = await this.redis.smembers(ApiTokenKeys.tokens(this.prefix));
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records.filter((r): r is ApiTokenRecord => r !== null && r.name.toLowerCase() === lower && r.revoked_at === null && !apiTokenExpired(r, nowMs));
  }

  /** The stored record, or null. A record that does not parse, or names another id than its key's, counts as absent (fail closed). */
  async get(tokenId: string): Promise<ApiTokenRecord | null> {
    return (await this.getRaw(tokenId))?.record ?? null;
  }

  /**
   * {@link get}, with the stored text (for a write that must not overwrite a change made since) and
   * the keys this release does not know. A record a newer release wrote may carry fields this one
   * does not know: they are left out of the record (what authenticates is only the fields the MAC
   * covers, which this release knows) and kept in `unknown`, so that a revocation or a signature
   * written here puts them back as they were. An earlier release that refused such records outright
   * hid them: its `token revoke` answered `not_found` while the token stayed valid.
   */
  private async getRaw(tokenId: string): Promise<{ raw: string; record: ApiTokenRecord; unknown: Record<string, unknown> } | null> {
    const raw = await this.redis.get(ApiTokenKeys.token(this.prefix, tokenId));
    if (raw === null) return null;
    try {
      const stored = JSON.parse(raw) as unknown;
      const parsed = parseIgnoringUnknownKeys(ApiTokenRecordSchema, stored);
      if (!parsed.success || parsed.data.token_id !== tokenId) return null;
      const unknown = Object.fromEntries(Object.entries(stored as Record<string, unknown>).filter(([key]) => !RECORD_KEYS.has(key)));
      return { raw, record: parsed.data, unknown };
    } catch {
      return null;
    }
  }

  /** What a rewrite of a read record stores: `record` sealed, with the keys this release did not know kept as they were. */
  private rewritten(found: { record: ApiTokenRecord; unknown: Record<string, unknown> }, record: ApiTokenRecord = found.record): string {
    return JSON.stringify({ ...found.unknown, ...this.sealed(record) });
  }

  /**
   * The record of a token id that may authenticate — in the token set, signed with the key (when
   * the store has one), not revoked, not expired — or why it may not (the secret is the verifier's
   * to check). The signature is checked before the revocation and the expiry, which an unsigned
   * record cannot be believed about. Reads Redis on every call, so a revocation takes effect at once.
   * With a revocation log, a record that passes all that is refused still when the log says the
   * token was revoked (`revocation_rolled_back`), or when the log cannot be read
   * (`revocations_unavailable`): the log is asked on every call for a token it has not revoked.
   */
  async valid(tokenId: string, nowMs: number): Promise<{ ok: true; record: ApiTokenRecord } | { ok: false; reason: ApiTokenRefusal; tokenId: string }> {
    const [record, member] = await Promise.all([this.get(tokenId), this.redis.sismember(ApiTokenKeys.tokens(this.prefix), tokenId)]);
    if (!record) return { ok: false, reason: 'unknown', tokenId };
    // Only `create` adds a token to the set, in the same transaction as its record: a record that
    // is not in it was written some other way, and is not trusted.
    if (member !== 1) return { ok: false, reason: 'not_in_token_set', tokenId };
    const signature = this.signatureOf(record);
    if (signature === 'unsigned') return { ok: false, reason: 'unsigned', tokenId };
    if (signature === 'mismatch') return { ok: false, reason: 'signature_mismatch', tokenId };
    if (record.revoked_at !== null) return { ok: false, reason: 'revoked', tokenId };
    if (apiTokenExpired(record, nowMs)) return { ok: false, reason: 'expired', tokenId };
    if (this.revocations !== null) {
      try {
        if ((await this.revocations.revokedAt(tokenId)) !== null) return { ok: false, reason: 'revocation_rolled_back', tokenId };
      } catch (error) {
        if (error instanceof TokenRevocationLogError) return { ok: false, reason: 'revocations_unavailable', tokenId };
        throw error;
      }
    }
    return { ok: true, record };
  }

  /** Every token of the token set (without salts, hashes and MACs), oldest first. */
  async list(): Promise<ApiTokenInfo[]> {
    return (await this.records()).map(apiTokenInfo);
  }

  /** Every record of the token set, whole, oldest first (for {@link signatureOf}). */
  async records(): Promise<ApiTokenRecord[]> {
    const ids = await this.redis.smembers(ApiTokenKeys.tokens(this.prefix));
    const records = await Promise.all(ids.map((id) => this.get(id)));
    return records.filter((r): r is ApiTokenRecord => r !== null).sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  /**
   * Revoke a token; idempotent (the first revocation time stands). Returns false for an unknown id.
   * The revoked record is signed again with the key (revoked_at is covered by the MAC). With a
   * revocation log, the revocation is appended there first (also for a token Redis says is revoked
   * already, which the log may lack): when the log cannot be written, nothing is.
   * @throws TokenRevocationLogError when the log cannot be written.
   */
  async revoke(tokenId: string, now: string): Promise<boolean> {
    const found = await this.getRaw(tokenId);
    if (!found) return false;
    const record = found.record;
    const revokedAt = record.revoked_at ?? now;
    await this.revocations?.record(tokenId, revokedAt);
    if (record.revoked_at === null) await this.redis.set(ApiTokenKeys.token(this.prefix, tokenId), this.rewritten(found, { ...record, revoked_at: now }));
    return true;
  }

  /**
   * The migration of a deployment that had no token key (`baton token sign-existing`): sign every
   * record of the token set that has no MAC — as it stands, revoked and expired ones included —
   * so the tokens the deployment trusted before keep working once the notifier holds the key.
   * Records whose MAC does not verify are left alone and reported (`mismatched`): an altered record
   * is not blessed. Each record is signed only if unchanged since it was read (a revocation
   * meanwhile wins: `changed`). With a revocation log, every revoked record it trusts (signed) whose
   * revocation the log lacks is appended to it (`revocations_recorded`). `dryRun`: report, write nothing.
   * @throws ApiTokenKeyRequiredError when the store has no key.
   * @throws TokenRevocationLogError when the revocation log cannot be read or written.
   */
  async signExisting(options: { dryRun?: boolean } = {}): Promise<SignExistingResult> {
    if (this.key === null) throw new ApiTokenKeyRequiredError('signing token records needs the deployment token key');
    const result: SignExistingResult = { signed: [], already_signed: 0, mismatched: [], changed: [], revocations_recorded: [] };
    const ids = (await this.redis.smembers(ApiTokenKeys.tokens(this.prefix))).sort();
    for (const id of ids) {
      const found = await this.getRaw(id);
      if (found === null) continue;
      const signature = this.signatureOf(found.record);
      let trusted = false;
      if (signature === 'valid') {
        result.already_signed++;
        trusted = true;
      } else if (signature === 'mismatch') result.mismatched.push(apiTokenInfo(found.record));
      else if (options.dryRun === true) {
        result.signed.push(apiTokenInfo(found.record));
        trusted = true;
      } else {
        const key = ApiTokenKeys.token(this.prefix, id);
        const written = await this.redis.eval(COMPARE_AND_SET, 1, key, found.raw, this.rewritten(found));
        if (written === 1) {
          result.signed.push(apiTokenInfo(found.record));
          trusted = true;
        } else result.changed.push(id);
      }
      // A revocation Redis holds and the log lacks (made before the log): the log gets it, so a
      // Redis writer can no longer lift it by putting an earlier record back.
      const revokedAt = found.record.revoked_at;
      if (trusted && revokedAt !== null && this.revocations !== null && (await this.revocations.revokedAt(id)) === null) {
        if (options.dryRun !== true) await this.revocations.record(id, revokedAt);
        result.revocations_recorded.push(id);
      }
    }
    result.signed.sort((a, b) => a.created_at.localeCompare(b.created_at));
    return result;
  }
}

/** A record without its salt, hash and MAC. */
export function apiTokenInfo(record: ApiTokenRecord): ApiTokenInfo {
  const { salt: _salt, hash: _hash, mac: _mac, ...info } = record;
  return info;
}
