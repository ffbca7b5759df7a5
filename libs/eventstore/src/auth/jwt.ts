import { createHash } from 'node:crypto';
import { nkeys } from 'nats';

/*
 * NATS decentralized authentication, the parts Baton needs: operator, account and user keys
 * (ed25519 nkeys) and the JWTs that bind them. The server is configured with the operator JWT and
 * the account JWTs (memory resolver); every principal connects with a user JWT signed by the
 * account key plus its own nkey seed (a `.creds` file). A new agent's credentials are made
 * offline by whoever holds the account seed: the server needs no change and no reload. Taking
 * them away does need both: the account JWT's revocation list, then a reload (revoke.ts).
 *
 * Claims follow the NATS JWT v2 layout (`nats.type`, `nats.version: 2`); nats-server 2.9 and
 * newer verify them.
 */

/** A key pair as Baton stores it: the seed (secret) and the public key. */
export interface NkeyPair {
  /** `O…`, `A…` or `U…`: the public key, the identity the server sees. */
  readonly publicKey: string;
  /** `SO…`, `SA…`, `SU…`: the secret seed. Never logged. */
  readonly seed: string;
}

export type NkeyRole = 'operator' | 'account' | 'user';

/** Make a new key pair for a role. */
export function createNkeyPair(role: NkeyRole): NkeyPair {
  const kp = role === 'operator' ? nkeys.createOperator() : role === 'account' ? nkeys.createAccount() : nkeys.createUser();
  return { publicKey: kp.getPublicKey(), seed: new TextDecoder().decode(kp.getSeed()) };
}

/** Rebuild a key pair from its seed (checks the seed's role prefix). */
export function nkeyPairFromSeed(seed: string, role: NkeyRole): NkeyPair {
  const kp = nkeys.fromSeed(new TextEncoder().encode(seed));
  const publicKey = kp.getPublicKey();
  const expected = role === 'operator' ? 'O' : role === 'account' ? 'A' : 'U';
  if (!publicKey.startsWith(expected)) throw new Error(`the seed is not an ${role} seed (its public key starts with ${publicKey[0] ?? '?'})`);
  return { publicKey, seed };
}

/** Subject permissions of a user (NATS JWT `pub` / `sub`). */
export interface SubjectPermission {
  allow?: string[];
  deny?: string[];
}

/** What a user may do: publish, subscribe, answer requests. */
export interface UserPermissions {
  pub: SubjectPermission;
  sub: SubjectPermission;
  /**
   * Allow publishing one reply to the reply subject of each message received. No Baton principal is
   * given it (see `permissionsFor`): on nats-server 2.9 it makes the server track every delivered
   * reply subject for 2 minutes and scan them on each delivery once past 4 096. Kept so that
   * credentials issued with it by earlier versions are recognised and issued again.
   */
  allowResponses?: boolean;
}

function base64url(data: string | Uint8Array): string {
  return Buffer.from(typeof data === 'string' ? Buffer.from(data, 'utf8') : data).toString('base64url');
}

const HEADER = base64url(JSON.stringify({ typ: 'JWT', alg: 'ed25519-nkey' }));

/** Base32 (RFC 4648, no padding) of a SHA-256 digest: the claims' `jti`. */
function claimId(claims: Record<string, unknown>): string {
  const digest = createHash('sha256').update(JSON.stringify(claims)).digest();
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of digest) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

/** Encode and sign a JWT with the issuer's seed. `issuedAt` is seconds since the epoch. */
function signJwt(issuer: NkeyPair, subject: string, name: string, nats: Record<string, unknown>, issuedAt: number): string {
  const body: Record<string, unknown> = { iat: issuedAt, iss: issuer.publicKey, name, sub: subject, nats };
  const claims = { jti: claimId(body), ...body };
  const payload = base64url(JSON.stringify(claims));
  const kp = nkeys.fromSeed(new TextEncoder().encode(issuer.seed));
  const signature = base64url(kp.sign(new TextEncoder().encode(`${HEADER}.${payload}`)));
  return `${HEADER}.${payload}.${signature}`;
}

/** The operator's self-signed JWT. */
export function operatorJwt(operator: NkeyPair, name: string, systemAccount: string, issuedAt: number): string {
  return signJwt(operator, operator.publicKey, name, { system_account: systemAccount, type: 'operator', version: 2 }, issuedAt);
}

/**
 * Users an account no longer accepts (NATS JWT v2 `nats.revocations`): user public key → seconds
 * since the epoch. The server refuses, and on a configuration reload disconnects, every user JWT of
 * that key issued at or before that time.
 */
export type UserRevocations = Readonly<Record<string, number>>;

/**
 * An account JWT signed by the operator. `jetstream` turns JetStream on for the account, with no
 * limits but `diskStorage`: the most bytes its file-backed streams may hold together (absent or -1:
 * none), which nats-server enforces on every publish ("resource limits exceeded for account") and
 * on every stream created or updated with a `max_bytes` (the account's limits reserved together
 * must fit in it). `revocations`, when it names any user, is carried as the account's revocation list.
 */
