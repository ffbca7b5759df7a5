import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describePrincipal, principalFromTokens, ProjectIdSchema, ServiceNames, type Principal } from '@baton/contracts';
import {
  accountJwt,
  createNkeyPair,
  credsFile,
  decodeJwtClaims,
  jwtOfCreds,
  jwtSignedBy,
  nkeyPairFromSeed,
  operatorJwt,
  permissionClaims,
  userJwt,
  type NkeyPair,
} from './jwt';
import { DeploymentError } from './deployment-error';
import { userLimitsFor, type UserLimits } from './limits';
import { permissionsFor } from './permissions';
import { readUserRecord, recordedRevocations, recordIssued } from './user-record';

export { DeploymentError } from './deployment-error';

/*
 * A deployment's NATS identities, kept in one folder:
 *
 *   deployment.json          the prefix and the public keys (no secrets)
 *   operator.seed            the operator key (signs the account JWTs)         0600
 *   account.seed             the BATON account key (signs every user JWT)      0600
 *   system.seed              the system account key                            0600
 *   users.jsonl              every user key issued and revoked (public keys; user-record.ts)
 *   account-limits.json      the BATON account's JetStream storage limit, when one is set (nats-config --max-store)
 *   auth.conf                the trust block: operator JWT, account JWTs (memory resolver)
 *   nats-server.conf         a server configuration trusting the operator, the trust block inline
 *   creds/<service>.creds    router, ledger, watchdog, notifier, admin          0600
 *   creds/agents/<project>/<agent>.creds                                         0600
 *
 * Whoever holds `account.seed` can issue credentials; the server only needs the operator and
 * account JWTs, which are public. Issuing a new agent's credentials changes nothing on the server.
 * Revoking one does (revoke.ts): the BATON account JWT is signed again with the user in its
 * revocation list, both configuration files are rewritten, and the server must reload them.
 */

export interface AuthDeployment {
  readonly dir: string;
  readonly prefix: string;
  readonly operator: NkeyPair;
  readonly account: NkeyPair;
  readonly system: NkeyPair;
}

interface DeploymentFile {
  version: 1;
  prefix: string;
  operator: string;
  account: string;
  system: string;
}

/** A secret (0600 from its creation), replaced whole ({@link replaceFile}): a service re-reading its credentials at a reconnect while `baton creds` issues new ones reads the old file or the new, never an empty or half-written one. */
function writeSecret(file: string, content: string): void {
  replaceFile(file, content, 0o600);
}

/**
 * Open the deployment folder, creating the operator, account and system keys the first time.
 * Idempotent: a second call returns the same keys. Refuses a folder made for another prefix
 * (its credentials name the other prefix's subjects).
 */
export function openDeployment(dir: string, prefix: string): AuthDeployment {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const meta = join(dir, 'deployment.json');
  if (existsSync(meta)) {
    const saved = JSON.parse(readFileSync(meta, 'utf8')) as DeploymentFile;
    if (saved.prefix !== prefix) {
      throw new DeploymentError(`${dir} holds credentials for prefix "${saved.prefix}", not "${prefix}"; use another folder or the same BATON_PREFIX`);
    }
    const read = (name: string) => readFileSync(join(dir, name), 'utf8').trim();
    return {
      dir,
      prefix,
      operator: nkeyPairFromSeed(read('operator.seed'), 'operator'),
      account: nkeyPairFromSeed(read('account.seed'), 'account'),
      system: nkeyPairFromSeed(read('system.seed'), 'account'),
    };
  }
  const deployment: AuthDeployment = {
    dir,
    prefix,
    operator: createNkeyPair('operator'),
    account: createNkeyPair('account'),
    system: createNkeyPair('account'),
  };
  writeSecret(join(dir, 'operator.seed'), `${deployment.operator.seed}\n`);
  writeSecret(join(dir, 'account.seed'), `${deployment.account.seed}\n`);
  writeSecret(join(dir, 'system.seed'), `${deployment.system.seed}\n`);
  const file: DeploymentFile = {
    version: 1,
    prefix,
    operator: deployment.operator.publicKey,
    account: deployment.account.publicKey,
    system: deployment.system.publicKey,
  };
  writeFileSync(meta, `${JSON.stringify(file, null, 2)}\n`);
  return deployment;
}

