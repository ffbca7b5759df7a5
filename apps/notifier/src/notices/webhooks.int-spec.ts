import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { HumanActionNoticeSchema, Subjects } from '@baton/contracts';
import { batonStreamNames, DlqAdmin } from '@baton/eventstore';
import { verifyWebhookSignature, webhookDedupeKey } from '@baton/sdk';
import { holdRun, startFixture, startRun, stopRun, thrashMesh, type NotifierFixture } from '../web/console-fixture.int-support';
import { MESH_WEBHOOK_DURABLE, WEBHOOK_DURABLE, WEBHOOK_MAX_ACK_PENDING, WebhookDelivery } from './webhook-delivery';
import { targetId } from './webhook-sender';

interface Received {
  hook: string;
  at: number;
  headers: IncomingHttpHeaders;
  body: string;
  status: number;
}

const secrets = {
  flaky: 'flaky-secret-0123456789',
  steady: 'steady-secret-0123456789',
  beta: 'beta-secret-0123456789',
  down: 'down-secret-0123456789',
  repaired: 'repaired-secret-0123456789',
  refused: 'refused-secret-0123456789',
};
const decoder = new TextDecoder();

describe('human action notices to webhooks: signed, retried with backoff, deduplicated by project and notice id (loopback HTTP)', () => {
  let fx: NotifierFixture;
  let server: Server;
  let url: string;
  const received: Received[] = [];
  const natsNotices: string[] = [];
  let flakyFailures = 2;
  let downRecovered = false;
  let repaired = false;
  /** A webhook whose port nothing listens on: every call is refused. */
  let refusedUrl: string;

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        const hook = (req.url ?? '').slice(1);
        let status = 200;
        if (hook === 'flaky' && flakyFailures > 0) {
          flakyFailures -= 1;
          status = 500;
        }
        if (hook === 'down' && !downRecovered) status = 503;
        if (hook === 'repaired' && !repaired) status = 503;
        received.push({ hook, at: Date.now(), headers: req.headers, body, status });
        // A recovered receiver answers slowly: two requests at once overlap.
        if (hook === 'down' && downRecovered) setTimeout(() => res.writeHead(status).end(), 300);
        else res.writeHead(status).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const gone = createTcpServer();
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    refusedUrl = `http://127.0.0.1:${(gone.address() as AddressInfo).port}/refused`;
    await new Promise((resolve) => gone.close(resolve));
    fx = await startFixture({
      NOTIFIER_WEBHOOKS: JSON.stringify([
        { url: `${url}/flaky`, secret: secrets.flaky, projects: ['alpha'] },
        { url: `${url}/steady`, secret: secrets.steady },
        { url: `${url}/beta`, secret: secrets.beta, projects: ['beta'] },
        { url: `${url}/down`, secret: secrets.down, projects: ['gamma'] },
        { url: `${url}/repaired`, secret: secrets.repaired, projects: ['zeta'] },
        { url: refusedUrl, secret: secrets.refused, projects: ['zeta'], name: 'zeta-pager' },
      ]),
      NOTIFIER_WEBHOOK_BACKOFF_MS: '100',
      NOTIFIER_WEBHOOK_MAX_ATTEMPTS: '4',
    });
    fx.nats.connection.subscribe(Subjects.notice(fx.prefix, 'alpha'), {
      callback: (_err, msg) => natsNotices.push((JSON.parse(decoder.decode(msg.data)) as { notice_id: string }).notice_id),
    });
    await fx.nats.connection.flush();
    await startRun(fx.events, 'alpha', 'wr-hook');
    await stopRun(fx.events, 'alpha', 'wr-hook', {
      packet_id: 'stop-hook',
      why: 'policy',
      tried: ['search'],
      pending: { name: 'refund', args: { amount: 40 } },
    });
    for (
      let i = 0;
      i < 200 && (received.filter((r) => r.hook === 'flaky' && r.status === 200).length === 0 || received.filter((r) => r.hook === 'steady').length === 0);
      i++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // The server sees a request before the sender records its delivery mark (after the 2xx
    // arrives); give the sender a moment to record the last one before the tests read them.
    await new Promise((resolve) => setTimeout(resolve, 750));
  }, 30_000);

  afterAll(async () => {
    await fx?.close();
    await new Promise((resolve) => server.close(resolve));
  });

  it('a failing webhook is retried with exponential backoff until it answers 2xx; each webhook gets the notice once it succeeded', async () => {
    const flaky = received.filter((r) => r.hook === 'flaky');
    expect(flaky.map((r) => r.status)).toEqual([500, 500, 200]);
    expect(flaky.map((r) => r.headers['baton-delivery-attempt'])).toEqual(['1', '2', '3']);
    const gaps = [flaky[1]!.at - flaky[0]!.at, flaky[2]!.at - flaky[1]!.at];
    expect(gaps[0]).toBeGreaterThanOrEqual(90);
    expect(gaps[1]).toBeGreaterThanOrEqual(190);
    // The steady webhook answered 2xx at once: it is not called again while the flaky one is retried.
    expect(received.filter((r) => r.hook === 'steady').map((r) => r.status)).toEqual([200]);
    // A webhook limited to another project gets nothing.
    expect(received.filter((r) => r.hook === 'beta')).toEqual([]);
  });

  it('deliveries are signed with HMAC-SHA256 over timestamp and body: the SDK helper verifies them and refuses a tampered body, a wrong secret or an old timestamp', async () => {
    const delivery = received.find((r) => r.hook === 'flaky' && r.status === 200)!;
    const notice = HumanActionNoticeSchema.parse(JSON.parse(delivery.body));
    expect(notice).toMatchObject({ project: 'alpha', workflow_run_id: 'wr-hook', reason: 'stop', stop_id: 'stop-hook' });
    expect(delivery.headers['baton-notice-id']).toBe(notice.notice_id);
    expect(delivery.headers['baton-signature']).toMatch(/^v1=[0-9a-f]{64}$/);
    expect(verifyWebhookSignature(delivery.body, delivery.headers, secrets.flaky, { toleranceSec: 300 })).toEqual({
      ok: true,
      timestamp: Number(delivery.headers['baton-timestamp']),
    });
    expect(verifyWebhookSignature(delivery.body.replace('wr-hook', 'wr-evil'), delivery.headers, secrets.flaky)).toEqual({
      ok: false,
      reason: 'signature_mismatch',
    });
    expect(verifyWebhookSignature(delivery.body, delivery.headers, secrets.steady)).toEqual({ ok: false, reason: 'signature_mismatch' });
    const later = Number(delivery.headers['baton-timestamp']) + 3600;
    expect(verifyWebhookSignature(delivery.body, delivery.headers, secrets.flaky, { toleranceSec: 300, nowSec: later })).toEqual({
      ok: false,
      reason: 'timestamp_out_of_tolerance',
    });
    const steady = received.find((r) => r.hook === 'steady')!;
    expect(verifyWebhookSignature(steady.body, steady.headers, secrets.steady).ok).toBe(true);
  });

  it('deduplicated by notice id: delivering the same notice again calls no webhook that already answered 2xx; the notice is still published on the NATS subject once', async () => {
    const notice = HumanActionNoticeSchema.parse(JSON.parse(received.find((r) => r.hook === 'steady')!.body));
    const sender = fx.service.app.get(WebhookDelivery).webhookSender!;
    const before = received.length;
    const report = await sender.deliver(notice, 9);
    expect(report).toEqual({
      delivered: [],
      skipped: expect.arrayContaining([targetId({ url: `${url}/flaky` }), targetId({ url: `${url}/steady` })]),
      busy: [],
      failed: [],
    });
    expect(received.length).toBe(before);
    expect(natsNotices).toEqual([notice.notice_id]);
  });

  it("deduplicated by project and notice id: two projects' notices of the same id both reach a webhook serving both (Baton-Project says whose); a redelivery of either is skipped", async () => {
    const steadyId = targetId({ url: `${url}/steady` });
    const sender = fx.service.app.get(WebhookDelivery).webhookSender!;
    const projectOf = (r: Received) => (JSON.parse(r.body) as { project: string }).project;
    const twins = (project: string) => received.filter((r) => r.hook === 'steady' && r.body.includes('wr-twin') && projectOf(r) === project);
    const until = async (done: () => Promise<boolean> | boolean, timeoutMs = 10_000) => {
      for (const deadline = Date.now() + timeoutMs; !(await done()) && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 50));
    };
    // The webhook's delivery marks of a notice id (whatever their layout), so a test step waits until the sender recorded one.
    const marks = async (noticeId: string) => (await fx.redis.client.keys(`${fx.prefix}:webhooks:*${steadyId}*`)).filter((k) => k.endsWith(`:${noticeId}`));
    const onNats: Array<{ subject: string; key: string | null; project: string }> = [];
    for (const project of ['delta', 'omega'])
      fx.nats.connection.subscribe(Subjects.notice(fx.prefix, project), {
        callback: (_err, msg) =>
          onNats.push({
            subject: msg.subject,
            key: msg.headers ? webhookDedupeKey(msg.headers) : null,
            project: (JSON.parse(decoder.decode(msg.data)) as { project: string }).project,
          }),
      });
    await fx.nats.connection.flush();

    // Project delta's run wr-twin holds on its result res-wr-twin: notice nt-r-res-wr-twin, delivered and recorded.
    await startRun(fx.events, 'delta', 'wr-twin');
    await holdRun(fx.events, 'delta', 'wr-twin', 'needs a person');
    await until(() => twins('delta').length > 0);
    expect(twins('delta').map((r) => r.status)).toEqual([200]);
    const delta = HumanActionNoticeSchema.parse(JSON.parse(twins('delta')[0]!.body));
    await until(async () => (await marks(delta.notice_id)).length > 0);
    expect(await marks(delta.notice_id)).toHaveLength(1);

    // Project omega's run of the same id holds on a result of the same id: a notice of the same id, another project's.
    await startRun(fx.events, 'omega', 'wr-twin');
    await holdRun(fx.events, 'omega', 'wr-twin', 'needs a person');
    await until(() => twins('omega').length > 0);
    expect(twins('omega').map((r) => r.status)).toEqual([200]);
    const omega = HumanActionNoticeSchema.parse(JSON.parse(twins('omega')[0]!.body));
    expect(omega.notice_id).toBe(delta.notice_id);
    await until(async () => (await marks(omega.notice_id)).length > 1);

    // Both deliveries carry the notice id and the project; the SDK gives the receiver's dedupe key.
    for (const [project, delivery] of [
      ['delta', twins('delta')[0]!],
      ['omega', twins('omega')[0]!],
    ] as const) {
      expect(delivery.headers['baton-notice-id']).toBe(delta.notice_id);
      expect(delivery.headers['baton-project']).toBe(project);
      expect(webhookDedupeKey(delivery.headers)).toBe(`${project}:${delta.notice_id}`);
      expect(verifyWebhookSignature(delivery.body, delivery.headers, secrets.steady).ok).toBe(true);
    }
    // One delivery mark per project, keyed by project and notice id.
    expect((await marks(delta.notice_id)).sort()).toEqual([
      `${fx.prefix}:webhooks:delivered:${steadyId}:delta:${delta.notice_id}`,
      `${fx.prefix}:webhooks:delivered:${steadyId}:omega:${delta.notice_id}`,
    ]);

    // Redelivering either project's notice calls the webhook no more.
    const before = received.length;
    expect(await sender.deliver(omega, 5)).toEqual({ delivered: [], skipped: [steadyId], busy: [], failed: [] });
    expect(await sender.deliver(delta, 5)).toEqual({ delivered: [], skipped: [steadyId], busy: [], failed: [] });
    expect(received.length).toBe(before);

    // On NATS too each project's notice is its own message, its headers naming the project.
    await until(() => onNats.length >= 2);
    expect(onNats.sort((a, b) => a.project.localeCompare(b.project))).toEqual([
      { subject: Subjects.notice(fx.prefix, 'delta'), key: `delta:${delta.notice_id}`, project: 'delta' },
      { subject: Subjects.notice(fx.prefix, 'omega'), key: `omega:${delta.notice_id}`, project: 'omega' },
    ]);
  }, 30_000);

  it("a mesh's notice (a mesh stopped at its cap) reaches the webhooks like a run's, signed, once", async () => {
    const packetId = await thrashMesh(fx.events, 'beta', 'mesh-hook');
    let delivered: Received[] = [];
    for (let i = 0; i < 100 && delivered.length === 0; i++) {
      delivered = received.filter((r) => r.hook === 'beta' && r.body.includes('mesh-hook'));
      if (delivered.length === 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(delivered.map((r) => r.status)).toEqual([200]);
    const notice = HumanActionNoticeSchema.parse(JSON.parse(delivered[0]!.body));
    expect(notice).toMatchObject({ project: 'beta', workflow_run_id: 'mesh-hook', reason: 'stop', stop_id: packetId, recipient: { handle: 'sam' } });
    expect(verifyWebhookSignature(delivered[0]!.body, delivered[0]!.headers, secrets.beta).ok).toBe(true);
    // The steady webhook (every project) got it too; the alpha-only one did not.
    expect(received.filter((r) => r.hook === 'steady' && r.body.includes('mesh-hook'))).toHaveLength(1);
    expect(received.filter((r) => r.hook === 'flaky' && r.body.includes('mesh-hook'))).toHaveLength(0);
  });

  it('a webhook that keeps failing is dead-lettered after NOTIFIER_WEBHOOK_MAX_ATTEMPTS deliveries', async () => {
    await startRun(fx.events, 'gamma', 'wr-down');
    await stopRun(fx.events, 'gamma', 'wr-down', { packet_id: 'stop-down', why: 'budget', tried: [] });
    const dlq = batonStreamNames(fx.prefix).dlq;
    let dead: { reason: string | undefined; source: string | undefined } | null = null;
    for (let i = 0; i < 100 && !dead; i++) {
      const info = await fx.nats.jsm.streams.info(dlq);
      if (info.state.messages > 0) {
        const msg = await fx.nats.jsm.streams.getMessage(dlq, { last_by_subj: Subjects.deadLetter(fx.prefix, 'notifier-webhooks') }).catch(() => null);
        if (msg) dead = { reason: msg.header?.get('Baton-Dlq-Reason'), source: msg.header?.get('Baton-Dlq-Source') };
      }
      if (!dead) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(dead).toEqual({ reason: 'max_deliveries', source: 'notifier-webhooks' });
    expect(received.filter((r) => r.hook === 'down').map((r) => r.status)).toEqual([503, 503, 503, 503]);
  });

  it("a dead-lettered notice is sent again on an operator's request once the receiver is fixed (POST …/notices/:id/redeliver): signed, once; a viewer, an unknown notice and a receiver still failing are refused, typed", async () => {
    const noticeId = String(received.find((r) => r.hook === 'down')!.headers['baton-notice-id']);
    const post = async (project: string, id: string, token: string) => {
      const response = await fetch(`${fx.base}/v1/projects/${project}/notices/${encodeURIComponent(id)}/redeliver`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const operator = await fx.token('redeliver-op', 'operator', '*');
    // Still failing: 502, typed, naming the webhook and what it answered.
    const failing = await post('gamma', noticeId, operator);
    expect(failing).toMatchObject({
      status: 502,
      body: {
        error: {
          code: 'webhook_delivery_failed',
          details: { failed: [{ target: expect.any(String), reason: 'http_status', status: 503, error: 'HTTP 503' }] },
        },
      },
    });
    expect((await post('gamma', noticeId, await fx.token('redeliver-viewer', 'viewer', '*'))).body).toMatchObject({ error: { code: 'role_forbidden' } });
    expect(await post('gamma', 'nt-x-nope', operator)).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } });
    expect(await post('delta', noticeId, operator)).toMatchObject({ status: 404, body: { error: { code: 'not_found' } } }); // served by the steady webhook, but no such notice there

    downRecovered = true;
    const before = received.filter((r) => r.hook === 'down').length;
    // Two requests at once: one sends, the other finds it under way; the receiver gets it once.
    const both = await Promise.all([post('gamma', noticeId, operator), post('gamma', noticeId, operator)]);
    const sent = both.find((r) => r.status === 200)!;
    expect(sent).toMatchObject({ status: 200, body: { outcome: 'delivered', project: 'gamma', notice_id: noticeId, skipped: expect.any(Array) } });
    expect(both.find((r) => r !== sent)).toMatchObject({
      status: 409,
      body: { error: { code: 'delivery_in_progress', details: { busy: [expect.any(String)] } } },
    });
    const redelivered = received.filter((r) => r.hook === 'down').slice(before);
    expect(redelivered.map((r) => [r.status, r.headers['baton-delivery-attempt']])).toEqual([[200, '5']]);
    // The same bytes' order as the consumer's deliveries (the notice's own field order).
    expect(Object.keys(JSON.parse(redelivered[0]!.body) as object)).toEqual(Object.keys(JSON.parse(received.find((r) => r.hook === 'down')!.body) as object));
    expect(verifyWebhookSignature(redelivered[0]!.body, redelivered[0]!.headers, secrets.down).ok).toBe(true);
    expect(HumanActionNoticeSchema.parse(JSON.parse(redelivered[0]!.body))).toMatchObject({
      notice_id: noticeId,
      project: 'gamma',
      workflow_run_id: 'wr-down',
    });
    // Again: every webhook already took it.
    expect(await post('gamma', noticeId, operator)).toMatchObject({ status: 200, body: { outcome: 'already_delivered', delivered: [] } });
    expect(received.filter((r) => r.hook === 'down')).toHaveLength(before + 1);
  });

  it("a receiver refusing connections: the retries' log lines, the dead letter's detail and the redelivery's details say connection_refused (ECONNREFUSED), never only 'fetch failed'; the letter names its notice", async () => {
    const warn = jest.spyOn(fx.service.runtime.logger, 'warn');
    const refusedId = targetId({ url: refusedUrl });
    const repairedId = targetId({ url: `${url}/repaired` });
    try {
      await startRun(fx.events, 'zeta', 'wr-refused');
      await holdRun(fx.events, 'zeta', 'wr-refused', 'needs a person');
      const admin = new DlqAdmin({ js: fx.nats.js, jsm: fx.nats.jsm, prefix: fx.prefix });
      let letters = await admin.list({ source: 'notifier-webhooks', project: 'zeta' }).catch(() => []);
      for (let i = 0; i < 100 && letters.length === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        letters = await admin.list({ source: 'notifier-webhooks', project: 'zeta' }).catch(() => []);
      }
      expect(letters).toHaveLength(1);
      const noticeId = String(received.find((r) => r.hook === 'repaired')!.headers['baton-notice-id']);
      // The dead letter's detail: each webhook that failed by name and id (its configured name, or
      // host and path of its URL), its reason and what happened.
      expect(letters[0]!.reason).toBe('max_deliveries');
      expect(letters[0]!.detail).toContain(`zeta-pager [${refusedId}] (connection_refused: connect ECONNREFUSED 127.0.0.1:${new URL(refusedUrl).port})`);
      expect(letters[0]!.detail).toContain(`${new URL(url).host}/repaired [${repairedId}] (http_status: HTTP 503)`);
      expect(letters[0]!.detail).not.toContain('fetch failed');
      // It names the notice a webhook never took: what `baton notice redeliver` takes.
      expect(letters[0]!.notice).toEqual({ project: 'zeta', noticeId });
      // The retries' log lines: the same, and each failure as a field.
      const retries = warn.mock.calls.filter(
        ([message, fields]) => message === 'webhook delivery will be retried' && JSON.stringify(fields).includes(refusedId),
      );
      expect(retries.length).toBe(3);
      for (const [, fields] of retries) {
        expect(String((fields as { error: string }).error)).toContain(`zeta-pager [${refusedId}] (connection_refused: connect ECONNREFUSED`);
        expect((fields as { failures: unknown[] }).failures).toEqual(
          expect.arrayContaining([
            { target: refusedId, name: 'zeta-pager', reason: 'connection_refused', error: expect.stringContaining('ECONNREFUSED') },
            { target: repairedId, name: `${new URL(url).host}/repaired`, reason: 'http_status', error: 'HTTP 503', status: 503 },
          ]),
        );
      }
    } finally {
      warn.mockRestore();
    }
  });

  it('a redelivery that reaches the repaired webhook but not the one still refusing is a partial success (502 webhook_partially_delivered: delivered names it, failed the other with its reason); asked again, nothing is delivered: webhook_delivery_failed', async () => {
    const noticeId = String(received.find((r) => r.hook === 'repaired')!.headers['baton-notice-id']);
    const refusedId = targetId({ url: refusedUrl });
    const repairedId = targetId({ url: `${url}/repaired` });
    const steadyId = targetId({ url: `${url}/steady` });
    const operator = await fx.token('partial-op', 'operator', '*');
    const post = async () => {
      const response = await fetch(`${fx.base}/v1/projects/zeta/notices/${encodeURIComponent(noticeId)}/redeliver`, {
        method: 'POST',
        headers: { authorization: `Bearer ${operator}` },
      });
      return { status: response.status, body: (await response.json()) as { error: { code: string; message: string; details: Record<string, unknown> } } };
    };
    repaired = true;
    const partial = await post();
    expect(partial.status).toBe(502);
    expect(partial.body.error.code).toBe('webhook_partially_delivered');
    const host = new URL(url).host;
    expect(partial.body.error.details).toEqual({
      delivered: [repairedId],
      skipped: [steadyId],
      busy: [],
      failed: [
        { target: refusedId, name: 'zeta-pager', reason: 'connection_refused', error: expect.stringMatching(/^connect ECONNREFUSED 127\.0\.0\.1:\d+$/) },
      ],
      // Each webhook the reply names, by id: its configured name, or host and path of its URL.
      webhook_names: { [repairedId]: `${host}/repaired`, [steadyId]: `${host}/steady`, [refusedId]: 'zeta-pager' },
    });
    expect(partial.body.error.message).toContain(
      `reached ${host}/repaired [${repairedId}] now, but not zeta-pager [${refusedId}] (connection_refused: connect ECONNREFUSED`,
    );
    // The repaired receiver did get it, signed.
    const got = received.filter((r) => r.hook === 'repaired' && r.status === 200);
    expect(got.map((r) => r.headers['baton-notice-id'])).toEqual([noticeId]);
    expect(verifyWebhookSignature(got[0]!.body, got[0]!.headers, secrets.repaired).ok).toBe(true);

    // Again: the repaired one is skipped, nothing is delivered now — not a partial success.
    const again = await post();
    expect(again.status).toBe(502);
    expect(again.body.error.code).toBe('webhook_delivery_failed');
    expect(again.body.error.details).toMatchObject({
      delivered: [],
      skipped: expect.arrayContaining([repairedId, steadyId]),
      failed: [{ target: refusedId, reason: 'connection_refused' }],
    });
    expect(received.filter((r) => r.hook === 'repaired' && r.status === 200)).toHaveLength(1);
  });

  it("GET /v1/projects/:project/webhooks says, per webhook serving the project (by id and name), its last success, its last failure with the reason, since when it fails and its dead-lettered notices; the project's own deliveries only, to the project's tokens", async () => {
    const host = new URL(url).host;
    const refusedId = targetId({ url: refusedUrl });
    const repairedId = targetId({ url: `${url}/repaired` });
    const steadyId = targetId({ url: `${url}/steady` });
    const get = async (path: string, token: string) => {
      const response = await fetch(`${fx.base}${path}`, { headers: { authorization: `Bearer ${token}` } });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> & { webhooks: Array<Record<string, unknown>> } };
    };
    const viewer = await fx.token('zeta-viewer', 'viewer', ['zeta']);
    // The dead letter is counted as its line is logged: wait for it.
    let zeta = await get('/v1/projects/zeta/webhooks', viewer);
    for (let i = 0; i < 50 && zeta.body.webhooks.some((w) => w['id'] !== steadyId && w['dead_lettered'] === 0); i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      zeta = await get('/v1/projects/zeta/webhooks', viewer);
    }
    expect(zeta.status).toBe(200);
    const at = expect.stringMatching(/^\d{4}-\d\d-\d\dT/);
    // In configuration order: steady (every project), repaired and the refusing one (zeta's).
    expect(zeta.body).toEqual({
      project: 'zeta',
      webhooks: [
        {
          id: steadyId,
          name: `${host}/steady`,
          state: 'ok',
          last_success: { at, notice_id: expect.stringContaining('wr-refused') },
          last_failure: null,
          failing_since: null,
          dead_lettered: 0,
          last_dead_lettered: null,
        },
        {
          // Refused 503 until the redelivery reached it: ok now, its failure and its dead letter kept.
          id: repairedId,
          name: `${host}/repaired`,
          state: 'ok',
          last_success: { at, notice_id: expect.stringContaining('wr-refused') },
          last_failure: { at, notice_id: expect.stringContaining('wr-refused'), reason: 'http_status', error: 'HTTP 503', status: 503 },
          failing_since: null,
          dead_lettered: 1,
          last_dead_lettered: { at, notice_id: expect.stringContaining('wr-refused') },
        },
        {
          id: refusedId,
          name: 'zeta-pager',
          state: 'failing',
          last_success: null,
          last_failure: { at, notice_id: expect.stringContaining('wr-refused'), reason: 'connection_refused', error: expect.stringContaining('ECONNREFUSED') },
          failing_since: at,
          dead_lettered: 1,
          last_dead_lettered: { at, notice_id: expect.stringContaining('wr-refused') },
        },
      ],
    });
    const refused = zeta.body.webhooks[2]!;
    // Failing since its first failure, before its last one (four consumer deliveries, two redeliveries).
    expect(Date.parse(String(refused['failing_since']))).toBeLessThan(Date.parse(String((refused['last_failure'] as { at: string }).at)));

    // The steady webhook serves project alpha too: alpha's status is alpha's own (no zeta notice, no failure of zeta's).
    const alpha = await get('/v1/projects/alpha/webhooks', await fx.token('alpha-viewer', 'viewer', ['alpha']));
    expect(alpha.body.webhooks.map((w) => [w['name'], w['state'], (w['last_success'] as { notice_id: string } | null)?.notice_id])).toEqual([
      [`${host}/flaky`, 'ok', 'nt-x-stop-hook'],
      [`${host}/steady`, 'ok', 'nt-x-stop-hook'],
    ]);
    // The flaky one failed twice, then took it: its last failure stays, it is not failing.
    expect(alpha.body.webhooks[0]).toMatchObject({ failing_since: null, last_failure: { reason: 'http_status', status: 500 }, dead_lettered: 0 });
    // Another project's token: 404, as for a record that does not exist; a query parameter: 400.
    expect(await get('/v1/projects/zeta/webhooks', await fx.token('alpha-only', 'operator', ['alpha']))).toMatchObject({
      status: 404,
      body: { error: { code: 'not_found' } },
    });
    expect((await get('/v1/projects/zeta/webhooks?state=failing', viewer)).body).toMatchObject({ error: { code: 'schema_violation' } });
    // A project no webhook serves but the all-projects one.
    expect((await get('/v1/projects/nobody/webhooks', await fx.token('admin-hooks', 'admin', '*'))).body.webhooks.map((w) => [w['id'], w['state']])).toEqual([
      [steadyId, 'unknown'],
    ]);
  });

  it('the web inbox shows the webhooks failing for the session`s projects, by name and id, with the reason; a session of other projects sees none', async () => {
    const refusedId = targetId({ url: refusedUrl });
    const inboxOf = async (token: string) => {
      const login = await fetch(`${fx.base}/login`);
      const csrf = /name="_csrf" value="([^"]+)"/.exec(await login.text())![1]!;
      const loginCookie = login.headers.get('set-cookie')!.split(';')[0]!;
      const signed = await fetch(`${fx.base}/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: loginCookie },
        body: new URLSearchParams({ _csrf: csrf, token, next: '/inbox' }).toString(),
      });
      const cookie = signed.headers
        .getSetCookie()
        .find((c) => c.startsWith('baton_session='))!
        .split(';')[0]!;
      return (await fetch(`${fx.base}/inbox`, { headers: { cookie } })).text();
    };
    const zeta = await inboxOf(await fx.token('zeta-console', 'viewer', ['zeta']));
    const section = /<section class="banner error webhooks"[\s\S]*?<\/section>/.exec(zeta)?.[0] ?? '';
    expect([...section.matchAll(/data-webhook-id="([0-9a-f]+)" data-project="([a-z]+)"/g)].map((m) => [m[1], m[2]])).toEqual([[refusedId, 'zeta']]);
    expect(section).toContain(`<strong>zeta-pager</strong> <span class="muted">[${refusedId}]</span> · project zeta · failing since`);
    expect(section).toMatch(/last: <code>connection_refused<\/code> connect ECONNREFUSED 127\.0\.0\.1:\d+ · 1 dead-lettered/);
    expect(await inboxOf(await fx.token('alpha-console', 'viewer', ['alpha']))).not.toContain('data-testid="failing-webhooks"');
  });

  it('the webhook consumers let a whole retry window of notices wait at once (max_ack_pending): a receiver down for the hour does not stop the notices behind them at 256', async () => {
    for (const durable of [WEBHOOK_DURABLE, MESH_WEBHOOK_DURABLE]) {
      const info = await fx.nats.jsm.consumers.info(batonStreamNames(fx.prefix).events, durable);
      expect(info.config.max_ack_pending).toBe(WEBHOOK_MAX_ACK_PENDING);
    }
    expect(WEBHOOK_MAX_ACK_PENDING).toBeGreaterThanOrEqual(10_000);
  });
});
