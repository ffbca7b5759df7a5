import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Principal } from '@baton/contracts';
import { credsName, credsPath, writeTrust, type AuthDeployment, type WrittenTrust } from './deployment';
import { DeploymentError } from './deployment-error';
import { decodeJwtClaims, isUserPublicKey, jwtOfCreds } from './jwt';
import { readUserRecord, recordRevoked, type RecordedUser } from './user-record';

/*
 * Revoking credentials. The server knows a user only by its key and trusts every user JWT the
 * account signed, so a user is revoked by the account: its key goes into the BATON account JWT's
 * revocation list (`nats.revocations`, key → time: every JWT of the key issued at or before that
 * time is refused), the account JWT is signed again by the operator, and the trust block in
 * auth.conf and nats-server.conf is rewritten. A server applies it on a configuration reload
 * (nats-server 2.9.10, measured: `kill -HUP` or `nats-server --signal reload=<pid>`): it refuses
 * the user's new connections and closes the open ones ("User Authentication Revoked").
 * test/security/credential-revocation.e2e-spec.ts proves it against a real server.
 */

/** One user key a revocation named. */
export interface RevokedUser {
  readonly user: string;
  /** The principal's JWT name (`agent:<p>:<a>`, `service:<name>`, `admin`); null for a key the record does not know. */
  readonly principal: string | null;
  /** When its credentials were issued (seconds); null when the record does not say. */
  readonly issuedAt: number | null;
  /** Since when the account refuses it (seconds): now, or the earlier time it was revoked at. */
  readonly revokedAt: number;
  /** It was revoked before: the time stays the earlier one. */
  readonly alreadyRevoked: boolean;
}

/** What {@link revokeUsers} did. */
export interface Revocation extends WrittenTrust {
  readonly revoked: readonly RevokedUser[];
  /** Credentials files in the deployment folder that held a revoked user, removed. */
  readonly removedFiles: readonly string[];
}

/** The user key of a credentials file, or null when it holds no readable user JWT. */
function userOfCredsFile(file: string): string | null {
  try {
    const sub = decodeJwtClaims(jwtOfCreds(readFileSync(file, 'utf8')))['sub'];
    return typeof sub === 'string' ? sub : null;
  } catch {
    return null;
  }
}

/** Every `.creds` file under the deployment's `creds/` folder. */
function credsFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return credsFiles(path);
    return entry.isFile() && entry.name.endsWith('.creds') ? [path] : [];
  });
}

/**
 * The user keys a principal was issued, earliest first: those in the record (`users.jsonl`) and
 * the key of its credentials file in the folder, which may predate the record. Revoked ones too
 * (`revokedAt` set).
 */
export function usersOfPrincipal(deployment: AuthDeployment, principal: Principal): RecordedUser[] {
  const record = readUserRecord(deployment.dir);
  const name = credsName(principal);
  const users = [...record.values()].filter((user) => user.principal === name);
  const current = userOfCredsFile(credsPath(deployment, principal));
  if (current !== null && !users.some((user) => user.user === current)) {
    users.push(record.get(current) ?? { user: current, principal: name, issuedAt: null, revokedAt: null });
  }
  return users.sort((a, b) => (a.issuedAt ?? 0) - (b.issuedAt ?? 0));
}

/**
 * Revoke user keys as of `now`: each one not revoked yet is recorded in `users.jsonl`, the trust
 * block is written again with the account's new revocation list ({@link writeTrust}), and every
 * credentials file in the folder that holds a revoked user is removed (it no longer connects; the
 * next `baton creds` or `nats-config` issues a new one). A key revoked before keeps its earlier
 * time. Nothing reaches a running server until it reloads its configuration.
 *
 * Throws {@link DeploymentError} for a key that is not a user public key, before writing anything.
 */
export function revokeUsers(deployment: AuthDeployment, users: readonly string[], now: Date = new Date()): Revocation {
  const wrong = users.filter((user) => !isUserPublicKey(user));
  if (wrong.length > 0) throw new DeploymentError(`not a user public key (U…, 56 characters): ${wrong.join(', ')}; nothing was revoked`);
  const at = Math.floor(now.getTime() / 1000);
  const record = readUserRecord(deployment.dir);
  const revoked = [...new Set(users)].map((user): RevokedUser => {
    const known = record.get(user);
    if (known !== undefined && known.revokedAt !== null)
      return { user, principal: known.principal, issuedAt: known.issuedAt, revokedAt: known.revokedAt, alreadyRevoked: true };
    recordRevoked(deployment.dir, user, at);
    return { user, principal: known?.principal ?? null, issuedAt: known?.issuedAt ?? null, revokedAt: at, alreadyRevoked: false };
  });
  const trust = writeTrust(deployment, now);
  const gone = new Set(revoked.map((entry) => entry.user));
  const removedFiles = credsFiles(join(deployment.dir, 'creds')).filter((file) => {
    const user = userOfCredsFile(file);
    if (user === null || !gone.has(user)) return false;
    rmSync(file, { force: true });
    return true;
  });
  return { revoked, removedFiles, ...trust };
}