/** The BATON account's JetStream limits that `baton nats-config --max-store` sets, kept in the deployment folder. */
export interface AccountLimits {
  /** Most bytes the account's file-backed streams may hold together; null: no limit. */
  maxStore: number | null;
}

const ACCOUNT_LIMITS_FILE = 'account-limits.json';

/**
 * The account limits kept in the deployment folder (`account-limits.json`); none when it holds
 * none. Every account JWT the folder signs carries them — nats-config's and a revocation's alike —
 * so a revocation never lifts a limit. A file that cannot be read is a {@link DeploymentError}:
 * signing the account without its limit would lift it unseen.
 */
export function readAccountLimits(dir: string): AccountLimits {
  const file = join(dir, ACCOUNT_LIMITS_FILE);
  if (!existsSync(file)) return { maxStore: null };
  let saved: unknown;
  try {
    saved = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new DeploymentError(`${file} is not JSON (${(error as Error).message}): fix it, or set the limit again with baton nats-config --max-store`);
  }
  const maxStore = (saved as { max_store?: unknown } | null)?.max_store;
  if (maxStore === null || maxStore === undefined) return { maxStore: null };
  if (typeof maxStore !== 'number' || !Number.isSafeInteger(maxStore) || maxStore < 1) {
    throw new DeploymentError(`${file}: max_store must be a whole number of bytes ≥ 1 or null, got ${JSON.stringify(maxStore)}`);
  }
  return { maxStore };
}

/** Keep the account limits in the deployment folder; the next trust block written signs them ({@link writeServerConfig}, {@link writeTrust}). */
export function writeAccountLimits(deployment: AuthDeployment, limits: AccountLimits): void {
  replaceFile(join(deployment.dir, ACCOUNT_LIMITS_FILE), `${JSON.stringify({ max_store: limits.maxStore }, null, 2)}\n`);
}

/** Where a principal's credentials file lives inside the deployment folder. */
export function credsPath(deployment: AuthDeployment, principal: Principal): string {
  switch (principal.kind) {
    case 'agent':
      return join(deployment.dir, 'creds', 'agents', principal.project, `${principal.agent}.creds`);
    case 'svc':
      return join(deployment.dir, 'creds', `${principal.service}.creds`);
    case 'op':
      return join(deployment.dir, 'creds', `${principal.relay === 'admin' ? 'admin' : 'notifier'}.creds`);
    default: {
      const never: never = principal;
      throw new DeploymentError(`unknown principal ${JSON.stringify(never)}`);
    }
  }
}

/**
 * Whether a credentials file's user JWT carries `allow_responses` (the `resp` claim), as admin
 * credentials issued before it was dropped do: on nats-server 2.9 every read such a connection makes
 * costs the server more the longer it reads (see `permissionsFor`). False for a file that cannot be
 * read as one.
 */
export function credsGrantResponses(creds: string): boolean {
  try {
    const nats = decodeJwtClaims(jwtOfCreds(creds))['nats'] as Record<string, unknown> | undefined;
    return nats?.['resp'] !== undefined;
  } catch {
    return false;
  }
}

/**
 * The principal a credentials file was issued to, read from its user JWT's name ({@link credsName}
 * written back); null for a name this module never writes (a file made elsewhere).
 */
export function principalOfCreds(creds: string): Principal | null {
  let name: unknown;
  try {
    name = decodeJwtClaims(jwtOfCreds(creds))['name'];
  } catch {
    return null;
  }
  if (name === 'admin') return { kind: 'op', relay: 'admin' };
  if (typeof name !== 'string') return null;
  const [kind, first, second, ...rest] = name.split(':');
  if (kind === 'service' && first !== undefined && second === undefined) return principalFromTokens('', 'svc', first);
  if (kind === 'agent' && first !== undefined && second !== undefined && rest.length === 0 && ProjectIdSchema.safeParse(first).success) {
    return principalFromTokens(first, 'agent', second);
  }
  return null;
}

/** The user name a principal's JWT carries (shown by the server's monitoring). */
export function credsName(principal: Principal): string {
  switch (principal.kind) {
    case 'agent':
      return `agent:${principal.project}:${principal.agent}`;
    case 'svc':
      return `service:${principal.service}`;
    case 'op':
      return principal.relay === 'admin' ? 'admin' : 'service:notifier';
    default: {
      const never: never = principal;
      throw new DeploymentError(`unknown principal ${JSON.stringify(never)}`);
    }
  }
}

