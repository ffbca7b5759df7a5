import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { z } from 'zod';

/*
 * The deployment's token authority: a secret key kept outside Redis (a file beside the admin's NATS
 * credentials, 0600), with which `baton token create / revoke / sign-existing` sign every operator
 * API token record and the notifier signs every browser session. The notifier trusts a record only
 * when its MAC (HMAC-SHA256 over a canonical form of the record, see {@link apiTokenRecordMac})
 * verifies with the key: whoever can write Redis, but does not hold the key, can no longer mint a
 * token, raise a token's role or projects, or lift a revocation by editing a record (audit
 * finding 3). The key is named by `BATON_TOKEN_KEY_FILE` (the notifier and the CLI); `npm start`
 * and `baton nats-config` create `<deployment folder>/token.key` ({@link ensureTokenKeyFile}).
 */

/** The key file's name in a deployment folder. */
export const TOKEN_KEY_FILE_NAME = 'token.key';
/** The setting that names the key file (the notifier and the CLI). */
export const TOKEN_KEY_SETTING = 'BATON_TOKEN_KEY_FILE';
/** Fewest characters a key file holds (surrounding white space ignored): {@link ensureTokenKeyFile} writes 43 (32 random bytes, base64url). */
export const TOKEN_KEY_MIN_LENGTH = 32;
/** A MAC as records carry it: HMAC-SHA256 in hex. */
export const TOKEN_MAC_PATTERN = /^[0-9a-f]{64}$/;

/** A deployment's token key, read from its file. */
export interface TokenKey {
  /** The file it was read from. */
  readonly file: string;
  /** The HMAC key: the file's text, surrounding white space ignored, as UTF-8 bytes. */
  readonly secret: Buffer;
  /** The first 12 hex digits of the key's SHA-256: names the key in logs and output, never reveals it. */
  readonly fingerprint: string;
}

/** Why a key file could not be used: `unreadable` (missing, no permission) or `invalid` (too short). */
export class TokenKeyError extends Error {
  override name = 'TokenKeyError';
  constructor(
    readonly reason: 'unreadable' | 'invalid',
    readonly file: string,
    message: string,
  ) {
    super(message);
  }
}

function keyOf(file: string, text: string): TokenKey {
  const trimmed = text.trim();
  if (trimmed.length < TOKEN_KEY_MIN_LENGTH)
    throw new TokenKeyError(
      'invalid',
      file,
      `${file} holds ${trimmed.length} characters: a token key is at least ${TOKEN_KEY_MIN_LENGTH} (baton nats-config and npm start write one: 32 random bytes, base64url)`,
    );
  const secret = Buffer.from(trimmed, 'utf8');
  return { file, secret, fingerprint: createHash('sha256').update(secret).digest('hex').slice(0, 12) };
}

/**
 * The token key in `file`. @throws TokenKeyError when it cannot be read or is shorter than
 * {@link TOKEN_KEY_MIN_LENGTH} characters.
 */
export function readTokenKey(file: string): TokenKey {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new TokenKeyError('unreadable', file, `cannot read the token key ${file}: ${(error as Error).message}`);
  }
  return keyOf(file, text);
}

/**
 * The token key of the deployment folder `dir` (`<dir>/token.key`), created the first time: 32
 * random bytes in base64url, the file 0600 from its creation (as the credentials files), never
 * replaced (a second call, or two at once, read the same key). Returns the key and whether it was
 * created now.
 */
