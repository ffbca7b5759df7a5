import { connectNats } from '@baton/eventstore';
import { ApiTokenKeys, TokenRevocationLog, tokenRevocationStreamName, type RunningService } from '@baton/platform';
import { startPrivateServer, type PrivateServer } from '../api/private-server.int-support';
import { authFixture } from './auth.int-support';
import { AuthService } from './auth.service';
import { SESSION_COOKIE } from './cookies';

/*
 * The notifier follows the token revocation log instead of asking NATS on every authentication:
 * while its follower is caught up, a token is checked against the revocations it holds in memory
 * (no `STREAM.MSG.GET` per request, counted here by listening on the JetStream API subjects); a
 * revocation appended by another process is honoured within a bounded wait, even when the token's
 * Redis record was never marked revoked (rolled back). While the log cannot be read (NATS down),
 * a token that verifies is answered 503 `revocations_unavailable` with `Retry-After` (it was 401,
 * which tells a client its credentials are bad), and the web console shows a "try again shortly"
 * page instead of the sign-in page. Real NATS and Redis; a private nats-server for the outage.
 */

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Wait until the notifier's revocation log says it answers from memory (a no-op where it has no such state). */
async function followerLive(service: RunningService, withinMs = 10_000): Promise<void> {
  const log = service.app.get(AuthService).revocations as (TokenRevocationLog & { followState?: () => { live: boolean } }) | null;
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    if (log?.followState?.().live === true) return;
    await sleep(50);
  }
}

