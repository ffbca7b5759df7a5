import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DeploymentError } from './deployment-error';
import type { UserRevocations } from './jwt';

/*
 * What a deployment remembers of the users it issued credentials to and of the ones it revoked,
 * in `users.jsonl` next to deployment.json. Public keys and names only, never a seed: the file
 * says who holds which user key, which is what revoking a principal needs (each `baton creds`
 * makes a new user key, and the server knows users only by key).
 *
 *   {"kind":"issued","user":"U…","principal":"agent:acme:support","issued_at":"2026-01-05T09:00:00.000Z"}
 *   {"kind":"revoked","user":"U…","revoked_at":"2026-01-06T10:00:00.000Z"}
 *
 * One line is appended per credentials file issued and per user revoked, never rewritten: an
 * append of one short line lands whole, so two `baton creds` at once do not lose each other's
 * line, and the history of a key stays readable. Times are whole seconds, as the JWTs carry them
 * (`iat`, and the account's revocation time).
 */

const FILE = 'users.jsonl';

/** One user key as the record knows it. */
export interface RecordedUser {
  /** The user's public key (`U…`). */
  readonly user: string;
  /** The principal's name as its user JWT carries it (`agent:<p>:<a>`, `service:<name>`, `admin`); null for a key revoked without an issue line. */
  readonly principal: string | null;
  /** When its credentials were issued (seconds since the epoch); null when the record has no issue line for it. */
  readonly issuedAt: number | null;
  /** Since when the account refuses it (seconds since the epoch); null while it is valid. */
  readonly revokedAt: number | null;
}

type Line = { kind: 'issued'; user: string; principal: string; issued_at: string } | { kind: 'revoked'; user: string; revoked_at: string };

const seconds = (iso: string): number => Math.floor(Date.parse(iso) / 1000);
const iso = (at: number): string => new Date(at * 1000).toISOString();

function parseLine(text: string, where: string): Line {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = null;
  }
  const line = value as Partial<Record<string, unknown>> | null;
  const isTime = (at: unknown) => typeof at === 'string' && Number.isFinite(Date.parse(at));
  if (line !== null && typeof line === 'object' && typeof line['user'] === 'string') {
    if (line['kind'] === 'issued' && typeof line['principal'] === 'string' && isTime(line['issued_at'])) return line as Line;
    if (line['kind'] === 'revoked' && isTime(line['revoked_at'])) return line as Line;
  }
  // A revocation the reader skipped would make a revoked user valid again: refuse to guess.
  throw new DeploymentError(`${where} is not a line of the user record (kind issued or revoked, with user and time): fix or remove it; nothing was written`);
}

/**
 * The users recorded in the deployment folder `dir`, by public key, in the order first seen. An
 * absent file is an empty record (a deployment made before the record existed, or none issued).
 * Throws {@link DeploymentError} for a line it cannot read.
 */
export function readUserRecord(dir: string): ReadonlyMap<string, RecordedUser> {
  const file = join(dir, FILE);
  const users = new Map<string, RecordedUser>();
  if (!existsSync(file)) return users;
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((text, index) => {
      if (text.trim() === '') return;
      const line = parseLine(text, `${file}:${index + 1}`);
      const known = users.get(line.user) ?? { user: line.user, principal: null, issuedAt: null, revokedAt: null };
      users.set(
        line.user,
        line.kind === 'issued'
          ? { ...known, principal: line.principal, issuedAt: seconds(line.issued_at) }
          : // The earliest revocation stands: it already refuses every JWT of the key issued until then.
            { ...known, revokedAt: known.revokedAt === null ? seconds(line.revoked_at) : Math.min(known.revokedAt, seconds(line.revoked_at)) },
      );
    });
  return users;
}

/** The account's revocation list as the record holds it: every revoked user key and its time. */
export function recordedRevocations(users: ReadonlyMap<string, RecordedUser>): UserRevocations {
  const revocations: Record<string, number> = {};
  for (const { user, revokedAt } of users.values()) if (revokedAt !== null) revocations[user] = revokedAt;
  return revocations;
}

/** Append that `user` was issued to `principal` (its JWT name) at `issuedAt` seconds. */
export function recordIssued(dir: string, user: string, principal: string, issuedAt: number): void {
  append(dir, { kind: 'issued', user, principal, issued_at: iso(issuedAt) });
}

/** Append that the account refuses `user` as of `revokedAt` seconds. */
export function recordRevoked(dir: string, user: string, revokedAt: number): void {
  append(dir, { kind: 'revoked', user, revoked_at: iso(revokedAt) });
}

function append(dir: string, line: Line): void {
  appendFileSync(join(dir, FILE), `${JSON.stringify(line)}\n`);
}
