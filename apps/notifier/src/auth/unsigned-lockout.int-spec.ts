import { ApiTokenStore } from '@baton/platform';
import { authFixture } from './auth.int-support';

/*
 * Upgrade audit finding 4: after a notifier that holds the token key started, every client still
 * sending a token made before the key (refused 401 `unsigned` until an admin signs it) counted
 * failed authentications against its address, so a console tab or a dashboard polling with such a
 * token locked the whole address out (429 `too_many_auth_failures`) — and kept it out for up to a
 * minute after `baton token sign-existing` had signed every record. `unsigned` is said only to a
 * caller that holds the token's secret (nothing is being guessed), so it is not counted; a wrong
 * secret, an unknown id and an altered record still are. Real NATS and Redis, the notifier in process
 * with a limit of 3 failures a minute.
 */

describe('unsigned token records do not lock an address out (NOTIFIER_AUTH_FAILURES_PER_MINUTE)', () => {
  const fixture = authFixture({ prefix: 'ul', dir: 'unsigned-lockout', env: () => ({ NOTIFIER_AUTH_FAILURES_PER_MINUTE: '3' }) });
  const { inbox } = fixture;

  it('a token made before the key is refused unsigned as often as it is sent, never 429; once signed it reads at once; wrong secrets still lock the address out', async () => {
    const keyless = new ApiTokenStore(fixture.redis.client, fixture.prefix);
    const before = await keyless.create({ name: 'olga', role: 'operator', projects: ['demo'], now: new Date().toISOString() });
    for (let i = 0; i < 6; i++) expect(await inbox(before.token)).toMatchObject({ status: 401, code: 'unauthenticated', reason: 'unsigned' });

    await fixture.admin.signExisting();
    expect(await inbox(before.token)).toMatchObject({ status: 200 });

    // Guessing is still limited: a wrong secret for the same id counts, and the fourth request of the minute is refused.
    const guessed = `${before.token.slice(0, -4)}${before.token.endsWith('aaaa') ? 'bbbb' : 'aaaa'}`;
    for (let i = 0; i < 3; i++) expect(await inbox(guessed)).toMatchObject({ status: 401, reason: 'unknown' });
    expect(await inbox(before.token)).toMatchObject({ status: 429, code: 'too_many_auth_failures' });
  });
});