export function accountJwt(
  operator: NkeyPair,
  account: NkeyPair,
  name: string,
  opts: { jetstream: boolean; revocations?: UserRevocations; diskStorage?: number },
  issuedAt: number,
): string {
  const unlimited = -1;
  const limits: Record<string, unknown> = {
    subs: unlimited,
    data: unlimited,
    payload: unlimited,
    imports: unlimited,
    exports: unlimited,
    wildcards: true,
    conn: unlimited,
    leaf: unlimited,
    ...(opts.jetstream
      ? {
          mem_storage: unlimited,
          disk_storage: opts.diskStorage !== undefined && opts.diskStorage > 0 ? opts.diskStorage : unlimited,
          streams: unlimited,
          consumer: unlimited,
        }
      : {}),
  };
  const revocations = opts.revocations !== undefined && Object.keys(opts.revocations).length > 0 ? { revocations: { ...opts.revocations } } : {};
  return signJwt(
    operator,
    account.publicKey,
    name,
    { limits, default_permissions: { pub: {}, sub: {} }, ...revocations, type: 'account', version: 2 },
    issuedAt,
  );
}

/** The permission claims of a user JWT (`pub`, `sub` and, for `allowResponses`, `resp`). */
export function permissionClaims(permissions: UserPermissions): Record<string, unknown> {
  const clean = (p: SubjectPermission): SubjectPermission => ({
    ...(p.allow && p.allow.length > 0 ? { allow: [...p.allow] } : {}),
    ...(p.deny && p.deny.length > 0 ? { deny: [...p.deny] } : {}),
  });
  return {
    pub: clean(permissions.pub),
    sub: clean(permissions.sub),
    // One reply per request received, within two minutes (nanoseconds), like `allow_responses: true`.
    ...(permissions.allowResponses ? { resp: { max: 1, ttl: 120_000_000_000 } } : {}),
  };
}

/**
 * A user JWT signed by the account, with its subject permissions and the limits nats-server
 * enforces on its connections (`payload`, `subs`; -1, the default, is none; `data` is not enforced
 * by nats-server 2.9 and stays -1).
 */
export function userJwt(
  account: NkeyPair,
  user: NkeyPair,
  name: string,
  permissions: UserPermissions,
  issuedAt: number,
  limits: { payload: number; subs: number } = { payload: -1, subs: -1 },
): string {
  const nats: Record<string, unknown> = {
    ...permissionClaims(permissions),
    subs: limits.subs,
    data: -1,
    payload: limits.payload,
    type: 'user',
    version: 2,
  };
  return signJwt(account, user.publicKey, name, nats, issuedAt);
}

/** Decode a JWT's claims without verifying it (for `baton creds show`, tests and checks). */
export function decodeJwtClaims(jwt: string): Record<string, unknown> {
  const payload = jwt.split('.')[1];
  if (payload === undefined) throw new Error('not a JWT');
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
}

/**
 * Whether `jwt` carries a valid ed25519 signature by `issuer` (a public key, `O…` or `A…`) over its
 * header and claims, as nats-server checks it. False for anything that is not such a JWT.
 */
export function jwtSignedBy(jwt: string, issuer: string): boolean {
  const [header, payload, signature, ...rest] = jwt.split('.');
  if (header === undefined || payload === undefined || signature === undefined || rest.length > 0) return false;
  try {
    const key = nkeys.fromPublic(issuer);
    return key.verify(new TextEncoder().encode(`${header}.${payload}`), Buffer.from(signature, 'base64url')) === true;
  } catch {
    return false;
  }
}

/** Whether `key` is a user's public key (`U…`, 56 characters with a valid checksum). */
export function isUserPublicKey(key: string): boolean {
  if (!key.startsWith('U')) return false;
  try {
    return nkeys.fromPublic(key).getPublicKey() === key;
  } catch {
    return false;
  }
}

/** A `.creds` file: the user JWT and its seed, in the layout NATS clients read. */
export function credsFile(jwt: string, user: NkeyPair): string {
  return [
    '-----BEGIN NATS USER JWT-----',
    jwt,
    '------END NATS USER JWT------',
    '',
    '************************* IMPORTANT *************************',
    'NKEY Seed printed below can be used to sign and prove identity.',
    'NKEYs are sensitive and should be treated as secrets.',
    '',
    '-----BEGIN USER NKEY SEED-----',
    user.seed,
    '------END USER NKEY SEED------',
    '',
    '*************************************************************',
    '',
  ].join('\n');
}

/** The user JWT inside a `.creds` file. */
export function jwtOfCreds(creds: string): string {
  const match = /-----BEGIN NATS USER JWT-----\s*([^\s-][^\s]*)\s*------END NATS USER JWT------/.exec(creds);
  if (!match?.[1]) throw new Error('the file holds no NATS user JWT');
  return match[1];
}
