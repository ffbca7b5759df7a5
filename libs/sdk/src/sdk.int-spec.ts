import { randomBytes } from 'node:crypto';
import type { HandoffRecord } from '@baton/contracts';
import { batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';
import { waitFor } from '@baton/wait';
import {
  AgentSubjects,
  BatonSdkError,
  createBatonClient,
  CrossProjectResultError,
  DelegatedResultError,
  NoRunResultError,
  decisions,
  InvalidInputError,
  offerDurableName,
  type BatonAgent,
  type HandoffOffer,
} from './index';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const PROJECT = 'demo';
const AGENT = 'coder';
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const T0 = '2026-01-01T00:00:00.000Z';

function pendingHandoff(id: string): HandoffRecord {
  return {
    id,
    project: PROJECT,
    kind: 'task',
    priority: 'medium',
    status: 'pending',
    from_agent: 'planner',
    to_agent: AGENT,
    summary: `work for ${id}`,
    context: {},
    acceptance: {},
    retry: { max_retries: 3, retry_count: 0 },
    escalation: {},
    workflow_run_id: 'wr-1',
    created_at: T0,
    updated_at: T0,
    version: 1,
  };
}

function claimedBy(record: HandoffRecord, agent: string, claimId: string): HandoffRecord {
  return {
    ...record,
    status: 'claimed',
    claimed_by: agent,
    claim_id: claimId,
    claimed_at: T0,
    lease_expires_at: '2026-01-01T00:01:00.000Z',
    version: record.version + 1,
  };
}

/**
 * A stand-in ledger on the real NATS server: it answers the ledger's request/reply subjects of
 * this agent (`<prefix>.cmd.ledger.<project>.agent.<agent>.*`) with the protocol's replies and
 * records every handoff request, so the test sees exactly what the SDK sent. `open_offers` is
 * served as the ledger serves it: it provisions the agent's offers durable (recorded apart).
 */
function fakeLedger(
  nats: NatsHandle,
  prefix: string,
  behaviour: { claim: (body: Record<string, unknown>) => unknown; return?: (body: Record<string, unknown>) => unknown; openOffers?: () => unknown },
) {
  const requests: { command: string; subject: string; body: Record<string, unknown> }[] = [];
  const opened: Record<string, unknown>[] = [];
  const sub = nats.connection.subscribe(`${prefix}.cmd.ledger.${PROJECT}.agent.${AGENT}.*`, {
    callback: (_err, msg) => {
      const command = msg.subject.split('.').pop()!;
      const body = JSON.parse(decoder.decode(msg.data)) as Record<string, unknown>;
      const answer = (reply: unknown) => msg.respond(encoder.encode(JSON.stringify(reply)));
      if (command === 'open_offers') {
        opened.push(body);
        if (behaviour.openOffers) return void answer(behaviour.openOffers());
        const stream = batonStreamNames(prefix).inbox;
        const durable = offerDurableName(PROJECT, AGENT);
        const filterSubject = AgentSubjects.offer(prefix, PROJECT, AGENT);
        const ackWaitMs = typeof body['ack_wait_ms'] === 'number' ? body['ack_wait_ms'] : 60_000;
        void provision(nats.jsm, { consumers: [{ stream, durable, filterSubject, deliverFrom: 'all', ackWaitMs }] }).then(() =>
          answer({ ok: true, stream, durable }),
        );
        return;
      }
      requests.push({ command, subject: msg.subject, body });
      const handoffId = String(body['handoff_id']);
      let reply: unknown;
      if (command === 'claim') reply = behaviour.claim(body);
      else if (command === 'return' && behaviour.return) reply = behaviour.return(body);
      else if (command === 'heartbeat') reply = { ok: true, handoff: claimedBy(pendingHandoff(handoffId), AGENT, String(body['claim_id'])), events: 1 };
      else reply = { ok: false, error: { code: 'unknown_command', kind: 'rejected', message: command } };
      answer(reply);
    },
  });
  return { requests, opened, stop: () => sub.unsubscribe() };
}

describe('the agent SDK against a real NATS server', () => {
  let nats: NatsHandle;
  let prefix: string;
  const clients: BatonAgent[] = [];

  const client = async (options: { publishesAs?: 'agent' | 'project' } = {}) => {
    const c = await createBatonClient({ nats, prefix, project: PROJECT, agent: AGENT, requestTimeoutMs: 2000, ...options });
    clients.push(c);
    return c;
  };

  beforeEach(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-int', reconnect: false });
    prefix = `t${randomBytes(5).toString('hex')}`;
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

  it('publishResult lands in the inbox stream once: the same result_id published twice stores one message (Nats-Msg-Id dedupe)', async () => {
    const agent = await client();
    const result = {
      result_id: 'res-1',
      run_id: 'run-1',
      workflow_run_id: 'wr-1',
      handoff_id: 'h-1',
      claim_id: 'c-1',
      body: 'done',
      decision: decisions.advance('tests pass'),
    };
    const first = await agent.publishResult(result);
    const second = await agent.publishResult(result);
    expect(first.duplicate).toBe(false);
    expect(second).toEqual({ ...first, duplicate: true });

    const subject = AgentSubjects.result(prefix, PROJECT, AGENT);
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: subject });
    expect(info.state.messages).toBe(1);
    expect(info.state.subjects).toEqual({ [subject]: 1 });
    const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: first.seq });
    expect(stored.header.get('Nats-Msg-Id')).toBe(`result:${PROJECT}:wr-1/res-1`);
    expect(JSON.parse(decoder.decode(stored.data))).toMatchObject({ ...result, project: PROJECT, agent: AGENT });
  });

  it('publishResult validates with AgentResultSchema before sending: an invalid result is refused and nothing is stored', async () => {
    const agent = await client();
    const bad = {
      result_id: 'has a space',
      run_id: 'run-1',
      workflow_run_id: 'wr-1',
      decision: { task: 'a', function_call: { function: 'call_agent' as const, agent_name: 'b' } },
    };
    await expect(agent.publishResult(bad)).rejects.toBeInstanceOf(InvalidInputError);
    await expect(agent.publishResult({ ...bad, result_id: 'ok-id' })).rejects.toThrow(/task and function_call are mutually exclusive/);
    await expect(agent.publishResult({ result_id: 'r2', run_id: 'run', workflow_run_id: 'wr', agent: 'someone-else' })).rejects.toThrow(
      /publishes for demo\/coder/,
    );
    // The router's codes for the same refusals: identity comes from the subject.
    await expect(agent.publishResult({ result_id: 'r2', run_id: 'run', workflow_run_id: 'wr', agent: 'someone-else' })).rejects.toMatchObject({
      code: 'identity_mismatch',
      rejection: { issues: [{ path: 'agent' }] },
    });
    await expect(agent.publishResult({ result_id: 'r2', run_id: 'run', workflow_run_id: 'wr', project: 'elsewhere' })).rejects.toMatchObject({
      code: 'project_mismatch',
      rejection: { issues: [{ path: 'project' }] },
    });
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).inbox);
    expect(info.state.messages).toBe(0);
  });

  it('startRun publishes a validated run start to <prefix>.in.<project>.start.<agent>, deduplicated by workflow_run_id', async () => {
    const agent = await client();
    await expect(agent.startRun({ workflow_run_id: 'wr-9', workflow: 'ship' })).rejects.toThrow(/started_by, issue_author or trigger_author/);
    // The code the router dead-letters such a start with, not a generic schema_violation.
    await expect(agent.startRun({ workflow_run_id: 'wr-9', workflow: 'ship' })).rejects.toMatchObject({
      name: 'InvalidInputError',
      code: 'no_notice_recipient',
    });
    const a = await agent.startRun({ workflow_run_id: 'wr-9', workflow: 'ship', started_by: 'sam' });
    const b = await agent.startRun({ workflow_run_id: 'wr-9', workflow: 'ship', started_by: 'sam' });
    expect(b).toEqual({ ...a, duplicate: true });
    const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: a.seq });
    expect(stored.subject).toBe(AgentSubjects.agentRunStart(prefix, PROJECT, AGENT));
    expect(stored.subject).toBe(`${prefix}.in.${PROJECT}.start.${AGENT}`);
    expect(JSON.parse(decoder.decode(stored.data))).toEqual({ workflow_run_id: 'wr-9', project: PROJECT, workflow: 'ship', started_by: 'sam' });
    // With `publishesAs: 'project'` (credentials that allow only the shared subject) the same start goes to `…start`.
    const shared = await (await client({ publishesAs: 'project' })).startRun({ workflow_run_id: 'wr-10', workflow: 'ship', started_by: 'sam' });
    expect((await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: shared.seq })).subject).toBe(AgentSubjects.runStart(prefix, PROJECT));
  });

  it('sendMessage publishes a validated customer message to <prefix>.in.<project>.message.<agent>, deduplicated by message_id', async () => {
    const agent = await client();
    await expect(agent.sendMessage({ workflow_run_id: 'wr-9', message_id: 'm-1', text: '' })).rejects.toThrow(/text/);
    const a = await agent.sendMessage({ workflow_run_id: 'wr-9', message_id: 'm-1', text: 'I earn 4,000 a month', sent_by: 'cora' });
    const b = await agent.sendMessage({ workflow_run_id: 'wr-9', message_id: 'm-1', text: 'I earn 4,000 a month', sent_by: 'cora' });
    expect(b).toEqual({ ...a, duplicate: true });
    const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: a.seq });
    expect(stored.subject).toBe(`${prefix}.in.${PROJECT}.message.${AGENT}`);
    expect(JSON.parse(decoder.decode(stored.data))).toEqual({
      workflow_run_id: 'wr-9',
      project: PROJECT,
      message_id: 'm-1',
      text: 'I earn 4,000 a month',
      sent_by: 'cora',
    });
    const shared = await (await client({ publishesAs: 'project' })).sendMessage({ workflow_run_id: 'wr-9', message_id: 'm-2', text: 'and 500 in savings' });
    expect((await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { seq: shared.seq })).subject).toBe(AgentSubjects.message(prefix, PROJECT));
  });

  it('an offer published to the offer subject reaches handoffs(); claim() calls the ledger as this agent and finish() publishes the result with handoff_id and claim_id', async () => {
    const ledger = fakeLedger(nats, prefix, {
      claim: (body) => ({ ok: true, handoff: claimedBy(pendingHandoff(String(body['handoff_id'])), AGENT, 'claim-1'), events: 1 }),
    });
    const agent = await client();
    const seen: { offer: HandoffOffer; claimed: HandoffRecord }[] = [];
    const handled = new Promise<void>((resolve, reject) => {
      void agent.handoffs({
        onOffer: async (offer) => {
          try {
            const claimed = await offer.claim({ autoHeartbeat: false });
            await offer.finish({ body: 'implemented', decision: decisions.callAgent('reviewer', AGENT), evidence: { tests_run: ['unit: 3 passed'] } });
            seen.push({ offer, claimed });
            resolve();
          } catch (error) {
            reject(error);
          }
        },
      });
    });
    await nats.js.publish(AgentSubjects.offer(prefix, PROJECT, AGENT), encoder.encode(JSON.stringify(pendingHandoff('ho-s-wr-1'))), {
      msgID: 'offer:ho-s-wr-1:1',
    });
    await handled;
    ledger.stop();

    expect(seen).toHaveLength(1);
    expect(seen[0]!.offer.handoffId).toBe('ho-s-wr-1');
    expect(seen[0]!.offer.claimId).toBe('claim-1');
    expect(seen[0]!.claimed.status).toBe('claimed');
    expect(ledger.requests).toEqual([
      {
        command: 'claim',
        subject: AgentSubjects.ledger(prefix, PROJECT, AGENT, 'claim'),
        body: { handoff_id: 'ho-s-wr-1', idempotency_key: expect.stringMatching(/^claim:ho-s-wr-1:\d+:[0-9a-f]{12}$/) },
      },
    ]);
    // The subject names the agent; the body never does.
    expect(`${prefix}.cmd.ledger.${PROJECT}.agent.${AGENT}.claim`).toBe(AgentSubjects.ledger(prefix, PROJECT, AGENT, 'claim'));
    const resultSubject = AgentSubjects.result(prefix, PROJECT, AGENT);
    const stored = await nats.jsm.streams.getMessage(batonStreamNames(prefix).inbox, { last_by_subj: resultSubject });
    expect(JSON.parse(decoder.decode(stored.data))).toMatchObject({
      handoff_id: 'ho-s-wr-1',
      claim_id: 'claim-1', // the claim rule (docs/runs.md): the router accepts it only under this claim
      workflow_run_id: 'wr-1',
      result_id: 'res-claim-1',
      run_id: 'claim-1',
      agent: AGENT,
      decision: { function_call: { function: 'call_agent', agent_name: 'reviewer', callback: AGENT } },
    });
  });

  it("finish() on a cross-project handoff sends nothing and throws CrossProjectResultError (code cross_project_result): its run is the source project's, finished through the ledger", async () => {
    // The handoff lives in this agent's project but belongs to a run of project `upstream`.
    const cross = (id: string): HandoffRecord => ({ ...pendingHandoff(id), source_project: 'upstream', cto_override: 'dec-1' });
    const ledger = fakeLedger(nats, prefix, {
      claim: (body) => ({ ok: true, handoff: claimedBy(cross(String(body['handoff_id'])), AGENT, 'claim-x'), events: 1 }),
    });
    const agent = await client();
    const outcome = new Promise<{ error: unknown; explicit: unknown; claimId: string | null }>((resolve) => {
      void agent.handoffs({
        onOffer: async (offer) => {
          await offer.claim({ autoHeartbeat: false });
          const error = await offer.finish({ body: 'done', decision: decisions.advance('reviewed') }).catch((e: unknown) => e);
          // Naming the run does not change whose run it is.
          const explicit = await offer.finish({ body: 'done', workflow_run_id: 'wr-1' }).catch((e: unknown) => e);
          resolve({ error, explicit, claimId: offer.claimId });
        },
      });
    });
    await nats.js.publish(AgentSubjects.offer(prefix, PROJECT, AGENT), encoder.encode(JSON.stringify(cross('h-x'))), { msgID: 'offer:h-x:1' });
    const { error, explicit, claimId } = await outcome;
    ledger.stop();

    expect(error).toBeInstanceOf(CrossProjectResultError);
    expect(error).toBeInstanceOf(BatonSdkError);
    expect(error).toMatchObject({ code: 'cross_project_result', handoffId: 'h-x', project: PROJECT, runProject: 'upstream', workflowRunId: 'wr-1' });
    expect((error as Error).message).toMatch(/return\(\)/);
    expect(explicit).toBeInstanceOf(CrossProjectResultError);
    expect(claimId).toBe('claim-x'); // the claim is kept: the agent can still return() the work
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: AgentSubjects.result(prefix, PROJECT, AGENT) });
    expect(info.state.subjects ?? {}).toEqual({});
  });

  it('finish() on work an agent delegated naming its run (not a step the router routed) sends nothing and throws DelegatedResultError (code delegated_handoff); isRunStep says which is which', async () => {
    // An agent's own create may name its run for context; only the router's handoffs (ho-…, mh-…) are the run's steps.
    const ledger = fakeLedger(nats, prefix, {
      claim: (body) => ({ ok: true, handoff: claimedBy(pendingHandoff(String(body['handoff_id'])), AGENT, `claim-${String(body['handoff_id'])}`), events: 1 }),
    });
    const agent = await client();
    const seen = new Map<string, { error: unknown; isRunStep: boolean; claimId: string | null }>();
    const both = new Promise<void>((resolve) => {
      void agent.handoffs({
        onOffer: async (offer) => {
          await offer.claim({ autoHeartbeat: false });
          const isRunStep = offer.isRunStep;
          const error = offer.handoffId === 'delegated-1' ? await offer.finish({ body: 'done' }).catch((e: unknown) => e) : null;
          seen.set(offer.handoffId, { error, isRunStep, claimId: offer.claimId });
          if (seen.size === 2) resolve();
        },
      });
    });
    for (const id of ['delegated-1', 'ho-r-wr-1:res-0'])
      await nats.js.publish(AgentSubjects.offer(prefix, PROJECT, AGENT), encoder.encode(JSON.stringify(pendingHandoff(id))), { msgID: `offer:${id}:1` });
    await both;
    ledger.stop();

    const delegated = seen.get('delegated-1')!;
    expect(delegated.isRunStep).toBe(false);
    expect(delegated.error).toBeInstanceOf(DelegatedResultError);
    expect(delegated.error).toBeInstanceOf(BatonSdkError);
    expect(delegated.error).toMatchObject({ code: 'delegated_handoff', handoffId: 'delegated-1', workflowRunId: 'wr-1' });
    expect(delegated.claimId).toBe('claim-delegated-1'); // kept: return() still ends it
    expect(seen.get('ho-r-wr-1:res-0')!.isRunStep).toBe(true);
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: AgentSubjects.result(prefix, PROJECT, AGENT) });
    expect(info.state.subjects ?? {}).toEqual({});
  });

  it('finish() on a handoff of no workflow run sends nothing and throws NoRunResultError (code handoff_has_no_run); the claim is kept, and return() ends the work', async () => {
    const runless = (id: string): HandoffRecord => {
      const { workflow_run_id: _run, ...rest } = pendingHandoff(id);
      return rest;
    };
    const returned: Array<Record<string, unknown>> = [];
    const ledger = fakeLedger(nats, prefix, {
      claim: (body) => ({ ok: true, handoff: claimedBy(runless(String(body['handoff_id'])), AGENT, 'claim-n'), events: 1 }),
      return: (body) => {
        returned.push(body);
        return { ok: true, handoff: { ...runless('h-n'), status: 'completed', completed_at: new Date().toISOString() }, events: 2 };
      },
    });
    const agent = await client();
    const outcome = new Promise<{ error: unknown; claimId: string | null; after: HandoffRecord }>((resolve, reject) => {
      void agent.handoffs({
        onOffer: async (offer) => {
          try {
            await offer.claim({ autoHeartbeat: false });
            const error = await offer.finish({ body: 'done', decision: decisions.advance('reviewed') }).catch((e: unknown) => e);
            const claimId = offer.claimId;
            const after = await offer.return({ summary: 'done', outcome: 'completed' });
            resolve({ error, claimId, after });
          } catch (error) {
            reject(error);
          }
        },
      });
    });
    await nats.js.publish(AgentSubjects.offer(prefix, PROJECT, AGENT), encoder.encode(JSON.stringify(runless('h-n'))), { msgID: 'offer:h-n:1' });
    const { error, claimId, after } = await outcome;
    ledger.stop();

    expect(error).toBeInstanceOf(NoRunResultError);
    expect(error).toBeInstanceOf(BatonSdkError);
    expect(error).toMatchObject({ code: 'handoff_has_no_run', handoffId: 'h-n' });
    expect((error as Error).message).toMatch(/return\(\)/);
    expect(claimId).toBe('claim-n'); // the claim was kept for the return
    expect(returned).toEqual([expect.objectContaining({ handoff_id: 'h-n', claim_id: 'claim-n' })]);
    expect(after.status).toBe('completed');
    const info = await nats.jsm.streams.info(batonStreamNames(prefix).inbox, { subjects_filter: AgentSubjects.result(prefix, PROJECT, AGENT) });
    expect(info.state.subjects ?? {}).toEqual({});
  });

  it('replicas of one agent share one durable consumer: each offer is handled by exactly one of them, and a lost claim race (tryClaim → null) acks the offer', async () => {
    const claims = new Map<string, number>();
    const ledger = fakeLedger(nats, prefix, {
      claim: (body) => {
        const id = String(body['handoff_id']);
        claims.set(id, (claims.get(id) ?? 0) + 1);
        return id === 'h-taken'
          ? { ok: false, error: { code: 'handoff_not_pending', kind: 'wrong_state', message: 'handoff h-taken is claimed' } }
          : { ok: true, handoff: claimedBy(pendingHandoff(id), AGENT, `c-${id}`), events: 1 };
      },
    });
    const handledBy = new Map<string, string[]>();
    const ids = ['h-a', 'h-b', 'h-c', 'h-d', 'h-taken'];
    let done!: () => void;
    const all = new Promise<void>((resolve) => (done = resolve));
    const onOffer = (replica: string) => async (offer: HandoffOffer) => {
      const claimed = await offer.tryClaim({ autoHeartbeat: false });
      handledBy.set(offer.handoffId, [...(handledBy.get(offer.handoffId) ?? []), `${replica}:${claimed ? 'claimed' : 'skipped'}`]);
      if ([...handledBy.keys()].length === ids.length) done();
    };
    const [r1, r2] = [await client(), await client()];
    await r1.handoffs({ onOffer: onOffer('r1') });
    await r2.handoffs({ onOffer: onOffer('r2') });
    for (const [i, id] of ids.entries()) {
      await nats.js.publish(AgentSubjects.offer(prefix, PROJECT, AGENT), encoder.encode(JSON.stringify(pendingHandoff(id))), { msgID: `offer:${id}:${i}` });
    }
    await all;
    await Promise.all([r1, r2].map((c) => c.close()));
    ledger.stop();

    for (const id of ids) expect(handledBy.get(id)).toHaveLength(1);
    expect(handledBy.get('h-taken')![0]).toMatch(/:skipped$/);
    expect([...claims.values()].every((n) => n === 1)).toBe(true);
    const consumers = await nats.jsm.consumers.list(batonStreamNames(prefix).inbox).next();
    expect(consumers.map((c) => c.name)).toEqual([offerDurableName(PROJECT, AGENT)]);
    expect(consumers[0]!.num_pending + consumers[0]!.num_ack_pending).toBe(0);
    // Each replica asked the ledger to open the durable (the SDK creates no consumer itself).
    expect(ledger.opened).toEqual([{}, {}]);
  });

  it('handoffs() asks the ledger to open the offers durable (open_offers, with the ack wait) and only pulls from it; a refusal throws LedgerCommandError', async () => {
    const ledger = fakeLedger(nats, prefix, { claim: () => ({ ok: false, error: { code: 'x', kind: 'rejected', message: 'x' } }) });
    const agent = await client();
    const subscription = await agent.handoffs({ onOffer: () => undefined, ackWaitMs: 15_000 });
    expect(ledger.opened).toEqual([{ ack_wait_ms: 15_000 }]);
    const info = await nats.jsm.consumers.info(batonStreamNames(prefix).inbox, offerDurableName(PROJECT, AGENT));
    expect(info.config).toMatchObject({ filter_subject: AgentSubjects.offer(prefix, PROJECT, AGENT), ack_wait: 15_000 * 1_000_000 });
    await subscription.stop();
    ledger.stop();

    const refusing = fakeLedger(nats, prefix, {
      claim: () => null,
      openOffers: () => ({ ok: false, error: { code: 'principal_not_allowed', kind: 'forbidden', message: 'no' } }),
    });
    await expect(agent.handoffs({ onOffer: () => undefined })).rejects.toMatchObject({
      name: 'LedgerCommandError',
      command: 'open_offers',
      code: 'principal_not_allowed',
    });
    refusing.stop();
  });

  it("auto-heartbeat beats every third of a short lease (the first beat lands before a 1.2 s lease runs out), and a heartbeat without a length renews the claim's own lease", async () => {
    const ledger = fakeLedger(nats, prefix, {
      claim: (body) => {
        const record = claimedBy(pendingHandoff(String(body['handoff_id'])), AGENT, `claim-${String(body['handoff_id'])}`);
        const now = Date.now();
        const lease = typeof body['lease_ms'] === 'number' ? body['lease_ms'] : 60_000;
        return { ok: true, handoff: { ...record, claimed_at: new Date(now).toISOString(), lease_expires_at: new Date(now + lease).toISOString() }, events: 1 };
      },
    });
    const sentAt = new Map<string, number>();
    const agent = await client();
    const done = new Promise<number>((resolve) => {
      void agent.handoffs({
        onOffer: async (offer) => {
          if (offer.handoffId === 'h-short') {
            await offer.claim({ leaseMs: 1200 });
            sentAt.set('claimed', Date.now());
            await new Promise((r) => setTimeout(r, 900));
            return;
          }
          // A long claim, heartbeated by hand with no length: its own ten minutes, not the ledger's default.
          await offer.claim({ leaseMs: 600_000, autoHeartbeat: false });
          await offer.heartbeat();
          resolve(Date.now());
        },
      });
    });
    await nats.js.publish(AgentSubjects.offer(prefix, PROJECT, AGENT), encoder.encode(JSON.stringify(pendingHandoff('h-short'))));
    await waitFor(() => ledger.requests.some((r) => r.command === 'heartbeat' && r.body['handoff_id'] === 'h-short') || undefined, 'a first beat', {
      timeoutMs: 5000,
    });
    const firstBeat = Date.now();
    await nats.js.publish(AgentSubjects.offer(prefix, PROJECT, AGENT), encoder.encode(JSON.stringify(pendingHandoff('h-long'))));
    await done;
    ledger.stop();
    expect(firstBeat - sentAt.get('claimed')!).toBeLessThan(1000);
    const beats = (id: string) => ledger.requests.filter((r) => r.command === 'heartbeat' && r.body['handoff_id'] === id).map((r) => r.body['lease_ms']);
    expect(new Set(beats('h-short'))).toEqual(new Set([1200]));
    expect(beats('h-long')).toEqual([600_000]);
  });

  it('claim-bound helpers refuse to run before claim(), and auto-heartbeat keeps the lease while the work runs', async () => {
    const ledger = fakeLedger(nats, prefix, {
      claim: (body) => ({ ok: true, handoff: claimedBy(pendingHandoff(String(body['handoff_id'])), AGENT, 'claim-hb'), events: 1 }),
    });
    const agent = await client();
    const outcome = new Promise<{ early: unknown; earlyFinish: unknown }>((resolve) => {
      void agent.handoffs({
        onOffer: async (offer) => {
          const early = await offer.heartbeat().catch((e: unknown) => e);
          // finish() sends the claim with the result (claim rule): without one nothing is sent.
          const earlyFinish = await offer.finish({ body: 'too early', workflow_run_id: 'wr-1' }).catch((e: unknown) => e);
          await offer.claim({ autoHeartbeat: { everyMs: 100 } });
          await new Promise((r) => setTimeout(r, 450));
          resolve({ early, earlyFinish });
        },
      });
    });
    await nats.js.publish(AgentSubjects.offer(prefix, PROJECT, AGENT), encoder.encode(JSON.stringify(pendingHandoff('h-hb'))));
    const { early, earlyFinish } = await outcome;
    await new Promise((r) => setTimeout(r, 250));
    expect(early).toMatchObject({ name: 'NotClaimedError' });
    expect(earlyFinish).toMatchObject({ name: 'NotClaimedError' });
    const beats = ledger.requests.filter((r) => r.command === 'heartbeat');
    expect(beats.length).toBeGreaterThanOrEqual(2);
    expect(
      beats.every((b) => b.body['claim_id'] === 'claim-hb' && b.subject === AgentSubjects.ledger(prefix, PROJECT, AGENT, 'heartbeat') && !('actor' in b.body)),
    ).toBe(true);
    // Heartbeats stop once the handler has returned.
    const after = ledger.requests.length;
    await new Promise((r) => setTimeout(r, 350));
    ledger.stop();
    expect(ledger.requests.length).toBe(after);
  });
});
