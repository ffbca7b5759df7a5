import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { waitFor } from '@baton/wait';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the notifier in this process, with its event helpers
import { holdRun, startFixture, startRun, type NotifierFixture } from '../../apps/notifier/src/web/console-fixture.int-support';
// eslint-disable-next-line @nx/enforce-module-boundaries -- a webhook's id, as the API names it
import { targetId } from '../../apps/notifier/src/notices/webhook-sender';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the CLI's entry point, called in process
import { main } from '../../apps/cli/src/main';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the CLI's buffered output
import { bufferedIo } from '../../apps/cli/src/output';

/*
 * A receiver outage as an operator lives it, through the CLI: two webhooks serve a project and
 * both fail until the notifier gives the notice up (dead-lettered); `baton dlq list` names the
 * notice and `baton dlq show` the command that sends it again; one receiver is repaired, the other
 * still refuses connections; the command reports a partial success — which webhook took the
 * notice, which did not and why (connection_refused) — under its own code, told apart from a
 * redelivery that delivered nothing. The notifier runs in this process against the real NATS and
 * Redis; the receivers are real HTTP servers on loopback ports.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';

describe('baton notice redeliver after a receiver outage: a partial success reads as one (notifier in process, loopback receivers)', () => {
  let fx: NotifierFixture;
  let server: Server;
  let repairedUrl: string;
  let refusedUrl: string;
  let repaired = false;
  let token: string;
  /** The notice ids the repaired receiver took (2xx). */
  const taken: string[] = [];
  /** Every notice id the repaired receiver was sent. */
  const sent: string[] = [];

  const baton = async (...argv: string[]) => {
    const io = bufferedIo();
    const code = await main(argv, {
      io,
      env: { NATS_URL, REDIS_URL, BATON_PREFIX: fx.prefix, BATON_NATS_AUTH: 'none', BATON_API_URL: fx.base, BATON_TOKEN: token, BATON_OPERATOR: 'olga' },
    });
    return { code, out: io.out(), err: io.err() };
  };

  /** A held run of project zeta: its notice reaches both webhooks, fails at both, and is dead-lettered. Resolves with the letter's seq and the notice id. */
  const outage = async (run: string): Promise<{ seq: number; noticeId: string }> => {
    repaired = false;
    await startRun(fx.events, 'zeta', run);
    await holdRun(fx.events, 'zeta', run, 'needs a person');
    return waitFor(
      async () => {
        const listed = await baton('dlq', 'list', '--run', run, '--json');
        const [letter] = JSON.parse(listed.out || '[]') as Array<{ seq: number; notice: { notice_id: string } | null }>;
        return letter?.notice ? { seq: letter.seq, noticeId: letter.notice.notice_id } : null;
      },
      `the notice of ${run} dead-lettered`,
      { timeoutMs: 15_000 },
    );
  };

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const id = String(req.headers['baton-notice-id']);
        sent.push(id);
        if (repaired) taken.push(id);
        res.writeHead(repaired ? 200 : 503).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    repairedUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const gone = createTcpServer();
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    refusedUrl = `http://127.0.0.1:${(gone.address() as AddressInfo).port}/hook`;
    await new Promise((resolve) => gone.close(resolve));
    fx = await startFixture({
      NOTIFIER_WEBHOOKS: JSON.stringify([
        { url: repairedUrl, secret: 'repaired-secret-0123456789', projects: ['zeta'] },
        { url: refusedUrl, secret: 'refused-secret-0123456789', projects: ['zeta'], name: 'zeta-pager' },
      ]),
      NOTIFIER_WEBHOOK_BACKOFF_MS: '50',
      NOTIFIER_WEBHOOK_MAX_ATTEMPTS: '2',
    });
    token = await fx.token('outage-op', 'operator', '*');
  }, 60_000);

  afterAll(async () => {
    await fx?.close();
    await new Promise((resolve) => server?.close(resolve));
  }, 30_000);

  it('dlq list names the notice, dlq show gives the command; run once one receiver is fixed, it reports which webhook took it and which did not (connection_refused), exit 1 with webhook_partially_delivered; again, webhook_delivery_failed', async () => {
    const { seq, noticeId } = await outage('wr-outage-1');
    const repairedId = targetId({ url: repairedUrl });
    const refusedId = targetId({ url: refusedUrl });
    // The repaired one has no name configured: host and path of its URL.
    const repairedName = `${new URL(repairedUrl).host}/hook`;

    // The letter: its project and notice in the list, the ready-to-run command in show; its detail says why each failed, each webhook by name and id.
    const table = await baton('dlq', 'list', '--source', 'notifier-webhooks');
    expect(table.out).toMatch(new RegExp(`^${seq}\\s.*\\szeta\\s+${noticeId}$`, 'm'));
    const shown = await baton('dlq', 'show', String(seq));
    expect(shown.out).toMatch(new RegExp(`detail:.*zeta-pager \\[${refusedId}\\] \\(connection_refused: connect ECONNREFUSED 127\\.0\\.0\\.1:\\d+\\)`));
    expect(shown.out).toContain(`${repairedName} [${repairedId}] (http_status: HTTP 503)`);
    const command = /^ {2}(baton notice redeliver .+)$/m.exec(shown.out)?.[1];
    expect(command).toBe(`baton notice redeliver ${noticeId} --project zeta`);

    // One receiver repaired, the other still refusing: the command as printed.
    repaired = true;
    const partial = await baton(...command!.split(' ').slice(1));
    expect(partial.code).toBe(1);
    expect(partial.out).toBe(
      [
        `notice ${noticeId} (project zeta): 1 of 2 webhook(s) took it now, 1 failed`,
        `  delivered  ${repairedName} [${repairedId}]`,
        `  failed     zeta-pager [${refusedId}]  connection_refused: connect ECONNREFUSED 127.0.0.1:${new URL(refusedUrl).port}`,
        '',
      ].join('\n'),
    );
    expect(partial.err).toContain(
      `notice ${noticeId} was redelivered only in part: webhook_partially_delivered: notice ${noticeId} of zeta reached ${repairedName} [${repairedId}] now`,
    );
    expect(partial.err).not.toContain('was not redelivered');
    expect(taken).toEqual([noticeId]);

    // Again: the repaired one had it (skipped), nothing was delivered now — told apart from a partial success.
    const again = await baton('notice', 'redeliver', noticeId, '--project', 'zeta', '--json');
    expect(again.code).toBe(1);
    expect(JSON.parse(again.out)).toMatchObject({
      error: {
        code: 'webhook_delivery_failed',
        details: { delivered: [], skipped: [repairedId], failed: [{ target: refusedId, reason: 'connection_refused' }] },
      },
    });
    expect(JSON.parse(again.err)).toMatchObject({ error: { code: 'webhook_delivery_failed' } });
    expect(taken).toEqual([noticeId]);
  }, 60_000);

  it('--json: the partial success is the API reply with code webhook_partially_delivered, delivered and failed[] { target, name, reason, error }, webhook_names', async () => {
    const { noticeId } = await outage('wr-outage-2');
    repaired = true;
    const partial = await baton('notice', 'redeliver', noticeId, '--project', 'zeta', '--json');
    expect(partial.code).toBe(1);
    expect(JSON.parse(partial.out)).toEqual({
      error: {
        code: 'webhook_partially_delivered',
        message: expect.stringContaining('but not'),
        issues: [],
        details: {
          delivered: [targetId({ url: repairedUrl })],
          skipped: [],
          busy: [],
          failed: [{ target: targetId({ url: refusedUrl }), name: 'zeta-pager', reason: 'connection_refused', error: expect.stringContaining('ECONNREFUSED') }],
          webhook_names: { [targetId({ url: repairedUrl })]: `${new URL(repairedUrl).host}/hook`, [targetId({ url: refusedUrl })]: 'zeta-pager' },
        },
      },
    });
    expect(JSON.parse(partial.err)).toMatchObject({ error: { code: 'webhook_partially_delivered', details: { http_status: 502 } } });
    expect(sent.filter((id) => id === noticeId).length).toBeGreaterThanOrEqual(3);
    expect(taken.filter((id) => id === noticeId)).toEqual([noticeId]);
  }, 60_000);
});