export interface IssuedCreds {
  principal: Principal;
  file: string;
  /** The `.creds` text (JWT + seed): a secret. */
  creds: string;
  userPublicKey: string;
  /** The limits the server enforces on its connections (`userLimitsFor`; -1: none). */
  limits: UserLimits;
}

/**
 * Make credentials for one principal: a new user key and a user JWT signed by the account, with the
 * principal's permissions (`permissionsFor`) and limits (`userLimitsFor`: an agent's largest
 * message and subscriptions, `limits` over the defaults). Writes `creds/…` (0600), records the user
 * key in `users.jsonl` and returns it. Issuing again makes a new key; earlier files keep working
 * until the account revokes them (`revokeUsers`).
 */
export function issueCreds(deployment: AuthDeployment, principal: Principal, now: Date = new Date(), limits: Partial<UserLimits> = {}): IssuedCreds {
  const user = createNkeyPair('user');
  const issuedAt = Math.floor(now.getTime() / 1000);
  const enforced = userLimitsFor(principal, limits);
  const jwt = userJwt(deployment.account, user, credsName(principal), permissionsFor(deployment.prefix, principal), issuedAt, enforced);
  const creds = credsFile(jwt, user);
  const file = credsPath(deployment, principal);
  mkdirSync(join(file, '..'), { recursive: true, mode: 0o700 });
  writeSecret(file, creds);
  // Recorded once the file is written: a key on record always had credentials handed out.
  recordIssued(deployment.dir, user.publicKey, credsName(principal), issuedAt);
  return { principal, file, creds, userPublicKey: user.publicKey, limits: enforced };
}

/**
 * Credentials for the four services and the admin: written once, and kept while they grant what
 * this version grants. A file whose permissions differ (issued by an earlier version: the router's
 * and the ledger's once carried `allow_responses`) is issued again, so a restart picks up the
 * current grants; the old file stays valid for processes still running with it.
 */
export function ensureServiceCreds(deployment: AuthDeployment): Record<string, string> {
  const files: Record<string, string> = {};
  const principals: Principal[] = [...ServiceNames.map((service): Principal => ({ kind: 'svc', service })), { kind: 'op', relay: 'admin' }];
  for (const principal of principals) {
    const file = credsPath(deployment, principal);
    if (!existsSync(file) || !grantsCurrentPermissions(file, deployment, principal)) issueCreds(deployment, principal);
    files[principal.kind === 'svc' ? principal.service : 'admin'] = file;
  }
  return files;
}

/** Does the credentials file's user JWT grant exactly `permissionsFor` the principal? (false for a file that cannot be read as one) */
function grantsCurrentPermissions(file: string, deployment: AuthDeployment, principal: Principal): boolean {
  try {
    const nats = decodeJwtClaims(jwtOfCreds(readFileSync(file, 'utf8')))['nats'] as Record<string, unknown> | undefined;
    const expected = permissionClaims(permissionsFor(deployment.prefix, principal));
    return (
      nats !== undefined &&
      Object.keys(expected).every((key) => JSON.stringify(nats[key]) === JSON.stringify(expected[key])) &&
      (nats['resp'] === undefined) === (expected['resp'] === undefined)
    );
  } catch {
    return false;
  }
}

export interface ServerConfigOptions {
  /** `host:port` the client listener binds (default 127.0.0.1:4222). Keep it on loopback unless TLS is configured. */
  listen?: string;
  /** JetStream store folder. */
  storeDir: string;
  /** Monitoring `host:port` (off when absent). */
  http?: string;
  /** Largest message (default 1MB: Baton caps payloads at 256 KiB and dead letters carry headers). */
  maxPayload?: string;
}

/** The first line of the trust block: where it starts inside nats-server.conf. */
const TRUST_MARK = "# Baton's NATS trust (";

/**
 * The operator JWT the deployment's configuration already carries (auth.conf, else
 * nats-server.conf), when it is this operator's own and names this system account; else null.
 *
 * Kept rather than signed anew because nats-server cannot reload a changed operator: 2.9.10
 * refuses the whole reload ("config reload not supported for TrustedOperators") when the operator
 * JWT differs in anything, its issue time included. Keeping it lets a reload pick up a new account
 * JWT (a revocation) and lets `baton nats-config` run again without a restart.
 */