export function ensureTokenKeyFile(dir: string): { key: TokenKey; created: boolean } {
  const file = join(dir, TOKEN_KEY_FILE_NAME);
  if (existsSync(file)) return { key: readTokenKey(file), created: false };
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  let fd: number;
  try {
    // `wx`: never over a key another process wrote meanwhile.
    fd = openSync(file, 'wx', 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { key: readTokenKey(file), created: false };
    throw error;
  }
  try {
    writeSync(fd, `${randomBytes(32).toString('base64url')}\n`);
  } finally {
    closeSync(fd);
  }
  // The mode a umask may have narrowed is set exactly.
  chmodSync(file, 0o600);
  return { key: readTokenKey(file), created: true };
}

/** HMAC-SHA256 of `parts` (JSON, so every field is delimited) under the key, in hex. */
function mac(key: TokenKey, parts: readonly unknown[]): string {
  return createHmac('sha256', key.secret).update(JSON.stringify(parts)).digest('hex');
}

/** Constant-time comparison of two hex MACs (false for anything that is not one). */
function macEqual(expected: string, given: unknown): boolean {
  if (typeof given !== 'string' || !TOKEN_MAC_PATTERN.test(given)) return false;
  return timingSafeEqual(Buffer.from(expected, 'hex'), Buffer.from(given, 'hex'));
}

/** The fields of a token record its MAC covers (every field but the MAC itself). */
export interface SignedTokenFields {
  token_id: string;
  name: string;
  role: string;
  projects: '*' | readonly string[];
  salt: string;
  hash: string;
  created_at: string;
  created_by?: string | undefined;
  revoked_at: string | null;
  expires_at?: string | null | undefined;
}

/**
 * The MAC of a token record of the deployment under `prefix`: HMAC-SHA256 over the JSON array
 * `["baton-api-token/1", prefix, token_id, name, role, projects, salt, hash, created_at,
 * created_by|null, revoked_at, expires_at|null]`. Every field that decides what the token may do,
 * whose it is and until when is covered: the role, the projects, the hash of the secret, the
 * revocation and the expiry, the id (a record copied under another id does not verify) and the
 * prefix (nor one copied into another deployment that shares the key).
 */
export function apiTokenRecordMac(key: TokenKey, prefix: string, record: SignedTokenFields): string {
  return mac(key, [
    'baton-api-token/1',
    prefix,
    record.token_id,
    record.name,
    record.role,
    record.projects,
    record.salt,
    record.hash,
    record.created_at,
    record.created_by ?? null,
    record.revoked_at,
    record.expires_at ?? null,
  ]);
}

/** Whether `given` is the record's MAC under the key (constant-time). */
export function apiTokenRecordMacValid(key: TokenKey, prefix: string, record: SignedTokenFields, given: unknown): boolean {
  return macEqual(apiTokenRecordMac(key, prefix, record), given);
}

/**
 * The MAC of an entry of the deployment's token revocation log (token-revocations.ts):
 * HMAC-SHA256 over `["baton-token-revocation/1", prefix, token_id, revoked_at]`. Only the holder
 * of the key can write an entry the notifier counts: whatever else lands on the log's subjects
 * (a JetStream API answer aimed there by a service) is ignored.
 */
export function tokenRevocationMac(key: TokenKey, prefix: string, entry: { token_id: string; revoked_at: string }): string {
  return mac(key, ['baton-token-revocation/1', prefix, entry.token_id, entry.revoked_at]);
}

/** Whether `given` is the revocation entry's MAC under the key (constant-time). */
export function tokenRevocationMacValid(key: TokenKey, prefix: string, entry: { token_id: string; revoked_at: string }, given: unknown): boolean {
  return macEqual(tokenRevocationMac(key, prefix, entry), given);
}

/** The fields of a browser session its MAC covers. */
export interface SignedSessionFields {
  /** The Redis key's hash of the session id (the record is bound to its key). */
  session_hash: string;
  token_id: string;
  csrf: string;
  created_at: string;
}

/** The MAC of a browser session record: HMAC-SHA256 over `["baton-session/1", prefix, session_hash, token_id, csrf, created_at]`. */
export function sessionRecordMac(key: TokenKey, prefix: string, session: SignedSessionFields): string {
  return mac(key, ['baton-session/1', prefix, session.session_hash, session.token_id, session.csrf, session.created_at]);
}

/** Whether `given` is the session record's MAC under the key (constant-time). */
export function sessionRecordMacValid(key: TokenKey, prefix: string, session: SignedSessionFields, given: unknown): boolean {
  return macEqual(sessionRecordMac(key, prefix, session), given);
}

/**
 * `BATON_TOKEN_KEY_FILE` as a service's configuration reads it: the path of the key file, read and
 * checked at start (a file that cannot be read, or is too short, is a configuration problem naming
 * the variable). Unset: no key.
 */
export const TokenKeyFileSetting = z
  .string()
  .trim()
  .min(1)
  .transform((file, ctx): TokenKey => {
    try {
      return readTokenKey(file);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  });
