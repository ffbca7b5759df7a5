import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Principals } from '@baton/contracts';
import { credsPath, DeploymentError, issueCreds, openDeployment, writeServerConfig, type AuthDeployment } from './deployment';
import { accountJwt, createNkeyPair, decodeJwtClaims, isUserPublicKey, jwtSignedBy } from './jwt';
import { revokeUsers, usersOfPrincipal } from './revoke';
import { readUserRecord } from './user-record';

const SUPPORT = Principals.agent('acme', 'support');

describe('the account JWT carries the revocation list, signed by the operator', () => {
  const operator = createNkeyPair('operator');
  const account = createNkeyPair('account');
  const user = createNkeyPair('user').publicKey;

  it('decodes back to nats.revocations { user key: seconds } and verifies with the operator key, and with no other', () => {
    const jwt = accountJwt(operator, account, 'BATON', { jetstream: true, revocations: { [user]: 1_800_000_000 } }, 1_800_000_001);
    const claims = decodeJwtClaims(jwt);
    expect(claims).toMatchObject({ iss: operator.publicKey, sub: account.publicKey, iat: 1_800_000_001 });
    expect((claims['nats'] as Record<string, unknown>)['revocations']).toEqual({ [user]: 1_800_000_000 });
    expect((claims['nats'] as Record<string, unknown>)['type']).toBe('account');
    expect(jwtSignedBy(jwt, operator.publicKey)).toBe(true);
    expect(jwtSignedBy(jwt, account.publicKey)).toBe(false);
    expect(jwtSignedBy(jwt, createNkeyPair('operator').publicKey)).toBe(false);
  });

  it('a JWT whose claims were edited after signing no longer verifies (the server would refuse it)', () => {
    const jwt = accountJwt(operator, account, 'BATON', { jetstream: true, revocations: { [user]: 1_800_000_000 } }, 1_800_000_001);
    const [header, payload, signature] = jwt.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { nats: { revocations: Record<string, number> } };
    claims.nats.revocations = {};
    const edited = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`;
    expect(jwtSignedBy(edited, operator.publicKey)).toBe(false);
    expect(jwtSignedBy('not.a-jwt', operator.publicKey)).toBe(false);
  });

  it('no revoked user: no revocations claim at all', () => {
    const claims = decodeJwtClaims(accountJwt(operator, account, 'BATON', { jetstream: true, revocations: {} }, 1));
    expect(claims['nats']).not.toHaveProperty('revocations');
  });

  it('a user public key is U and a valid checksum; an account key, a seed or a truncated key is not', () => {
    expect(isUserPublicKey(user)).toBe(true);
    expect(isUserPublicKey(account.publicKey)).toBe(false);
    expect(isUserPublicKey(user.slice(0, -1))).toBe(false);
    expect(isUserPublicKey(createNkeyPair('user').seed)).toBe(false);
  });
});

describe('the deployment records the users it issues and revokes them through the trust block', () => {
  let root: string;
  let deployment: AuthDeployment;
  const conf = () => readFileSync(join(deployment.dir, 'nats-server.conf'), 'utf8');
  const authConf = () => readFileSync(join(deployment.dir, 'auth.conf'), 'utf8');
  const preloaded = (text: string) => new RegExp(`^  ${deployment.account.publicKey}: (\\S+)$`, 'm').exec(text)?.[1] ?? '';
  const operatorOf = (text: string) => /^operator: (\S+)$/m.exec(text)?.[1];
  const revocationsIn = (text: string) => (decodeJwtClaims(preloaded(text))['nats'] as { revocations?: Record<string, number> }).revocations;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'baton-revoke-'));
    deployment = openDeployment(join(root, 'nats-auth'), 'baton');
    writeServerConfig(deployment, { listen: '127.0.0.1:4999', storeDir: join(root, 'js') });
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('records each issued user key with its principal and the JWT’s issue time, and no secret', () => {
    const at = new Date('2026-01-05T09:00:00.400Z');
    const issued = issueCreds(deployment, SUPPORT, at);
    const text = readFileSync(join(deployment.dir, 'users.jsonl'), 'utf8');
    const last = JSON.parse(text.trim().split('\n').at(-1) ?? '') as unknown;
    expect(last).toEqual({ kind: 'issued', user: issued.userPublicKey, principal: 'agent:acme:support', issued_at: '2026-01-05T09:00:00.000Z' });
    expect(text).not.toMatch(/"S[UAO][A-Z2-7]{50,}/);
    expect(readUserRecord(deployment.dir).get(issued.userPublicKey)).toEqual({
      user: issued.userPublicKey,
      principal: 'agent:acme:support',
      issuedAt: Math.floor(at.getTime() / 1000),
      revokedAt: null,
    });
  });

  it('revoking puts the key in the BATON account JWT of auth.conf and nats-server.conf, re-signed by the operator; the rest of nats-server.conf and the operator JWT stay', () => {
    const issued = issueCreds(deployment, SUPPORT);
    const head = conf().slice(0, conf().indexOf("# Baton's NATS trust ("));
    const operatorBefore = operatorOf(conf());
    const now = new Date('2026-02-01T12:00:00Z');
    const outcome = revokeUsers(deployment, [issued.userPublicKey], now);

    const at = Math.floor(now.getTime() / 1000);
    expect(outcome.revoked).toEqual([
      { user: issued.userPublicKey, principal: 'agent:acme:support', issuedAt: expect.any(Number), revokedAt: at, alreadyRevoked: false },
    ]);
    expect(revocationsIn(authConf())).toEqual({ [issued.userPublicKey]: at });
    expect(jwtSignedBy(preloaded(authConf()), deployment.operator.publicKey)).toBe(true);
    expect(conf().startsWith(head)).toBe(true);
    expect(conf().slice(head.length)).toBe(authConf());
    expect(operatorOf(conf())).toBe(operatorBefore);
    expect(outcome).toMatchObject({
      authConf: join(deployment.dir, 'auth.conf'),
      serverConfig: join(deployment.dir, 'nats-server.conf'),
      serverConfigNotUpdated: null,
    });
    // Its credentials file in the folder no longer connects: removed.
    expect(outcome.removedFiles).toEqual([issued.file]);
    expect(existsSync(issued.file)).toBe(false);
  });

  it('a key revoked again keeps its first time; a second key joins the list', () => {
    const first = issueCreds(deployment, SUPPORT).userPublicKey;
    const second = issueCreds(deployment, Principals.agent('acme', 'builder')).userPublicKey;
    revokeUsers(deployment, [first], new Date('2026-02-01T12:00:00Z'));
    const again = revokeUsers(deployment, [first, second], new Date('2026-03-01T12:00:00Z'));
    expect(again.revoked.map((entry) => [entry.user, entry.alreadyRevoked, new Date(entry.revokedAt * 1000).toISOString()])).toEqual([
      [first, true, '2026-02-01T12:00:00.000Z'],
      [second, false, '2026-03-01T12:00:00.000Z'],
    ]);
    expect(Object.keys(revocationsIn(authConf()) ?? {}).sort()).toEqual([first, second].sort());
  });

  it('baton nats-config run again (writeServerConfig) keeps the revocations and the operator JWT', () => {
    const user = issueCreds(deployment, SUPPORT).userPublicKey;
    revokeUsers(deployment, [user]);
    const operatorBefore = operatorOf(conf());
    writeServerConfig(deployment, { listen: '127.0.0.1:4999', storeDir: join(root, 'js') });
    expect(revocationsIn(conf())).toHaveProperty(user);
    expect(revocationsIn(authConf())).toHaveProperty(user);
    expect(operatorOf(conf())).toBe(operatorBefore);
    expect(operatorOf(authConf())).toBe(operatorBefore);
  });

  it('a principal’s users are its recorded keys plus its current file’s key, issued before the record existed', () => {
    const old = issueCreds(deployment, SUPPORT).userPublicKey;
    rmSync(join(deployment.dir, 'users.jsonl'));
    expect(usersOfPrincipal(deployment, SUPPORT).map((user) => user.user)).toEqual([old]);
    const next = issueCreds(deployment, SUPPORT).userPublicKey;
    // The file now holds `next`; `old` is no longer known to the folder (revoke it by key).
    expect(usersOfPrincipal(deployment, SUPPORT).map((user) => user.user)).toEqual([next]);
    expect(usersOfPrincipal(deployment, Principals.agent('acme', 'nobody'))).toEqual([]);
  });

  it('a key that is not a user public key is refused before anything is written', () => {
    issueCreds(deployment, SUPPORT);
    const before = { record: readFileSync(join(deployment.dir, 'users.jsonl'), 'utf8'), conf: conf() };
    expect(() => revokeUsers(deployment, [deployment.account.publicKey])).toThrow(DeploymentError);
    expect({ record: readFileSync(join(deployment.dir, 'users.jsonl'), 'utf8'), conf: conf() }).toEqual(before);
    expect(existsSync(credsPath(deployment, SUPPORT))).toBe(true);
  });

  it('a record line it cannot read stops it (a skipped revocation would make a user valid again)', () => {
    const user = issueCreds(deployment, SUPPORT).userPublicKey;
    revokeUsers(deployment, [user]);
    appendFileSync(join(deployment.dir, 'users.jsonl'), '{"kind":"revoked","user":"U\n');
    expect(() => readUserRecord(deployment.dir)).toThrow(/users\.jsonl:\d+ is not a line of the user record/);
  });

  it('a nats-server.conf without the trust block Baton writes is left as it was, and said so', () => {
    writeFileSync(join(deployment.dir, 'nats-server.conf'), 'listen: 127.0.0.1:4999\ninclude ./auth.conf\n');
    const outcome = revokeUsers(deployment, [issueCreds(deployment, SUPPORT).userPublicKey]);
    expect(conf()).toBe('listen: 127.0.0.1:4999\ninclude ./auth.conf\n');
    expect(outcome).toMatchObject({ serverConfig: null, serverConfigNotUpdated: join(deployment.dir, 'nats-server.conf') });
    expect(Object.keys(revocationsIn(authConf()) ?? {})).toHaveLength(1);
  });
});