function keptOperatorJwt(deployment: AuthDeployment): string | null {
  for (const name of ['auth.conf', 'nats-server.conf']) {
    const file = join(deployment.dir, name);
    if (!existsSync(file)) continue;
    const jwt = /^operator: (\S+)$/m.exec(readFileSync(file, 'utf8'))?.[1];
    if (jwt === undefined || !jwtSignedBy(jwt, deployment.operator.publicKey)) continue;
    try {
      const claims = decodeJwtClaims(jwt);
      const nats = claims['nats'] as { system_account?: unknown } | undefined;
      if (claims['sub'] === deployment.operator.publicKey && nats?.system_account === deployment.system.publicKey) return jwt;
    } catch {
      continue;
    }
  }
  return null;
}

/**
 * The trust block of a server configuration: the operator JWT, the system account and a memory
 * resolver preloaded with the BATON and SYS account JWTs. No user is listed: every connection must
 * present a user JWT signed by the account, and the BATON account JWT lists the users the
 * deployment revoked (`users.jsonl`), which the server refuses, and carries the account's
 * JetStream storage limit when the folder keeps one ({@link readAccountLimits}). The operator JWT already written
 * is kept ({@link keptOperatorJwt}); the account JWTs are signed at `now`. Include it from any
 * server configuration (a cluster node's, see infra/nats/node.conf.template).
 */
export function authConfig(deployment: AuthDeployment, now: Date = new Date()): string {
  const iat = Math.floor(now.getTime() / 1000);
  const operator = keptOperatorJwt(deployment) ?? operatorJwt(deployment.operator, 'baton', deployment.system.publicKey, iat);
  const revocations = recordedRevocations(readUserRecord(deployment.dir));
  const { maxStore } = readAccountLimits(deployment.dir);
  const account = accountJwt(
    deployment.operator,
    deployment.account,
    'BATON',
    { jetstream: true, revocations, ...(maxStore !== null ? { diskStorage: maxStore } : {}) },
    iat,
  );
  const system = accountJwt(deployment.operator, deployment.system, 'SYS', { jetstream: false }, iat);
  return [
    `${TRUST_MARK}prefix "${deployment.prefix}"), written by \`baton nats-config\`. Public keys and JWTs only.`,
    '# Decentralized auth: the operator signs the BATON and SYS accounts (memory resolver); every',
    '# client presents a user JWT signed by the BATON account key (`baton creds`).',
    `operator: ${operator}`,
    `system_account: ${deployment.system.publicKey}`,
    'resolver: MEMORY',
    'resolver_preload: {',
    `  ${deployment.account.publicKey}: ${account}`,
    `  ${deployment.system.publicKey}: ${system}`,
    '}',
    '',
  ].join('\n');
}

/**
 * A whole nats-server (2.9+) configuration for one node: listener, JetStream and the trust block
 * ({@link authConfig}). Nothing connects without credentials.
 */
export function serverConfig(deployment: AuthDeployment, opts: ServerConfigOptions, now: Date = new Date()): string {
  return [
    `# nats-server configuration for Baton (prefix "${deployment.prefix}"), written by \`baton nats-config\`.`,
    `listen: ${JSON.stringify(opts.listen ?? '127.0.0.1:4222')}`,
    ...(opts.http ? [`http: ${JSON.stringify(opts.http)}`] : []),
    `max_payload: ${opts.maxPayload ?? '1MB'}`,
    // A client's CONNECT line carries its user JWT, and a service's grants run past the default
    // 4 KiB (the ledger's: every stream's API, the agent edge it relays): refused as too long, the
    // connection would only time out.
    'max_control_line: 16KB',
    // How long a client has, from its TCP connect, to send its CONNECT (signed with its nkey): the
    // default 2 s closed connections as "Authentication Timeout" (the client saw `write EPIPE`)
    // when many processes connected at once on a busy machine — 35 of 60 measured on 2 cores.
    'authorization {',
    '  timeout: 10',
    '}',
    'jetstream {',
    `  store_dir: ${JSON.stringify(opts.storeDir)}`,
    '}',
    authConfig(deployment, now),
  ].join('\n');
}

/**
 * What a nats-server configuration {@link serverConfig} wrote names of the settings a reload cannot
 * change: `listen`, `http` (null: no such line) and the jetstream block's `store_dir`, each as
 * written (a quoted value unquoted; undefined when it cannot be read). Null when `file` does not exist.
 */
