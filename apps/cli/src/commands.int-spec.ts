import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import { main } from './main';
import { bufferedIo } from './output';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const decoder = new TextDecoder();
const encoder = new TextEncoder();

describe('baton commands that publish (real NATS) and call the operator API (local HTTP server)', () => {
  let nats: NatsHandle;
  let prefix: string;
  let dir: string;
  let server: Server;
  let apiUrl: string;
  const requests: { method: string; url: string; body: unknown }[] = [];
  let nextStatus = 200;

  async function baton(...argv: string[]) {
    const io = bufferedIo();
    const code = await main(argv, {
      io,
      env: { NATS_URL, REDIS_URL, BATON_PREFIX: prefix, BATON_API_URL: apiUrl, BATON_OPERATOR: 'olga', BATON_TOKEN: 'bt_test' },
    });
    return { code, out: io.out(), err: io.err() };
  }

  const inboxMessages = async (subject: string) =>
    (await nats.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: subject })).state.subjects?.[subject] ?? 0;

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        requests.push({ method: req.method ?? '', url: req.url ?? '', body: body ? JSON.parse(body) : null });
        const status = nextStatus;
        res.writeHead(status, { 'content-type': 'application/json' });
        // The operator API's replies, in the shapes it answers them (apps/notifier/src/api/schemas.ts).
        const answer = {
          accepted: true,
          answer_id: 'a-1',
          project: 'demo',
          workflow_run_id: 'wr-1',
          subject: `${prefix}.in.demo.resume`,
          duplicate: false,
          status_url: '/v1/projects/demo/runs/wr-1/answers/a-1',
        };
        if (req.method === 'GET')
          res.end(
            JSON.stringify({
              stop: {
                packet_id: 'stop-1',
                status: 'open',
                pending: { name: 'refund', args: { order: 99, amount: 40 } },
                pending_digest: 'sha256:abc',
              },
              effect: null,
              answered_at: null,
            }),
          );
        else if (/\/redeliver$/.test(req.url ?? ''))
          res.end(
            JSON.stringify(
              status === 200
                ? {
                    outcome: 'delivered',
                    project: 'demo',
                    notice_id: decodeURIComponent(req.url!.split('/').at(-2)!),
                    delivered: ['5f1c0a7e2b9d4c31'],
                    skipped: [],
                  }
                : {
                    error: {
                      code: 'webhook_delivery_failed',
                      message: 'notice nt-x-1 of demo did not reach 5f1c0a7e2b9d4c31 (HTTP 503)',
                      issues: [],
                      details: { failed: [{ target: '5f1c0a7e2b9d4c31', error: 'HTTP 503' }], delivered: [], skipped: [] },
                    },
                  },
            ),
          );
        else if (status < 300 && /\/(decision|abandon)$/.test(req.url ?? ''))
          res.end(JSON.stringify({ outcome: 'applied', handoff: { id: req.url!.split('/').at(-2), project: 'demo', status: 'abandoned' }, events: 1 }));
        else if (status === 202) res.end(JSON.stringify({ ...answer, outcome: 'pending' }));
        else if (status === 200) res.end(JSON.stringify({ ...answer, outcome: 'applied', run: { status: 'running' } }));
        else
          res.end(
            JSON.stringify({
              error: { code: 'run_not_stopped', message: 'run wr-1 is running; it has no open stop packet', issues: [], details: { outcome: 'refused' } },
            }),
          );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  beforeEach(async () => {
    prefix = `t${randomBytes(5).toString('hex')}`;
    nats = await connectNats({ servers: NATS_URL, name: 'cli-commands-int', reconnect: false });
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
    dir = await mkdtemp(join(tmpdir(), 'baton-cli-'));
    requests.length = 0;
    nextStatus = 200;
  });

  afterEach(async () => {
    const names = batonStreamNames(prefix);
    for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
    await nats.drain();
    await rm(dir, { recursive: true, force: true });
  });

  it('result <file> publishes a valid agent result once (msg id = result_id) and refuses an invalid one with its field', async () => {
    const file = join(dir, 'result.json');
    await writeFile(
      file,
      JSON.stringify({
        result_id: 'res-1',
        run_id: 'r',
        project: 'demo',
        workflow_run_id: 'wr-1',
        agent: 'coder',
        body: 'done',
        handoff_id: 'h-1',
        claim_id: 'c-1',
      }),
    );
    const first = await baton('result', file, '--json');
    const second = await baton('result', file, '--json');
    expect(first.code).toBe(0);
    expect(JSON.parse(second.out)).toMatchObject({ duplicate: true, seq: JSON.parse(first.out).seq });
    // A fresh client cannot tell its own re-run from another publisher: it says which message the stream held.
    expect(second.code).toBe(0);
    // With --json stderr holds no prose: the receipt's duplicate says it, and stderr's one JSON line
    // the warning by its code; without, stderr names the message.
    expect(JSON.parse(second.err)).toEqual({
      warnings: [{ code: 'duplicate_message', message: expect.stringContaining('the stream already held result:demo:wr-1/res-1') }],
    });
    expect(first.err).toBe('');
    const third = await baton('result', file);
    expect(third.code).toBe(0);
    expect(third.err).toContain('already held result:demo:wr-1/res-1');
    expect(await inboxMessages(`${prefix}.in.demo.result.coder`)).toBe(1);

    await writeFile(
      file,
      JSON.stringify({
        result_id: 'res-2',
        run_id: 'r',
        project: 'demo',
        workflow_run_id: 'wr-1',
        agent: 'coder',
        decision: {},
        handoff_id: 'h-1',
        claim_id: 'c-1',
      }),
    );
    const bad = await baton('result', file);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/decision/);
    // A result naming no claim can never be taken by its run (claim_required there): refused before it is sent.
    await writeFile(file, JSON.stringify({ result_id: 'res-3', run_id: 'r', project: 'demo', workflow_run_id: 'wr-1', agent: 'coder', body: 'done' }));
    const unclaimed = await baton('result', file, '--json');
    expect(unclaimed.code).toBe(1);
    expect(JSON.parse(unclaimed.err)).toMatchObject({ error: { code: 'claim_required' } });
    expect(await inboxMessages(`${prefix}.in.demo.result.coder`)).toBe(1);
    await writeFile(file, '{ not json');
    expect((await baton('result', file)).code).toBe(1);
  });

  it('start publishes a run start to <prefix>.in.<project>.start with started_by defaulting to the operator', async () => {
    const { code } = await baton('start', 'ship', '--run', 'wr-7', '--project', 'demo', '--input', 'add a cart');
    expect(code).toBe(0);
    const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { last_by_subj: `${prefix}.in.demo.start` });
    expect(JSON.parse(decoder.decode(stored.data))).toEqual({
      workflow_run_id: 'wr-7',
      project: 'demo',
      workflow: 'ship',
      started_by: 'olga',
      input: 'add a cart',
    });
    expect(stored.header.get('Nats-Msg-Id')).toBe('start:demo:wr-7');
    expect((await baton('start', 'ship', '--project', 'demo')).code).toBe(2);
  });

  it('start and message refuse a malformed project key or id as a usage error (exit 2, code usage) before anything is published', async () => {
    const before = (await nats.jsm.streams.info(batonStreamNames(prefix).inbox)).state.messages;
    const cases: Array<[string[], RegExp]> = [
      [['start', 'ship', '--run', 'wr-8', '--project', 'Bad:P'], /--project "Bad:P" is not a project key/],
      [['start', 'ship', '--run', 'bad id/x', '--project', 'demo'], /--run "bad id\/x" is not an id/],
      [['message', 'wr-7', '--project', 'Bad:P', '--text', 'hi', '--wait-ms', '0'], /--project "Bad:P" is not a project key/],
      [['message', 'wr 7', '--project', 'demo', '--text', 'hi', '--wait-ms', '0'], /the run "wr 7" is not an id/],
      [['message', 'wr-7', '--project', 'demo', '--text', 'hi', '--id', 'm.7', '--wait-ms', '0'], /--id "m.7" is not an id/],
    ];
    for (const [argv, message] of cases) {
      const text = await baton(...argv);
      expect([argv, text.code]).toEqual([argv, 2]);
      expect(text.err).toMatch(message);
      const json = await baton(...argv, '--json');
      expect(json.code).toBe(2);
      expect(JSON.parse(json.err)).toMatchObject({ error: { code: 'usage' } });
    }
    expect((await nats.jsm.streams.info(batonStreamNames(prefix).inbox)).state.messages).toBe(before);
  });

  it('message publishes a customer message to <prefix>.in.<project>.message; the same --id again stores nothing new; a bad text is refused (--wait-ms 0: no router here to record it)', async () => {
    // --wait-ms 0: publish only (no router here records the message).
    const send = () =>
      baton('message', 'wr-7', '--project', 'demo', '--text', 'I earn 4,000 a month', '--id', 'm-7', '--from', 'cora', '--json', '--wait-ms', '0');
    const first = await send();
    expect(first.code).toBe(0);
    expect(JSON.parse(first.out)).toMatchObject({ workflow_run_id: 'wr-7', message_id: 'm-7', duplicate: false });
    const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { last_by_subj: `${prefix}.in.demo.message` });
    expect(JSON.parse(decoder.decode(stored.data))).toEqual({
      workflow_run_id: 'wr-7',
      project: 'demo',
      message_id: 'm-7',
      text: 'I earn 4,000 a month',
      sent_by: 'cora',
    });
    expect(stored.header.get('Nats-Msg-Id')).toBe('message:demo:wr-7/m-7');
    const again = await send();
    expect(JSON.parse(again.out)).toMatchObject({ message_id: 'm-7', duplicate: true });
    const generated = await baton('message', 'wr-7', '--project', 'demo', '--text', 'and a car', '--json', '--wait-ms', '0');
    expect(JSON.parse(generated.out).message_id).toMatch(/^msg-[0-9a-f-]{36}$/);
    const tooLong = await baton('message', 'wr-7', '--project', 'demo', '--text', 'x'.repeat(50_000));
    expect(tooLong.code).toBe(1);
    expect(tooLong.err).toMatch(/text/);
    expect((await baton('message', 'wr-7', '--project', 'demo', '--text', '')).code).toBe(2);
    expect((await baton('message', 'wr-7', '--project', 'demo')).code).toBe(2);
  });

  it('publish-definition validates the file, sends it to the router subject (naming BATON_OPERATOR as the publisher) and prints the reply', async () => {
    const received: unknown[] = [];
    const publishers: Array<string | undefined> = [];
    let refuseNext = false;
    const sub = nats.connection.subscribe(`${prefix}.cmd.router.demo.publish_definition`, {
      callback: (_e, msg) => {
        received.push(JSON.parse(decoder.decode(msg.data)));
        publishers.push(msg.headers?.get('Baton-Actor'));
        const refusal = {
          ok: false,
          error: { code: 'workflow_version_changed', kind: 'invalid', message: 'changed', issues: [], details: { workflow: 'ship', version: 1 } },
        };
        msg.respond(encoder.encode(JSON.stringify(refuseNext ? refusal : { ok: true, project: 'demo', version: 12, digest: 'abc', changed: true })));
      },
    });
    const file = join(dir, 'def.json');
    const definition = { project: 'demo', agents: [{ name: 'coder' }], workflows: [] };
    await writeFile(file, JSON.stringify(definition));
    const ok = await baton('publish-definition', file, '--json');
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.out)).toMatchObject({ ok: true, version: 12, changed: true });
    expect(received).toEqual([definition]);
    expect(publishers).toEqual(['olga']);
    // A refusal's details reach the script (--json), with the router's code.
    refuseNext = true;
    const refused = await baton('publish-definition', file, '--json');
    expect({ code: refused.code, error: JSON.parse(refused.err).error }).toMatchObject({
      code: 1,
      error: { code: 'workflow_version_changed', details: { workflow: 'ship', version: 1 } },
    });
    refuseNext = false;
    received.pop();
    publishers.pop();

    await writeFile(file, JSON.stringify({ project: 'demo', agents: [{ name: 'coder' }, { name: 'coder' }] }));
    const dup = await baton('publish-definition', file);
    expect(dup.code).toBe(1);
    expect(dup.err).toMatch(/listed twice/);
    // With --json the refusal is typed, on stderr: a script reads the code and the fields.
    const typed = await baton('publish-definition', file, '--json');
    expect({ code: typed.code, out: typed.out }).toEqual({ code: 1, out: '' });
    expect(JSON.parse(typed.err)).toEqual({
      error: {
        code: 'schema_violation',
        message: expect.stringContaining('is not a valid project definition'),
        issues: [expect.objectContaining({ message: expect.stringMatching(/listed twice/) })],
      },
    });
    // A mesh that does not build: the failing check's own code, as the router would answer.
    await writeFile(
      file,
      JSON.stringify({ project: 'demo', agents: [{ name: 'coder' }], meshes: [{ name: 'm', entry: 'coder', handoffs: { coder: ['coder'] } }] }),
    );
    const mesh = await baton('publish-definition', file, '--json');
    expect(JSON.parse(mesh.err)).toMatchObject({ error: { code: 'MESH_SELF_HANDOFF', issues: [expect.objectContaining({ code: 'MESH_SELF_HANDOFF' })] } });
    expect(received).toHaveLength(1);
    // A directory is compiled as baton validate compiles it, then sent.
    const folder = join(dir, 'def-folder');
    await mkdir(folder);
    await writeFile(join(folder, 'demo.yaml'), 'project: demo\n---\nAGENT: coder\nROLE: builder\nCOLOUR: blue\n');
    const fromFolder = await baton('publish-definition', folder, '--json');
    expect(fromFolder.code).toBe(0);
    // The compiler's warnings, with --json: stderr's one JSON line, each with its diagnostic whole.
    expect(JSON.parse(fromFolder.err)).toEqual({
      warnings: [
        {
          code: 'definition_warning',
          message: expect.stringContaining("unknown agent key 'COLOUR' is ignored"),
          details: { diagnostic: expect.objectContaining({ file: join(folder, 'demo.yaml'), line: 5, severity: 'warning', code: 'UNKNOWN_KEY' }) },
        },
      ],
    });
    expect(received).toHaveLength(2);
    expect(received[1]).toMatchObject({ project: 'demo', agents: [{ name: 'coder', role: 'builder' }] });
    sub.unsubscribe();
    expect((await baton('publish-definition', file.replace('def', 'missing'))).code).toBe(1);
    // Nobody serves the subject: unavailable, typed.
    const nobody = await baton('publish-definition', join(folder, 'demo.yaml'), '--json');
    expect({ code: nobody.code, error: JSON.parse(nobody.err).error.code }).toEqual({ code: 69, error: 'unavailable' });
  });

  it('publish-definition whose request the router receives and never answers: outcome_unknown, saying that publishing the same definition again is safe', async () => {
    const received: unknown[] = [];
    const sub = nats.connection.subscribe(`${prefix}.cmd.router.demo.publish_definition`, { callback: (_e, msg) => received.push(msg.data) });
    const file = join(dir, 'def.json');
    await writeFile(file, JSON.stringify({ project: 'demo', agents: [{ name: 'coder' }], workflows: [] }));
    const silent = await baton('publish-definition', file, '--json');
    sub.unsubscribe();
    expect({ code: silent.code, out: silent.out, received: received.length }).toEqual({ code: 1, out: '', received: 1 });
    expect(JSON.parse(silent.err)).toMatchObject({
      error: { code: 'outcome_unknown', message: expect.stringContaining('publishing the same definition again is safe') },
    });
  }, 20_000);

  it('answer-hold answers a held run through the API (continue, reroute with its target, terminate) and says what happened; a reroute without a target or a stop action is a usage error', async () => {
    const rerouted = await baton('answer-hold', 'wr-1', '--action', 'reroute', '--target', 'billing', '--note', 'to billing');
    expect(rerouted.code).toBe(0);
    expect(rerouted.out).toBe('applied wr-1 (project demo): reroute; run wr-1 is now running\n');
    expect(requests).toEqual([
      {
        method: 'POST',
        url: '/v1/runs/wr-1/answer',
        body: { answer_id: expect.stringMatching(/^cli-/), action: 'reroute', target: 'billing', note: 'to billing' },
      },
    ]);
    for (const argv of [
      ['--action', 'reroute'],
      ['--action', 'approve'],
      ['--action', 'continue', '--target', 'x'],
    ]) {
      expect({ argv, code: (await baton('answer-hold', 'wr-1', ...argv)).code }).toEqual({ argv, code: 2 });
    }
    expect(requests).toHaveLength(1);
    requests.length = 0;
    const scoped = await baton('answer-hold', 'wr-1', '--action', 'terminate', '--project', 'demo', '--answer-id', 'a-9', '--json');
    expect(requests).toEqual([{ method: 'POST', url: '/v1/projects/demo/runs/wr-1/answer', body: { answer_id: 'a-9', action: 'terminate' } }]);
    expect(JSON.parse(scoped.out)).toMatchObject({ project: 'demo', outcome: 'applied' });
    // The hold it answers, as the run shows its cause (the id may hold ':'); a malformed one is a usage error.
    requests.length = 0;
    expect((await baton('answer-hold', 'wr-1', '--action', 'terminate', '--answer-id', 'a-10', '--hold-cause', 'result:r:7')).code).toBe(0);
    expect(requests).toEqual([
      { method: 'POST', url: '/v1/runs/wr-1/answer', body: { answer_id: 'a-10', action: 'terminate', hold_cause: { kind: 'result', id: 'r:7' } } },
    ]);
    for (const bad of ['r-7', 'whim:r-7', 'result:']) {
      expect({ bad, code: (await baton('answer-hold', 'wr-1', '--action', 'terminate', '--hold-cause', bad)).code }).toEqual({ bad, code: 2 });
    }
    expect(requests).toHaveLength(1);
    nextStatus = 409;
    const refused = await baton('answer-hold', 'wr-1', '--action', 'continue');
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('the answer was refused');
  });

  it('answer, decide and abandon call the operator API with the bodies it accepts; applied exits 0 saying so, pending 0 with a note, a refusal 1 with its code', async () => {
    // Approve names the call it approves: without --digest nothing is sent, the frozen call and its digest are shown.
    const unnamed = await baton('answer', 'stop-1', '--action', 'approve', '--note', 'ok');
    expect(unnamed.code).toBe(2);
    expect(unnamed.err).toContain('approve runs the frozen call exactly as shown; name it with --digest');
    expect(unnamed.err).toContain('call: refund amount=40 order=99');
    expect(unnamed.err).toContain('baton answer stop-1 --action approve --digest sha256:abc');
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual(['GET /v1/stops/stop-1']);
    requests.length = 0;
    const approve = await baton('answer', 'stop-1', '--action', 'approve', '--digest', 'sha256:abc', '--note', 'ok');
    expect(approve.code).toBe(0);
    expect(approve.out).toBe('applied stop-1 (project demo): approve; run wr-1 is now running\n');
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /v1/stops/stop-1/answer']);
    expect(requests[0]!.body).toEqual({
      answer_id: expect.stringMatching(/^cli-/),
      action: 'approve',
      note: 'ok',
      pending_digest: 'sha256:abc',
    });
    expect((await baton('answer', 'stop-1', '--action', 'deny', '--digest', 'sha256:abc')).code).toBe(2);
    expect((await baton('answer', 'stop-1', '--action', 'approve', '--digest', '')).code).toBe(2);
    expect(requests).toHaveLength(1);

    requests.length = 0;
    expect((await baton('answer', 'stop-1', '--action', 'raise_cap', '--cap', '40')).code).toBe(0);
    expect(requests[0]!.body).toMatchObject({ action: 'raise_cap', cap: 40 });
    expect((await baton('answer', 'stop-1', '--action', 'intent')).code).toBe(2);

    requests.length = 0;
    expect((await baton('decide', 'hb-1', 'rework', '--note', 'add tests')).code).toBe(0);
    expect(requests[0]).toEqual({
      method: 'POST',
      url: '/v1/handoffs/hb-1/decision',
      body: { decision: 'rework', note: 'add tests', idempotency_key: expect.stringMatching(/^cli-/) },
    });
    expect((await baton('decide', 'hb-1', 'rework')).code).toBe(2);

    requests.length = 0;
    const abandoned = await baton('abandon', 'h-7', '--reason', 'wrong ticket', '--project', 'demo', '--key', 'k-7');
    expect(abandoned).toMatchObject({ code: 0, out: 'abandoned: h-7 (project demo)\n' });
    expect(requests).toEqual([{ method: 'POST', url: '/v1/projects/demo/handoffs/h-7/abandon', body: { reason: 'wrong ticket', idempotency_key: 'k-7' } }]);
    expect((await baton('abandon', 'h-7')).code).toBe(2);
    expect((await baton('abandon', 'h-7', '--reason', ' ')).code).toBe(2);
    expect(requests).toHaveLength(1);

    nextStatus = 202;
    const pending = await baton('answer', 'stop-1', '--action', 'deny');
    expect(pending.code).toBe(0);
    expect(pending.out).toBe(
      'sent stop-1 (project demo): deny; not applied yet: the router has not decided it (GET /v1/projects/demo/runs/wr-1/answers/a-1 for the outcome)\n',
    );

    nextStatus = 409;
    const refused = await baton('answer', 'stop-1', '--action', 'deny');
    expect(refused.code).toBe(1);
    expect(refused.out).toBe('');
    expect(refused.err).toContain('the answer was refused: run_not_stopped: run wr-1 is running');
    const refusedJson = await baton('answer', 'stop-1', '--action', 'deny', '--json');
    expect(refusedJson.code).toBe(1);
    // The HTTP status is details.http_status; the API sent no status, so there is none.
    expect(JSON.parse(refusedJson.err)).toMatchObject({ error: { code: 'run_not_stopped', details: { outcome: 'refused', http_status: 409 } } });
    expect(JSON.parse(refusedJson.err).error.details).not.toHaveProperty('status');
    const refusedAbandon = await baton('abandon', 'h-7', '--reason', 'wrong ticket');
    expect(refusedAbandon.code).toBe(1);
    expect(refusedAbandon.err).toContain('the abandon was refused: run_not_stopped');
  });

  it("answer takes the inbox item id baton inbox prints (stop:<project>:<packet>) and answers that project's packet; a --project naming another is a usage error", async () => {
    nextStatus = 200;
    requests.length = 0;
    const answered = await baton('answer', 'stop:demo:wd-esc:wr-9', '--action', 'acknowledge');
    expect(answered.code).toBe(0);
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /v1/projects/demo/stops/wd-esc%3Awr-9/answer']);
    expect((await baton('answer', 'stop:demo:wd-esc:wr-9', '--action', 'acknowledge', '--project', 'outlet')).code).toBe(2);
    expect(requests).toHaveLength(1);
  });

  it('notice redeliver posts to the project route and says what came of it; a webhook still failing exits 1 with the code (--json prints which); --project is required', async () => {
    nextStatus = 200;
    requests.length = 0;
    const sent = await baton('notice', 'redeliver', 'nt-x-1', '--project', 'demo');
    expect(sent).toMatchObject({ code: 0, out: 'redelivered: notice nt-x-1 (project demo) to 1 webhook(s)\n' });
    expect(requests).toEqual([{ method: 'POST', url: '/v1/projects/demo/notices/nt-x-1/redeliver', body: {} }]);
    expect((await baton('notice', 'redeliver', 'nt-x-1')).code).toBe(2);
    expect((await baton('notice', 'resend', 'nt-x-1', '--project', 'demo')).code).toBe(2);
    nextStatus = 502;
    const failed = await baton('notice', 'redeliver', 'nt-x-1', '--project', 'demo', '--json');
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.out)).toMatchObject({ error: { code: 'webhook_delivery_failed', details: { failed: [{ error: 'HTTP 503' }] } } });
    nextStatus = 200;
  });
});
