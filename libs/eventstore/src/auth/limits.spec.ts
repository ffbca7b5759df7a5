import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Limits, Principals } from '@baton/contracts';
import { authConfig, DeploymentError, issueCreds, openDeployment, readAccountLimits, writeAccountLimits } from './deployment';
import { decodeJwtClaims, jwtOfCreds } from './jwt';
import { AGENT_USER_LIMITS, userLimitsFor } from './limits';
import { revokeUsers } from './revoke';

/** The BATON account's `limits` claim in a trust block (auth.conf). */
function accountLimitsIn(trust: string, account: string): Record<string, unknown> {
  const jwt = new RegExp(`^  ${account}: (\\S+)$`, 'm').exec(trust)?.[1];
  if (jwt === undefined) throw new Error('no BATON account JWT in the trust block');
  return (decodeJwtClaims(jwt)['nats'] as { limits: Record<string, unknown> }).limits;
}

describe('what bounds an agent and the account (user and account JWT limits)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-limits-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('an agent`s user JWT carries its largest message (256 KiB of body and 16 KiB of headers) and its subscriptions; the services and the admin none', () => {
    const deployment = openDeployment(join(dir, 'users'), 'limitspec');
    expect(AGENT_USER_LIMITS).toEqual({ payload: Limits.maxMessageBytes + 16 * 1024, subs: 1_000 });
    const nats = (creds: string) => decodeJwtClaims(jwtOfCreds(creds))['nats'];
    const agent = issueCreds(deployment, Principals.agent('acme', 'bob'));
    expect(agent.limits).toEqual(AGENT_USER_LIMITS);
    expect(nats(agent.creds)).toMatchObject({ payload: AGENT_USER_LIMITS.payload, subs: AGENT_USER_LIMITS.subs, data: -1 });
    const chosen = issueCreds(deployment, Principals.agent('acme', 'big'), new Date(), { payload: 1024 * 1024, subs: -1 });
    expect(nats(chosen.creds)).toMatchObject({ payload: 1024 * 1024, subs: -1 });
    for (const principal of [{ kind: 'svc', service: 'ledger' } as const, { kind: 'op', relay: 'admin' } as const]) {
      expect(userLimitsFor(principal, { payload: 10 })).toEqual({ payload: -1, subs: -1 });
      expect(nats(issueCreds(deployment, principal).creds)).toMatchObject({ payload: -1, subs: -1 });
    }
  });

  it('the account`s storage limit is kept in the folder and signed into every account JWT, a revocation`s too; none by default', () => {
    const deployment = openDeployment(join(dir, 'account'), 'limitspec');
    const account = deployment.account.publicKey;
    expect(readAccountLimits(deployment.dir)).toEqual({ maxStore: null });
    expect(accountLimitsIn(authConfig(deployment), account)).toMatchObject({ disk_storage: -1, mem_storage: -1 });
    writeAccountLimits(deployment, { maxStore: 50 * 1024 ** 3 });
    expect(accountLimitsIn(authConfig(deployment), account)).toMatchObject({ disk_storage: 50 * 1024 ** 3, mem_storage: -1 });
    // A revocation signs the account again: the limit stays.
    const issued = issueCreds(deployment, Principals.agent('acme', 'gone'));
    const revoked = revokeUsers(deployment, [issued.userPublicKey]);
    expect(accountLimitsIn(readFileSync(revoked.authConf, 'utf8'), account)).toMatchObject({ disk_storage: 50 * 1024 ** 3 });
    writeAccountLimits(deployment, { maxStore: null });
    expect(accountLimitsIn(authConfig(deployment), account)).toMatchObject({ disk_storage: -1 });
    // A file that cannot be read is never taken for "no limit": signing would lift it unseen.
    writeFileSync(join(deployment.dir, 'account-limits.json'), '{"max_store": "lots"}');
    expect(() => authConfig(deployment)).toThrow(DeploymentError);
  });
});
