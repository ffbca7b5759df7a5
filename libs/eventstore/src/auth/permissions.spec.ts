import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Principals, type Principal } from '@baton/contracts';
import { ensureServiceCreds, openDeployment } from './deployment';
import { createNkeyPair, credsFile, decodeJwtClaims, jwtOfCreds, permissionClaims, userJwt } from './jwt';
import { permissionsFor } from './permissions';

/*
 * A service answers a request on the reply subject the requester chose, with the service's own
 * rights. `allow_responses` would let it publish there whatever the subject: an agent could name
 * `$JS.API.STREAM.PURGE.<stream>`, an event or another project's answer subject and have the
 * ledger publish its reply on it. The services that answer requests may publish replies only
 * under the principals' inbox prefixes.
 */
describe('permissionsFor: replies go to inboxes only', () => {
  it.each(['router', 'ledger'] as const)('the %s has no allow_responses and may publish under _INBOX_<prefix>. only among inboxes', (service) => {
    const permissions = permissionsFor('baton', Principals.service(service));
    expect(permissions.allowResponses).toBeUndefined();
    expect(permissions.pub.allow).toContain('_INBOX_baton.>');
    expect((permissions.pub.allow ?? []).filter((subject) => subject.startsWith('_INBOX'))).toEqual(['_INBOX_baton.>']);
  });

  it('no principal has allow_responses, and only the admin (which publishes anywhere) may publish on NATS`s default inbox', () => {
    const principals = [
      Principals.agent('acme', 'support'),
      Principals.service('router'),
      Principals.service('ledger'),
      Principals.service('watchdog'),
      Principals.service('notifier'),
      Principals.operator('notifier'),
    ];
    for (const principal of principals) {
      const permissions = permissionsFor('baton', principal);
      expect({ principal, responses: permissions.allowResponses ?? false }).toEqual({ principal, responses: false });
      expect((permissions.pub.allow ?? []).some((subject) => subject === '>' || subject.startsWith('_INBOX.'))).toBe(false);
    }
    // The admin publishes anywhere already; allow_responses would only make nats-server 2.9 track
    // (and, past 4 096, scan on every delivery) the reply subject of each message a replay reads.
    const admin = permissionsFor('baton', Principals.operator('admin'));
    expect(admin.allowResponses).toBeUndefined();
    expect(admin.pub.allow).toEqual(['>']);
    expect(permissionClaims(admin)).not.toHaveProperty('resp');
  });
});

describe("permissionsFor: the watchdog's snapshots are the watchdog's alone", () => {
  it('only the watchdog may publish on <prefix>.wd.> and make, read or purge <PREFIX>_WATCHDOG; nobody else names them', () => {
    const watchdog = permissionsFor('baton', Principals.service('watchdog')).pub.allow ?? [];
    expect(watchdog).toEqual(
      expect.arrayContaining([
        'baton.wd.>',
        '$JS.API.STREAM.CREATE.BATON_WATCHDOG',
        '$JS.API.STREAM.PURGE.BATON_WATCHDOG',
        '$JS.API.STREAM.MSG.GET.BATON_WATCHDOG',
      ]),
    );
    // The purge is its snapshot stream's only: none of Baton's other streams.
    expect(watchdog.filter((subject) => subject.startsWith('$JS.API.STREAM.PURGE.'))).toEqual(['$JS.API.STREAM.PURGE.BATON_WATCHDOG']);
    for (const principal of [
      Principals.agent('acme', 'support'),
      Principals.service('router'),
      Principals.service('ledger'),
      Principals.service('notifier'),
      Principals.operator('notifier'),
    ]) {
      const allowed = permissionsFor('baton', principal).pub.allow ?? [];
      expect({ principal, named: allowed.filter((subject) => subject.includes('.wd.') || subject.includes('WATCHDOG')) }).toEqual({ principal, named: [] });
    }
  });
});

describe('ensureServiceCreds: credentials that grant what an earlier version granted are issued again', () => {
  it('keeps current service credentials and reissues one whose permissions differ (a ledger user with allow_responses)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-creds-'));
    try {
      const deployment = openDeployment(dir, 'baton');
      const files = ensureServiceCreds(deployment);
      const ledgerBefore = readFileSync(files['ledger']!, 'utf8');
      const routerBefore = readFileSync(files['router']!, 'utf8');
      // Unchanged grants: nothing is issued again.
      ensureServiceCreds(deployment);
      expect(readFileSync(files['ledger']!, 'utf8')).toBe(ledgerBefore);
      // A file as an earlier version issued it (the same grants plus allow_responses), then what
      // ensureServiceCreds leaves in its place.
      const oldThenReissued = (principal: Principal, name: string, file: string) => {
        const user = createNkeyPair('user');
        const old = { ...permissionsFor('baton', principal), allowResponses: true };
        writeFileSync(file, credsFile(userJwt(deployment.account, user, name, old, 1), user));
        ensureServiceCreds(deployment);
        return decodeJwtClaims(jwtOfCreds(readFileSync(file, 'utf8')))['nats'] as Record<string, unknown>;
      };
      const reissued = oldThenReissued(Principals.service('ledger'), 'svc.ledger', files['ledger']!);
      expect(reissued).not.toHaveProperty('resp');
      expect(reissued['pub']).toEqual(permissionClaims(permissionsFor('baton', Principals.service('ledger')))['pub']);
      expect(readFileSync(files['router']!, 'utf8')).toBe(routerBefore);
      // The admin's file as versions before it lost allow_responses issued it: issued again without.
      const adminClaims = oldThenReissued(Principals.operator('admin'), 'admin', files['admin']!);
      expect(adminClaims).not.toHaveProperty('resp');
      expect(adminClaims['pub']).toEqual({ allow: ['>'] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
