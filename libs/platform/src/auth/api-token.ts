import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The operator API token format, in one place for everything that must agree on it: the token
 * store (api-token-store.ts), through which the CLI (`baton token create / list / revoke`) writes
 * tokens straight to Redis and the notifier (apps/notifier/src/auth/token-store.ts) verifies them.
 *
 * A token reads `bt_<id>_<secret>`: `id` is 16 hex characters (8 random bytes; the lookup key, not
 * secret), `secret` 32 random bytes in base64url (43 characters, which may include `_` and `-`).
 * Redis keeps, per token, `<prefix>:auth:token:<id>` = JSON {@link ApiTokenRecord} holding a
 * random salt (16 bytes, hex) and `sha256(salt ":" secret)` in hex, never the secret, and an
 * optional expiry; `<prefix>:auth:tokens` is the set of token ids. A token authenticates only
 * while its record is in that set, not revoked and not expired (a record written outside the set
 * is refused). A salted SHA-256 suffices because the secret is
 * 256 random bits (nothing to brute-force, unlike a password).
 *
 * Redis is not the token authority: a record carries `mac`, HMAC-SHA256 of its fields under the
 * deployment's token key (token-key.ts, a file outside Redis), and a notifier that holds the key
 * (`BATON_TOKEN_KEY_FILE`) trusts only records whose MAC verifies — one written by whoever could
 * write Redis but not read the key is refused (401 `unsigned`).
 */

export const API_TOKEN_PREFIX = 'bt';
/** A whole token: groups 1 and 2 are the id and the secret. */
export const API_TOKEN_PATTERN = /^bt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;
export const API_TOKEN_ID_PATTERN = /^[0-9a-f]{16}$/;
export const API_TOKEN_SALT_PATTERN = /^[0-9a-f]{32}$/;
export const API_TOKEN_HASH_PATTERN = /^[0-9a-f]{64}$/;

/** Roles a token may carry (what each may do is the notifier's business: apps/notifier/src/auth/roles.ts). */
export const API_TOKEN_ROLES = ['viewer', 'operator', 'admin'] as const;
export type ApiTokenRole = (typeof API_TOKEN_ROLES)[number];

/** What Redis keeps per token at `<prefix>:auth:token:<id>`. */
export interface ApiTokenRecord {
  token_id: string;
  name: string;
  role: ApiTokenRole;
  /** `*` for every project, else the project keys. */
  projects: '*' | string[];
  salt: string;
  hash: string;
  created_at: string;
  created_by?: string;
  revoked_at: string | null;
  /** When the token stops authenticating (`baton token create --expires-in / --expires-at`); absent or null = never. */
  expires_at?: string | null;
  /** HMAC-SHA256 (hex) of every other field under the deployment's token key (`apiTokenRecordMac`); absent: written without the key. */
  mac?: string;
}

/** True when a token record has an expiry at or before `nowMs`. */
export function apiTokenExpired(record: Pick<ApiTokenRecord, 'expires_at'>, nowMs: number): boolean {
  if (record.expires_at === undefined || record.expires_at === null) return false;
  const at = Date.parse(record.expires_at);
  return !Number.isFinite(at) || at <= nowMs;
}

/**
 * A token lifetime as `baton token create --expires-in` takes it: a positive whole number and a
 * unit, `s`, `m`, `h`, `d` or `w` (`90m`, `12h`, `30d`). Milliseconds, or null when malformed.
 */
export function parseTokenLifetime(text: string): number | null {
  const match = /^(\d{1,6})([smhdw])$/.exec(text.trim());
  if (!match) return null;
  const amount = Number(match[1]);
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[match[2] as 's' | 'm' | 'h' | 'd' | 'w'];
  return amount > 0 ? amount * unit : null;
}

/** The Redis keys of a deployment's tokens. */
export const ApiTokenKeys = {
  token: (prefix: string, tokenId: string) => `${prefix}:auth:token:${tokenId}`,
  tokens: (prefix: string) => `${prefix}:auth:tokens`,
} as const;

export interface ApiTokenParts {
  tokenId: string;
  secret: string;
}

/** `bt_<id>_<secret>`. */
export function formatApiToken(parts: ApiTokenParts): string {
  return `${API_TOKEN_PREFIX}_${parts.tokenId}_${parts.secret}`;
}

/** The id and secret of a presented token (surrounding white space ignored), or null when it is not a token. */
export function parseApiToken(presented: string): ApiTokenParts | null {
  const match = API_TOKEN_PATTERN.exec(presented.trim());
  if (!match) return null;
  const [, tokenId, secret] = match as unknown as [string, string, string];
  return { tokenId, secret };
}

/** `sha256(salt ":" secret)` in hex. */
export function hashTokenSecret(salt: string, secret: string): string {
  return createHash('sha256').update(`${salt}:${secret}`).digest('hex');
}

/** True when `secret` hashes with `salt` to the stored `hash` (compared in constant time). */
export function tokenSecretMatches(salt: string, secret: string, hash: string): boolean {
  const expected = Buffer.from(hash, 'hex');
  const actual = Buffer.from(hashTokenSecret(salt, secret), 'hex');
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

export interface NewApiToken extends ApiTokenParts {
  /** The token to hand out once: `bt_<id>_<secret>`. */
  token: string;
  salt: string;
  /** What to store: {@link hashTokenSecret}(salt, secret). */
  hash: string;
}

/** A new token: random id, secret and salt, the token string, and the hash to store instead of the secret. */
export function mintApiToken(): NewApiToken {
  const tokenId = randomBytes(8).toString('hex');
  const secret = randomBytes(32).toString('base64url');
  const salt = randomBytes(16).toString('hex');
  return { tokenId, secret, token: formatApiToken({ tokenId, secret }), salt, hash: hashTokenSecret(salt, secret) };
}