export function readServerConfigSettings(file: string): { listen?: string; http?: string | null; storeDir?: string } | null {
  if (!existsSync(file)) return null;
  const text = readFileSync(file, 'utf8');
  const value = (name: string): string | undefined => {
    const raw = new RegExp(`^\\s*${name}\\s*[:=]\\s*(.+?)\\s*$`, 'm').exec(text)?.[1];
    if (raw === undefined || !raw.startsWith('"')) return raw;
    try {
      const parsed: unknown = JSON.parse(raw);
      return typeof parsed === 'string' ? parsed : undefined;
    } catch {
      return undefined;
    }
  };
  const listen = value('listen');
  const storeDir = value('store_dir');
  const http = /^\s*http\s*[:=]/m.test(text) ? value('http') : null;
  return { ...(listen !== undefined ? { listen } : {}), ...(storeDir !== undefined ? { storeDir } : {}), ...(http !== undefined ? { http } : {}) };
}

/**
 * Replace `file` whole: written into a new file beside it, then renamed over it, so that a reader
 * at that moment (a server reloading its configuration, a service re-reading its credentials) reads
 * the old file or the new one, never half of one. `mode` (a secret's 0600) is the new file's from its
 * creation, so the secret is never readable by others, not even while it is written.
 */
function replaceFile(file: string, content: string, mode?: number): void {
  const next = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.next`;
  try {
    writeFileSync(next, content, { flag: 'wx', ...(mode !== undefined ? { mode } : {}) });
    // The mode a umask may have narrowed is set exactly.
    if (mode !== undefined) chmodSync(next, mode);
    renameSync(next, file);
  } catch (error) {
    rmSync(next, { force: true });
    throw error;
  }
}

/** Write `nats-server.conf` (a whole node) and `auth.conf` (the trust block alone) into the deployment folder; returns the first. */
export function writeServerConfig(deployment: AuthDeployment, opts: ServerConfigOptions): string {
  const now = new Date();
  replaceFile(join(deployment.dir, 'auth.conf'), authConfig(deployment, now));
  // The same block: the operator JWT is now auth.conf's, and the accounts are signed at the same
  // time (ed25519 signatures are deterministic).
  const file = join(deployment.dir, 'nats-server.conf');
  replaceFile(file, serverConfig(deployment, opts, now));
  return file;
}

/** The files {@link writeTrust} wrote. */
export interface WrittenTrust {
  /** `<dir>/auth.conf`, always written. */
  authConf: string;
  /** `<dir>/nats-server.conf` when it was there and its trust block was replaced; null when there is none. */
  serverConfig: string | null;
  /** `<dir>/nats-server.conf` when it is there but holds no trust block Baton wrote (edited by hand): left as it was. */
  serverConfigNotUpdated: string | null;
}

/**
 * Write the trust block again, as it stands now (after a revocation): `auth.conf` whole, and the
 * trust block at the end of `nats-server.conf` (the listener and JetStream settings above it are
 * kept as `baton nats-config` wrote them). Nothing else is touched; a server picks it up on reload.
 */
export function writeTrust(deployment: AuthDeployment, now: Date = new Date()): WrittenTrust {
  const trust = authConfig(deployment, now);
  const authConf = join(deployment.dir, 'auth.conf');
  replaceFile(authConf, trust);
  const server = join(deployment.dir, 'nats-server.conf');
  if (!existsSync(server)) return { authConf, serverConfig: null, serverConfigNotUpdated: null };
  const text = readFileSync(server, 'utf8');
  // serverConfig writes the trust block last: from its first line to the end of the file.
  const found = text.indexOf(`\n${TRUST_MARK}`);
  const start = text.startsWith(TRUST_MARK) ? 0 : found < 0 ? -1 : found + 1;
  if (start < 0) return { authConf, serverConfig: null, serverConfigNotUpdated: server };
  replaceFile(server, `${text.slice(0, start)}${trust}`);
  return { authConf, serverConfig: server, serverConfigNotUpdated: null };
}

/** A readable line for a principal's credentials (never the secret). */
export function describeCreds(issued: IssuedCreds): string {
  return `${describePrincipal(issued.principal)}: ${issued.file} (user ${issued.userPublicKey})`;
}