describe('the notifier follows the token revocation log (no NATS round trip per authentication)', () => {
  /** Requests for one message of the revocation stream (`STREAM.MSG.GET`, `DIRECT.GET`) from any client. */
  let gets = 0;
  const fixture = authFixture({
    prefix: 'trf',
    dir: 'token-follow',
    beforeStart: async ({ nats, prefix }) => {
      const stream = tokenRevocationStreamName(prefix);
      for (const subject of [`$JS.API.STREAM.MSG.GET.${stream}`, `$JS.API.DIRECT.GET.${stream}`, `$JS.API.DIRECT.GET.${stream}.>`])
        nats.connection.subscribe(subject, { callback: () => void gets++ });
      await nats.connection.flush();
    },
  });
  const { prefix, inbox, raw } = fixture;

  it('a caught-up follower answers a good token and a revoked one from memory: no STREAM.MSG.GET per request', async () => {
    const good = await fixture.admin.create({ name: 'gina', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    const gone = await fixture.admin.create({ name: 'otto', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    const before = await raw(gone.info.token_id);
    await fixture.admin.revoke(gone.info.token_id, new Date().toISOString());
    // The rollback: the earlier signed record put back, so only the log says it is revoked.
    await fixture.redis.client.set(ApiTokenKeys.token(prefix, gone.info.token_id), before);
    await followerLive(fixture.service);

    // The listener hears point reads (whoever makes them): the test could fail.
    const heard = gets;
    await new TokenRevocationLog(fixture.nats, prefix, fixture.key).revokedAt(good.info.token_id);
    await fixture.nats.connection.flush();
    expect(gets).toBeGreaterThan(heard);

    const start = gets;
    for (let i = 0; i < 20; i++) {
      expect(await inbox(good.token)).toMatchObject({ status: 200 });
      expect(await inbox(gone.token)).toMatchObject({ status: 401, code: 'unauthenticated', reason: 'revoked' });
    }
    await fixture.nats.connection.flush();
    expect(gets - start).toBe(0);
  }, 30_000);

  it('a revocation another process appends while the notifier runs is refused within a bounded wait, its Redis record never marked revoked', async () => {
    const made = await fixture.admin.create({ name: 'remy', role: 'operator', projects: ['demo'], now: new Date().toISOString() });
    await followerLive(fixture.service);
    expect(await inbox(made.token)).toMatchObject({ status: 200 });
    const record = await raw(made.info.token_id);
    // Another process (the CLI, a second notifier) appends the revocation; Redis keeps the active record.
    const other = await connectNats({ servers: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', reconnect: false });
    try {
      await new TokenRevocationLog(other, prefix, fixture.key).record(made.info.token_id, new Date().toISOString());
    } finally {
      await other.drain().catch(() => undefined);
    }
    const appended = Date.now();
    let refused: { status: number; reason?: string | undefined } = { status: 0 };
    while (Date.now() - appended < 4000) {
      refused = await inbox(made.token);
      if (refused.status === 401) break;
      await sleep(20);
    }
    // The documented bound is REVOCATION_FRESH_MS (3 s); the follower delivers in milliseconds.
    expect(refused).toMatchObject({ status: 401, reason: 'revoked' });
    expect(Date.now() - appended).toBeLessThan(4000);
    expect(await raw(made.info.token_id)).toBe(record);
  }, 30_000);
});

describe('NATS down: 503 revocations_unavailable with Retry-After, not 401 (an outage is not bad credentials)', () => {
  let natsServer: PrivateServer;
  beforeAll(async () => {
    natsServer = await startPrivateServer('nats-server');
  }, 60_000);
  const fixture = authFixture({ prefix: 'trn', dir: 'token-outage', env: () => ({ NATS_URL: natsServer.url }) });
  afterAll(async () => {
    await natsServer?.remove().catch(() => undefined);
  }, 30_000);

  it('a token that verifies, and a browser session, hear 503 revocations_unavailable (the page says try again, not sign in); a wrong secret still 401 unknown; back to 200 with NATS', async () => {
    const made = await fixture.admin.create({ name: 'nora', role: 'viewer', projects: ['demo'], now: new Date().toISOString() });
    const bearer = { authorization: `Bearer ${made.token}` };
    const deadline = Date.now() + 15_000;
    while ((await fetch(`${fixture.base}/v1/inbox`, { headers: bearer })).status !== 200) {
      if (Date.now() > deadline) throw new Error('the inbox never answered 200 to a signed token');
      await sleep(100);
    }
    const auth = fixture.service.app.get(AuthService);
    const principal = (await auth.tokens.principalOf(made.info.token_id, 'session'))!;
    const session = await auth.sessions.create(principal, new Date().toISOString());
    const cookie = { cookie: `${SESSION_COOKIE}=${session.id}` };
    expect((await fetch(`${fixture.base}/inbox`, { headers: cookie, redirect: 'manual' })).status).toBe(200);

    await natsServer.stop();
    let response = await fetch(`${fixture.base}/v1/inbox`, { headers: bearer });
    const until = Date.now() + 20_000;
    while (response.status === 200 && Date.now() < until) {
      await sleep(100);
      response = await fetch(`${fixture.base}/v1/inbox`, { headers: bearer });
    }
    const body = (await response.json()) as { error?: { code?: string } };
    expect({ status: response.status, code: body.error?.code, retryAfter: Number(response.headers.get('retry-after')) > 0 }).toEqual({
      status: 503,
      code: 'revocations_unavailable',
      retryAfter: true,
    });
    expect(response.headers.get('www-authenticate')).toBeNull();
    // Only the holder of the secret learns it.
    const guessed = await fetch(`${fixture.base}/v1/inbox`, { headers: { authorization: `Bearer bt_${made.info.token_id}_${'Z'.repeat(43)}` } });
    expect({ status: guessed.status, reason: ((await guessed.json()) as { error?: { details?: { reason?: string } } }).error?.details?.reason }).toEqual({
      status: 401,
      reason: 'unknown',
    });
    // The browser session: the JSON API 503 too, and the page a "try again shortly" page, not a redirect to /login.
    expect((await fetch(`${fixture.base}/v1/inbox`, { headers: cookie })).status).toBe(503);
    const page = await fetch(`${fixture.base}/inbox`, { headers: cookie, redirect: 'manual' });
    const html = await page.text();
    expect({ status: page.status, location: page.headers.get('location'), retryAfter: Number(page.headers.get('retry-after')) > 0 }).toEqual({
      status: 503,
      location: null,
      retryAfter: true,
    });
    expect(html).toContain('Try again shortly');
    expect(html).toContain('revocations_unavailable');

    await natsServer.start();
    const back = Date.now() + 30_000;
    while ((await fetch(`${fixture.base}/v1/inbox`, { headers: bearer })).status !== 200) {
      if (Date.now() > back) throw new Error('the inbox never answered 200 again once NATS was back');
      await sleep(200);
    }
    expect((await fetch(`${fixture.base}/inbox`, { headers: cookie, redirect: 'manual' })).status).toBe(200);
  }, 90_000);
});
