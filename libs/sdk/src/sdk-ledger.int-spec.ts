import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { claimWithdrawnSubject, edgeSubjectOf, MsgIds, offerDurableName, Principals, type HandoffRecord } from '@baton/contracts';
import { LedgerClient, batonStreamNames, connectNats, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
// Test only: boots the real ledger service in-process, so the SDK is proven against the real protocol.
// eslint-disable-next-line @nx/enforce-module-boundaries
import { startLedger } from '../../../apps/ledger/src/ledger';
import { ClaimLostError, createBatonClient, EdgeRefusedError, NotClaimedError, OfferTerminatedError, type BatonAgent, type HandoffOffer } from './index';
import { publishOnce, SentMessageIds } from './sent-ids';
import { storeDefinition } from './definition.int-support';
// eslint-disable-next-line @nx/enforce-module-boundaries -- test-only helper, by path as int/servers is
import { removeDeploymentStreams } from '../../eventstore/src/int/cleanup';

const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';
const P = 'shop';

describe('the agent SDK against the real ledger service (in-process, real NATS)', () => {
  const prefix = `ts${randomBytes(5).toString('hex')}`;
  let nats: NatsHandle;
  let ledger: RunningService;
  let agent: BatonAgent;

  beforeAll(async () => {
    nats = await connectNats({ servers: NATS_URL, name: 'sdk-ledger-int', reconnect: false });
    ledger = await startLedger({ ...process.env, BATON_PREFIX: prefix, BATON_INSTANCE: 'sdk-ledger', HTTP_PORT: '0', LOG_LEVEL: 'error' });
    // The project definition the ledger reads its roster from, as the router publishes it.
    const definition = { project: P, lead: 'lena', agents: [{ name: 'alice' }, { name: 'bob' }, { name: 'lena' }], workflows: [] };
    await storeDefinition(nats, prefix, definition);
    agent = await createBatonClient({ nats, prefix, project: P, agent: 'bob' });
  });

  afterAll(async () => {
    await agent?.close();
    await ledger?.stop();
    try {
      await removeDeploymentStreams(nats, prefix);
    } finally {
      await nats.close();
    }
  });

  it('a handoff created for an agent is offered to it; claim() takes the lease in the ledger and return() hands the work back', async () => {
    const delegator = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'alice') });
    let subscription: ReturnType<BatonAgent['handoffs']> | undefined;
    const outcome = new Promise<{ offer: HandoffOffer; claimed: HandoffRecord; returned: HandoffRecord }>((resolve, reject) => {
      subscription = agent.handoffs({
        onOffer: async (offer) => {
          try {
            const claimed = await offer.claim();
            const returned = await offer.return({ summary: 'parser written', outcome: 'completed', evidence: { tests_run: ['parser.spec.ts: 12 passed'] } });
            resolve({ offer, claimed, returned });
          } catch (error) {
            reject(error);
          }
        },
      });
    });
    const created = await delegator.create(P, {
      handoff_id: 'h-sdk',
      from_agent: 'alice',
      to_agent: 'bob',
      summary: 'write the parser',
      idempotency_key: 'create-h-sdk',
    });
    expect(created).toMatchObject({ ok: true, handoff: { status: 'pending' } });

    const { offer, claimed, returned } = await outcome;
    // Its offers are this test's: the next test binds bob's durable with a handler of its own.
    await (await subscription!).stop();
    expect(offer.handoffId).toBe('h-sdk');
    expect(claimed).toMatchObject({ status: 'claimed', claimed_by: 'bob' });
    expect(offer.claimId).toBe(claimed.claim_id);
    expect(returned).toMatchObject({ status: 'returned', completion_report: { outcome: 'completed' } });
    expect(await delegator.get(P, 'h-sdk')).toMatchObject({ status: 'returned', claimed_by: 'bob' });

    // A second claim of the same offer by another replica is refused by the ledger: tryClaim says null.
    const late = await new LedgerClient(nats, prefix, { as: Principals.agent(P, 'bob') }).claim(P, { handoff_id: 'h-sdk', idempotency_key: 'late-claim' });
    expect(late).toMatchObject({ ok: false, error: { kind: 'wrong_state' } });
  });
  it('a reworked handoff is offered again with the reviewer`s note: offer.handoff.last_rework says what to change', async () => {
    const delegator = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'alice') });
    const offers: HandoffOffer[] = [];
    let subscription: ReturnType<BatonAgent['handoffs']> | undefined;
    const second = new Promise<HandoffOffer>((resolve, reject) => {
      subscription = agent.handoffs({
        onOffer: async (offer) => {
          if (offer.handoffId !== 'h-rework') return;
          offers.push(offer);
          try {
            if (offers.length === 2) {
              resolve(offer);
              return;
            }
            await offer.claim();
            await offer.return({ summary: 'lexer written', outcome: 'completed', evidence: { tests_run: ['lexer.spec.ts: 3 passed'] } });
          } catch (error) {
            reject(error);
          }
        },
      });
    });
    await delegator.create(P, { handoff_id: 'h-rework', from_agent: 'alice', to_agent: 'bob', summary: 'write the lexer', idempotency_key: 'create-h-rework' });
    const returned = await waitFor(async () => {
      const record = await delegator.get(P, 'h-rework');
      return record?.status === 'returned' && record.handback_id !== undefined ? record : undefined;
    }, 'the handback');
    expect(offers[0]!.handoff).not.toHaveProperty('last_rework');
    const note = 'cover the error paths of the lexer';
    const decided = await delegator.decideHandback(P, { handoff_id: returned.handback_id!, decision: 'rework', note, idempotency_key: 'rework-h-rework' });
    expect(decided).toMatchObject({ ok: true });
    const offer = await second;
    await (await subscription!).stop();
    expect(offer.handoff).toMatchObject({
      status: 'pending',
      retry: { retry_count: 1 },
      last_rework: { by: 'alice', handback_id: returned.handback_id, note },
    });
    expect(offer.offered).toMatchObject({ last_rework: { note } });
  });

  it("claim() again on an offer whose claim lapsed (requeued) takes a new claim, not the old key's answer; after release() the offer sends nothing more (NotClaimedError, endedBy release)", async () => {
    const delegator = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'alice') });
    const watchdog = new LedgerClient(nats, prefix, { as: Principals.service('watchdog') });
    const outcome = new Promise<{ first: HandoffRecord; second: HandoffRecord; afterRelease: unknown[] }>((resolve, reject) => {
      const subscription = agent.handoffs({
        onOffer: async (offer) => {
          if (offer.handoffId !== 'h-lapse') return;
          try {
            const first = await offer.claim({ leaseMs: 1000, autoHeartbeat: false });
            // The lease runs out (1 s) and the watchdog requeues the handoff, as its lease check does
            // (refused lease_not_expired until then).
            const requeued = await waitFor(
              async () => {
                const reply = await watchdog.requeueExpired(P, { handoff_id: 'h-lapse', claim_id: first.claim_id!, idempotency_key: 'requeue-h-lapse' });
                return reply.ok ? reply : undefined;
              },
              'the lapsed claim requeued',
              { timeoutMs: 5000 },
            );
            expect(requeued).toMatchObject({ ok: true, handoff: { status: 'pending' } });
            const second = await offer.claim({ leaseMs: 60_000, autoHeartbeat: false });
            await offer.release('not mine after all');
            const afterRelease: unknown[] = [];
            for (const attempt of [
              () => offer.finish({ body: 'done anyway' }),
              () => offer.heartbeat(),
              () => offer.fail('too late'),
              () => offer.return({ summary: 'late', outcome: 'completed' }),
            ]) {
              afterRelease.push(
                await attempt().then(
                  (r) => ({ sent: r }),
                  (error: unknown) => error,
                ),
              );
            }
            // The same ending again is its retry: the ledger's idempotent answer, not a refusal.
            expect(await offer.release('not mine after all')).toMatchObject({ status: 'released' });
            resolve({ first, second, afterRelease });
          } catch (error) {
            reject(error);
          } finally {
            void subscription.then((s) => s.stop());
          }
        },
      });
    });
    expect(
      await delegator.create(P, {
        handoff_id: 'h-lapse',
        from_agent: 'alice',
        to_agent: 'bob',
        summary: 'lapse and claim again',
        idempotency_key: 'create-h-lapse',
      }),
    ).toMatchObject({ ok: true });
    const { first, second, afterRelease } = await outcome;
    expect(second).toMatchObject({ status: 'claimed', claimed_by: 'bob' });
    expect(second.claim_id).not.toBe(first.claim_id);
    for (const error of afterRelease) {
      expect(error).toBeInstanceOf(NotClaimedError);
      expect(error).toMatchObject({ code: 'not_claimed', endedBy: 'release', handoffId: 'h-lapse' });
    }
    // The ledger's record: released by the second claim's holder; nothing after it.
    const record = await delegator.get(P, 'h-lapse');
    expect(record).toMatchObject({ status: 'released', claimed_by: 'bob', claimed_at: second.claimed_at, terminal_reason: 'not mine after all' });
  });

  it('an offers durable deleted under a running agent is opened again by the ledger after what the agent acknowledged; an offer it cannot read is terminated, not redelivered and not dead-lettered', async () => {
    const seen: string[] = [];
    const carol = await createBatonClient({ nats, prefix, project: P, agent: 'alice' });
    const inbox = batonStreamNames(prefix).inbox;
    const offer = (id: string) => nats.js.publish(`${prefix}.in.${P}.offer.alice`, new TextEncoder().encode(JSON.stringify({ id })));
    const until = async (check: () => boolean | Promise<boolean>, what: string) => {
      for (let i = 0; i < 200; i++) {
        if (await check()) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`timed out: ${what}`);
    };
    const errors: unknown[] = [];
    // Each offer settled: these name no handoff the ledger holds, so tryClaim() resolves null (not_found) and the offer is acknowledged.
    const onOffer = async (o: HandoffOffer) => {
      seen.push(o.handoffId);
      await o.tryClaim();
    };
    const subscription = await carol.handoffs({ onOffer, backoffMs: [50], onError: (error) => void errors.push(error) });
    try {
      await offer('h-before-1');
      await offer('h-before-2');
      // (alice also receives test 1's completion handback: only this test's offers are counted.)
      await until(() => seen.filter((id) => id.startsWith('h-before')).length === 2, 'the first two offers');
      // Let the runner read its ack floor, then lose the durable (an SRE, a script, a server).
      await until(async () => (await nats.jsm.consumers.info(inbox, offerDurableName('shop', 'alice'))).ack_floor.stream_seq > 0, 'an ack floor');
      await new Promise((r) => setTimeout(r, 1200));
      await nats.jsm.consumers.delete(inbox, offerDurableName('shop', 'alice'));
      await offer('h-after');
      await until(() => seen.includes('h-after'), 'the offer published after the loss');
      expect(seen.filter((id) => id.startsWith('h-before'))).toEqual(['h-before-1', 'h-before-2']);
      const info = await nats.jsm.consumers.info(inbox, offerDurableName('shop', 'alice'));
      expect(info.config.filter_subject).toBe(`${prefix}.in.${P}.offer.alice`);
      // Bytes that are no offer: given up on at once, terminated (an agent may not dead-letter).
      await nats.js.publish(`${prefix}.in.${P}.offer.alice`, new TextEncoder().encode('not json'));
      await until(
        async () =>
          (await nats.jsm.consumers.info(inbox, offerDurableName('shop', 'alice'))).num_ack_pending === 0 &&
          (await nats.jsm.consumers.info(inbox, offerDurableName('shop', 'alice'))).num_pending === 0,
        'the bad offer settled',
      );
      const dlq = await nats.jsm.streams.info(batonStreamNames(prefix).dlq).catch(() => null);
      expect(dlq?.state.messages ?? 0).toBe(0);
      // ...and the agent is told, with a typed error (it used to be silent).
      const terminated = errors.filter((error) => error instanceof OfferTerminatedError);
      expect(terminated).toHaveLength(1);
      expect(terminated[0]).toMatchObject({ code: 'offer_terminated', subject: `${prefix}.in.${P}.offer.alice`, deliveries: 1 });
    } finally {
      await subscription.stop();
      await carol.close();
    }
  }, 30_000);
  it('a claim taken away (its delegator abandons the handoff) aborts offer.signal within moments, not at the next heartbeat; a notice the ledger contradicts stops nothing', async () => {
    const delegator = new LedgerClient(nats, prefix, { as: Principals.agent(P, 'alice') });
    const claimed = new Map<string, { offer: HandoffOffer; aborted: Promise<unknown> }>();
    let stopWork = () => undefined as void;
    const workStopped = new Promise<void>((resolve) => (stopWork = resolve));
    const subscription = await agent.handoffs({
      concurrency: 2,
      onOffer: async (offer) => {
        if (!offer.handoffId.startsWith('h-withdraw')) return;
        // A long lease: its heartbeat is 20 s away, so only the ledger's notice can stop the work sooner.
        await offer.claim({ leaseMs: 60_000 });
        const aborted = new Promise((resolve) => offer.signal.addEventListener('abort', () => resolve(offer.signal.reason), { once: true }));
        claimed.set(offer.handoffId, { offer, aborted });
        // The work: runs until the signal says stop (or the test ends it).
        await Promise.race([aborted, workStopped]);
      },
    });
    try {
      for (const id of ['h-withdraw-1', 'h-withdraw-2']) {
        await delegator.create(P, { handoff_id: id, from_agent: 'alice', to_agent: 'bob', summary: `work ${id}`, idempotency_key: `create-${id}` });
      }
      const [first, second] = await waitFor(async () => {
        const a = claimed.get('h-withdraw-1');
        const b = claimed.get('h-withdraw-2');
        return a !== undefined && b !== undefined ? ([a, b] as const) : undefined;
      }, 'both handoffs claimed by bob');

      // A notice naming a claim that is still held (a stale or forged one): the heartbeat it causes
      // is accepted, so the work goes on.
      nats.connection.publish(
        claimWithdrawnSubject(prefix, P, 'bob'),
        JSON.stringify({
          project: P,
          handoff_id: 'h-withdraw-2',
          claim_id: second.offer.claimId,
          agent: 'bob',
          event_type: 'handoff.abandoned',
          seq: 1,
          at: new Date().toISOString(),
        }),
      );

      const abandonedAt = Date.now();
      const abandoned = await delegator.abandon(P, { handoff_id: 'h-withdraw-1', reason: 'not needed any more', idempotency_key: 'abandon-h-withdraw-1' });
      expect(abandoned).toMatchObject({ ok: true, handoff: { status: 'abandoned' } });
      const reason = await Promise.race([first.aborted, new Promise((resolve) => setTimeout(() => resolve('still working'), 5_000))]);
      // Why, from the ledger's refusal: the handoff was abandoned — it ended, there is nothing to claim again.
      expect(reason).toBeInstanceOf(ClaimLostError);
      expect(reason).toMatchObject({
        code: 'claim_lost',
        lostBy: 'handoff_abandoned',
        handoffEnded: true,
        refusal: { code: 'handoff_not_claimed', details: { status: 'abandoned', ended: 'handoff_abandoned' } },
      });
      expect(Date.now() - abandonedAt).toBeLessThan(5_000);
      await expect(first.offer.fail('too late')).rejects.toThrow(NotClaimedError);
      await expect(first.offer.fail('too late')).rejects.toMatchObject({ lostBy: 'handoff_abandoned', handoffEnded: true });

      expect(second.offer.signal.aborted).toBe(false);
      expect(await delegator.get(P, 'h-withdraw-2')).toMatchObject({ status: 'claimed', claimed_by: 'bob', claim_id: second.offer.claimId });
      await second.offer.release('the test is done with it');
    } finally {
      stopWork();
      await subscription.stop();
    }
  }, 40_000);

  it('a publish the edge refuses throws EdgeRefusedError with the edge`s reason as its code, at once and once: not retried into a PublishTimeout', async () => {
    // What a client's own checks cannot catch and the edge can: an id naming another project (the SDK derives its ids, so a hand-made call stands in).
    const subject = edgeSubjectOf(prefix, `${prefix}.in.${P}.start.bob`);
    const body = new TextEncoder().encode(JSON.stringify({ workflow_run_id: 'wr-edge-refused', project: P, workflow: 'w', started_by: 'bob' }));
    const attempts: number[] = [];
    const refused = await publishOnce(
      { publish: (...args) => (attempts.push(attempts.length + 1), nats.js.publish(...args)) },
      new SentMessageIds(),
      subject,
      body,
      MsgIds.start('elsewhere', 'wr-edge-refused'),
      undefined,
      undefined,
      // Three attempts of 10 s each would be a PublishTimeout after 30 s if the refusal went unanswered.
      { attempts: 3, timeoutMs: 10_000, backoffMs: 200 },
    ).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(EdgeRefusedError);
    expect(refused).toMatchObject({
      code: 'msg_id_mismatch',
      reason: 'msg_id_mismatch',
      subject,
      detail: expect.stringContaining("names project 'elsewhere'"),
    });
    expect(attempts).toEqual([1]);
  });
});
