import { randomBytes } from 'node:crypto';
import { batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import {
  AgentSubjects,
  createBatonClient,
  DuplicateMessageError,
  MessageIdReusedError,
  publishMeshResult,
  SentMessageIds,
  startMesh,
  type BatonAgent,
} from './index';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

/*
 * Issue 11 part 3 against the real NATS server: every id the SDK publishes into the shared inbox
 * stream is scoped by project and message kind (`<kind>:<project>:<id>`), and a `duplicate: true`
 * answer for an id the client never sent is a DuplicateMessageError, never a quiet success.
 */

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const decoder = new TextDecoder();

describe('SDK message ids and unexpected duplicates (real NATS)', () => {
  let nats: NatsHandle;
  let prefix: string;
  const clients: BatonAgent[] = [];
  const client = async (project: string, agent = 'coder') => {
    const c = await createBatonClient({ nats, prefix, project, agent });
    clients.push(c);
    return c;
  };
  const msgIdAt = async (seq: number) => (await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq })).header.get('Nats-Msg-Id');

  beforeEach(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-dup-int', reconnect: false });
    prefix = `d${randomBytes(5).toString('hex')}`;
    await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close();
    try {
      await removeDeploymentStreams(nats, prefix);
    } finally {
      await nats.drain();
    }
  });

  it('the same workflow_run_id, result_id and message_id in two projects are stored twice, each under its project and kind', async () => {
    const alpha = await client('alpha');
    const beta = await client('beta');
    const start = { workflow_run_id: 'wr-1', workflow: 'ship', started_by: 'sam' };
    const result = { result_id: 'wr-1', run_id: 'r', workflow_run_id: 'wr-1', handoff_id: 'h', claim_id: 'c', body: 'done' }; // same id as the run, on purpose
    const receipts = [
      await alpha.startRun(start),
      await beta.startRun(start),
      await alpha.publishResult(result),
      await beta.publishResult(result),
      await alpha.sendMessage({ workflow_run_id: 'wr-1', message_id: 'wr-1', text: 'hi' }),
      await beta.sendMessage({ workflow_run_id: 'wr-1', message_id: 'wr-1', text: 'hi' }),
    ];
    expect(receipts.map((r) => r.duplicate)).toEqual([false, false, false, false, false, false]);
    expect(await Promise.all(receipts.map((r) => msgIdAt(r.seq)))).toEqual([
      'start:alpha:wr-1',
      'start:beta:wr-1',
      'result:alpha:wr-1/wr-1',
      'result:beta:wr-1/wr-1',
      'message:alpha:wr-1/wr-1',
      'message:beta:wr-1/wr-1',
    ]);
  });

  it('the same client sending other content under an id it already used is refused before sending (MessageIdReusedError), while its true retries stay duplicate: true', async () => {
    const agent = await client('alpha');
    const start = { workflow_run_id: 'wr-9', workflow: 'ship', started_by: 'sam' };
    const stored = await agent.startRun(start);
    const reused = await agent.startRun({ ...start, started_by: 'mallory' }).catch((e: unknown) => e);
    expect(reused).toBeInstanceOf(MessageIdReusedError);
    expect(reused).toMatchObject({ code: 'message_id_reused', msgId: 'start:alpha:wr-9' });
    expect(await agent.startRun(start)).toEqual({ ...stored, duplicate: true }); // the first start, retried, is still a retry

    // A result retried without produced_at (the SDK fills the clock each time) is the same result; another body is not.
    const result = { result_id: 'res-9', run_id: 'r', workflow_run_id: 'wr-9', handoff_id: 'h', claim_id: 'c', body: 'done' };
    const first = await agent.publishResult(result);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await agent.publishResult(result)).toEqual({ ...first, duplicate: true });
    await expect(agent.publishResult({ ...result, body: 'changed my mind' })).rejects.toMatchObject({ code: 'message_id_reused' });
    // The same maps built in another order are the same message: a retry, not a reuse.
    const mapped = {
      result_id: 'res-10',
      run_id: 'r',
      workflow_run_id: 'wr-9',
      handoff_id: 'h',
      claim_id: 'c',
      body: 'done',
      variables: { a: 1, b: { x: 1, y: 2 } },
    };
    const once = await agent.publishResult(mapped);
    expect(await agent.publishResult({ ...mapped, variables: { b: { y: 2, x: 1 }, a: 1 } })).toEqual({ ...once, duplicate: true });
    const started = await agent.startRun({ workflow_run_id: 'wr-10', workflow: 'ship', started_by: 'sam', variables: { a: 1, b: 2 } });
    expect(await agent.startRun({ workflow_run_id: 'wr-10', workflow: 'ship', started_by: 'sam', variables: { b: 2, a: 1 } })).toEqual({
      ...started,
      duplicate: true,
    });
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).inbox);
    expect(info.state.messages).toBe(4); // two starts and two results, once each
  });

  it("a client's retry answers duplicate: true; another client's message under the same id is a DuplicateMessageError (nothing stored)", async () => {
    const first = await client('alpha');
    const other = await client('alpha');
    const result = { result_id: 'res-7', run_id: 'r', workflow_run_id: 'wr-7', handoff_id: 'h', claim_id: 'c', body: 'done' };
    const stored = await first.publishResult(result);
    expect(await first.publishResult(result)).toEqual({ ...stored, duplicate: true });

    const error = await other.publishResult({ ...result, body: 'a different result under the same id' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DuplicateMessageError);
    expect(error).toMatchObject({ msgId: 'result:alpha:wr-7/res-7', seq: stored.seq, subject: AgentSubjects.result(prefix, 'alpha', 'coder') });
    await expect(other.startRun({ workflow_run_id: 'wr-7', workflow: 'ship', started_by: 'sam' })).resolves.toMatchObject({ duplicate: false });
    await expect(first.startRun({ workflow_run_id: 'wr-7', workflow: 'ship', started_by: 'sam' })).rejects.toBeInstanceOf(DuplicateMessageError);
    const subject = AgentSubjects.result(prefix, 'alpha', 'coder');
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: subject });
    expect(info.state.subjects).toEqual({ [subject]: 1 });
    const kept = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: stored.seq });
    expect(JSON.parse(decoder.decode(kept.data))).toMatchObject({ body: 'done' });
  });

  it('mesh starts and turns: scoped ids, and an unexpected duplicate is an error for a publisher with its own memory', async () => {
    const publisher = { js: nats.js, prefix };
    const turn = { project: 'alpha', mesh_run_id: 'm-1', agent: 'triage', result_id: 't-1', text: 'hello' };
    const a = await startMesh(publisher, { mesh_run_id: 'm-1', project: 'alpha', mesh: 'support', started_by: 'sam' });
    const b = await startMesh(publisher, { mesh_run_id: 'm-1', project: 'beta', mesh: 'support', started_by: 'sam' });
    const t = await publishMeshResult(publisher, turn);
    expect([await msgIdAt(a.seq), await msgIdAt(b.seq), await msgIdAt(t.seq)]).toEqual([
      'mesh_start:alpha:m-1',
      'mesh_start:beta:m-1',
      'mesh_result:alpha:m-1/t-1',
    ]);
    await expect(publishMeshResult(publisher, turn)).resolves.toMatchObject({ duplicate: true, seq: t.seq });
    await expect(publishMeshResult({ ...publisher, sent: new SentMessageIds() }, turn)).rejects.toBeInstanceOf(DuplicateMessageError);
  });
});
