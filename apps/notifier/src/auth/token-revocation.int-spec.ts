import { Principals } from '@baton/contracts';
import { permissionsFor, subjectMatches } from '@baton/eventstore';
import { ApiTokenKeys, tokenRevocationMac, tokenRevocationStreamName, tokenRevocationSubject, TokenRevocationLog } from '@baton/platform';
import { authFixture } from './auth.int-support';

/*
 * Token revocation rollback: a Redis writer (who lacks token.key) kept an EARLIER signed record of
 * a token — captured before it was revoked — and put it back after the revocation. Its MAC
 * verifies, so a notifier that trusted Redis for revocations authenticated the token again. Every
 * revocation is now also appended to the deployment's token revocation log (JetStream, written by
 * the admin only, entries signed with the key), which the notifier checks on each authentication:
 * the put-back record is refused 401 `revoked`, a flushed-and-restored Redis too, and a log that
 * cannot be read refuses every token, 503 `revocations_unavailable` (an outage, not bad
 * credentials; token-revocation-follow.int-spec.ts covers NATS down). Real NATS and Redis, this
 * test's own prefix.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('a revoked token stays revoked whatever Redis is made to hold (the token revocation log)', () => {
  const fixture = authFixture({ prefix: 'trv', dir: 'token-revocation' });
  const { prefix, inbox, raw } = fixture;

  it('a signed record from before the revocation, put back into Redis, is refused 401 revoked', async () => {
    const made = await fixture.admin.create({ name: 'rita', role: 'admin', projects: '*', now: new Date().toISOString() });
    const before = await raw(made.info.token_id);
    expect(await inbox(made.token)).toMatchObject({ status: 200 });

    await fixture.admin.revoke(made.info.token_id, new Date().toISOString());
    expect(await inbox(made.token)).toMatchObject({ status: 401, code: 'unauthenticated', reason: 'revoked' });
    // The rollback: the earlier record, its MAC intact.
    await fixture.redis.client.set(ApiTokenKeys.token(prefix, made.info.token_id), before);
    expect(await inbox(made.token)).toMatchObject({ status: 401, code: 'unauthenticated', reason: 'revoked' });
    // Said only to the holder of the secret.
    expect(await inbox(`bt_${made.info.token_id}_${'Z'.repeat(43)}`)).toMatchObject({ status: 401, reason: 'unknown' });
  });

  it('a flushed Redis restored from records captured before a revocation (a rotation) does not bring the revoked token back', async () => {
    const first = await fixture.admin.create({ name: 'nina', role: 'operator', projects: ['demo'], now: new Date().toISOString() });
    const captured = await raw(first.info.token_id);
    // Narrowing a token is making a new one and revoking the old: --rotate.
    const second = await fixture.admin.create({ name: 'nina', role: 'viewer', projects: ['demo'], now: new Date().toISOString(), ifNameTaken: 'rotate' });
    expect(second.rotated).toEqual([first.info.token_id]);
    expect(await inbox(first.token)).toMatchObject({ status: 401, reason: 'revoked' });

    // The deployment's keyspace flushed, then the captured record and its set membership put back.
    for await (const batch of fixture.redis.client.scanStream({ match: `${prefix}:auth:*`, count: 500 })) {
      const keys = batch as string[];
      if (keys.length > 0) await fixture.redis.client.unlink(...keys);
    }
    await fixture.redis.client.set(ApiTokenKeys.token(prefix, first.info.token_id), captured);
    await fixture.redis.client.sadd(ApiTokenKeys.tokens(prefix), first.info.token_id);
    expect(await inbox(first.token)).toMatchObject({ status: 401, reason: 'revoked' });
  });

  it('only the admin may write the log: no agent or service may publish on its subjects; an entry not signed with the key does not count', async () => {
    const subject = tokenRevocationSubject(prefix, '0123456789abcdef');
    const principals = [
      Principals.agent('demo', 'writer'),
      Principals.service('router'),
      Principals.service('ledger'),
      Principals.service('watchdog'),
      Principals.service('notifier'),
      Principals.operator('notifier'),
    ];
    for (const principal of principals) {
      const allowed = permissionsFor(prefix, principal).pub?.allow ?? [];
      expect({ principal, publishes: allowed.filter((pattern) => subjectMatches(pattern, subject)) }).toEqual({ principal, publishes: [] });
    }
    expect(permissionsFor(prefix, Principals.service('notifier')).pub?.allow).toEqual(
      expect.arrayContaining([`$JS.API.STREAM.MSG.GET.${tokenRevocationStreamName(prefix)}`, `$JS.API.STREAM.CREATE.${tokenRevocationStreamName(prefix)}`]),
    );

    // Entries written without the key (or for another token) are ignored: the token still works.
    const made = await fixture.admin.create({ name: 'uma', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    const at = new Date().toISOString();
    const forged = { token_id: made.info.token_id, revoked_at: at, mac: 'f'.repeat(64) };
    await fixture.nats.js.publish(tokenRevocationSubject(prefix, made.info.token_id), JSON.stringify(forged));
    await fixture.nats.js.publish(tokenRevocationSubject(prefix, made.info.token_id), 'not json');
    const other = {
      token_id: '0123456789abcdef',
      revoked_at: at,
      mac: tokenRevocationMac(fixture.key, prefix, { token_id: '0123456789abcdef', revoked_at: at }),
    };
    await fixture.nats.js.publish(tokenRevocationSubject(prefix, made.info.token_id), JSON.stringify(other));
    expect(await inbox(made.token)).toMatchObject({ status: 200 });
    // The real revocation after them counts, its record rolled back or not.
    const before = await raw(made.info.token_id);
    await fixture.admin.revoke(made.info.token_id, new Date().toISOString());
    await fixture.redis.client.set(ApiTokenKeys.token(prefix, made.info.token_id), before);
    expect(await inbox(made.token)).toMatchObject({ status: 401, reason: 'revoked' });
  });

  it('a log that cannot be read refuses every token, 503 revocations_unavailable (fail closed, an outage); a store whose log cannot be written revokes nothing', async () => {
    const made = await fixture.admin.create({ name: 'lena', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    expect(await inbox(made.token)).toMatchObject({ status: 200 });
    await fixture.nats.jsm.streams.delete(tokenRevocationStreamName(prefix));
    // The follower's memory counts until its last confirmation lapses (REVOCATION_FRESH_MS, 3 s); then each lookup reads the stream.
    const deleted = Date.now();
    let refused = await inbox(made.token);
    while (refused.status === 200 && Date.now() - deleted < 5000) {
      await sleep(100);
      refused = await inbox(made.token);
    }
    expect(refused).toMatchObject({ status: 503, code: 'revocations_unavailable' });
    expect(await inbox(`bt_${made.info.token_id}_${'Z'.repeat(43)}`)).toMatchObject({ status: 401, reason: 'unknown' });
    // A notifier that refuses every token serves nobody: it is not ready (a rollout gated on readiness
    // stops there — the upgrade audit's notifier started with credentials that could not read the log).
    const ready = async () => {
      const response = await fetch(`${fixture.base}/health/ready`);
      return { status: response.status, checks: ((await response.json()) as { checks?: Record<string, boolean> }).checks };
    };
    let readiness = await ready();
    for (const since = Date.now(); readiness.status === 200 && Date.now() - since < 5000; readiness = await ready()) await sleep(100);
    expect(readiness).toMatchObject({ status: 503, checks: { nats: true, redis: true, revocations: false } });

    // Revoking through a log that is not there: refused, and Redis keeps the record as it was.
    const before = await raw(made.info.token_id);
    await expect(fixture.admin.revoke(made.info.token_id, new Date().toISOString())).rejects.toMatchObject({
      name: 'TokenRevocationLogError',
      reason: 'stream_missing',
    });
    expect(await raw(made.info.token_id)).toBe(before);

    // The log made again (what the notifier does at its next start): tokens authenticate again.
    await new TokenRevocationLog(fixture.nats, prefix, fixture.key).ensure();
    expect(await inbox(made.token)).toMatchObject({ status: 200 });
    for (const since = Date.now(); readiness.status !== 200 && Date.now() - since < 5000; readiness = await ready()) await sleep(100);
    expect(readiness).toMatchObject({ status: 200, checks: { revocations: true } });
  });
});
