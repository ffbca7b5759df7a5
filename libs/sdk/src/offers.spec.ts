import { TransientError, type ConsumedMessage } from '@baton/eventstore';
import { ClaimLostError, InvalidInputError, LedgerCommandError, NotClaimedError, OfferUnsettledError } from './errors';
import { createOfferHandler, type HandoffOffer } from './offers';

/** An offer message as the runner hands it over (the handler reads its bytes and delivery facts only). */
const offerMessage = (deliveries: number): ConsumedMessage => ({
  subject: 'x.in.shop.offer.alice',
  data: new TextEncoder().encode(JSON.stringify({ id: 'ho-s-wr-1', status: 'pending' })),
  headers: {},
  seq: 7,
  deliveryCount: deliveries,
  stream: 'X_INBOX',
  consumer: 'offers-4-shop-alice',
  pending: 0,
  timestampMs: Date.now(),
  raw: {} as never,
});

const refusedBy = (code: string, details?: Record<string, unknown>) =>
  createOfferHandler({
    project: 'shop',
    agent: 'alice',
    instance: 'i-1',
    ledger: {} as never,
    publishResult: async () => ({ seq: 0, duplicate: false, stream: 'X' }),
    onOffer: async () => {
      throw new LedgerCommandError('claim', 'ho-s-wr-1', { code, kind: 'unavailable', message: `${code}`, ...(details ? { details } : {}) });
    },
  });

describe('an offer refused for a limit, not for itself', () => {
  it('rate_limited: retried after the ledger’s retry_after_ms for as long as it lasts (unbounded), never terminated — an offer given up on leaves its handoff pending with nobody offered it', async () => {
    const failure = await refusedBy('rate_limited', { retry_after_ms: 1234 })(offerMessage(9)).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(TransientError);
    expect(failure).toMatchObject({ delayMs: 1234, unbounded: true });
  });

  it('project_paused: the offer is let go (the handler resolves, so it is acknowledged) — the resume offers every pending handoff again, and redelivering it all through the pause would only ask the ledger again', async () => {
    await expect(refusedBy('project_paused')(offerMessage(1))).resolves.toBeUndefined();
  });

  it('any other refusal the handler lets through stays the handler’s error (bounded by maxDeliver)', async () => {
    const failure = await refusedBy('identity_mismatch')(offerMessage(1)).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(LedgerCommandError);
  });
});

describe('the claim an offer sends, and the heartbeat that keeps it', () => {
  /** A handler of client `instance` whose ledger answers claims with a claimed record and heartbeats as `beat` says. */
  function client(instance: string, beat: (n: number) => { ok: false; error: { code: string; kind: string; message: string } } | null) {
    const claims: Array<Record<string, unknown>> = [];
    let beats = 0;
    const claimed = (body: Record<string, unknown>) => ({
      ok: true as const,
      handoff: {
        id: 'ho-s-wr-1',
        status: 'claimed',
        claimed_by: 'alice',
        claim_id: `c-${String(body['idempotency_key'])}`,
        claimed_at: new Date().toISOString(),
        lease_expires_at: new Date(Date.now() + 900).toISOString(),
      },
      events: 1,
    });
    const ledger = {
      claim: async (_project: string, body: Record<string, unknown>) => {
        claims.push(body);
        return claimed(body);
      },
      heartbeat: async (_project: string, body: Record<string, unknown>) => beat(++beats) ?? claimed(body),
    };
    let signal: AbortSignal | undefined;
    const handler = createOfferHandler({
      project: 'shop',
      agent: 'alice',
      instance,
      ledger: ledger as never,
      publishResult: async () => ({ seq: 0, duplicate: false, stream: 'X' }),
      onOffer: async (offer) => {
        await offer.claim({ leaseMs: 900 });
        await offer.claim({ leaseMs: 900 });
        signal = offer.signal;
        await new Promise((resolve) => setTimeout(resolve, 1400));
      },
    });
    return { run: () => handler(offerMessage(1)), claims, signal: () => signal, beats: () => beats };
  }

  it('a claim() the ledger could not decide is retried under the same key (the same claim); once a claim lapsed, claim() again is a new claim under a key of its own', async () => {
    const keys: string[] = [];
    let answer = 0;
    const ledger = {
      claim: async (_project: string, body: Record<string, unknown>) => {
        keys.push(String(body['idempotency_key']));
        // 1: undecided (timeout); 2: claimed with a lease already past (it lapsed); 3: claimed again.
        answer++;
        if (answer === 1) return { ok: false, error: { code: 'timeout', kind: 'unavailable', message: 'no answer' } };
        const lease = answer === 2 ? Date.now() - 1 : Date.now() + 60_000;
        return {
          ok: true,
          handoff: {
            id: 'ho-s-wr-1',
            status: 'claimed',
            claimed_by: 'alice',
            claim_id: `c-${answer}`,
            claimed_at: new Date().toISOString(),
            lease_expires_at: new Date(lease).toISOString(),
          },
          events: 1,
        };
      },
    };
    const claimIds: Array<string | undefined> = [];
    await createOfferHandler({
      project: 'shop',
      agent: 'alice',
      instance: 'i-1',
      ledger: ledger as never,
      publishResult: async () => ({ seq: 0, duplicate: false, stream: 'X' }),
      onOffer: async (offer) => {
        await expect(offer.claim({ autoHeartbeat: false })).rejects.toBeInstanceOf(LedgerCommandError);
        claimIds.push((await offer.claim({ autoHeartbeat: false })).claim_id);
        claimIds.push((await offer.claim({ autoHeartbeat: false })).claim_id);
      },
    })(offerMessage(1));
    expect(keys).toEqual(['claim:ho-s-wr-1:7:i-1', 'claim:ho-s-wr-1:7:i-1', 'claim:ho-s-wr-1:7:i-1:2']);
    expect(claimIds).toEqual(['c-2', 'c-3']);
  });

  it("decide() holds a decision to the ledger's contract: a rework whose note is blank throws InvalidInputError and sends nothing; a rework with a note is sent", async () => {
    const sent: unknown[] = [];
    const ledger = {
      claim: async () => ({
        ok: true,
        handoff: {
          id: 'hb-1',
          status: 'claimed',
          claimed_by: 'alice',
          claim_id: 'c-1',
          claimed_at: new Date().toISOString(),
          lease_expires_at: new Date(Date.now() + 60_000).toISOString(),
        },
        events: 1,
      }),
      decideHandback: async (_project: string, body: unknown) => {
        sent.push(body);
        return { ok: true, handoff: { id: 'hb-1', status: 'completed' }, events: 1 };
      },
    };
    const seen: unknown[] = [];
    await createOfferHandler({
      project: 'shop',
      agent: 'alice',
      instance: 'i-1',
      ledger: ledger as never,
      publishResult: async () => ({ seq: 1, duplicate: false, stream: 'X' }),
      onOffer: async (offer) => {
        await offer.claim({ autoHeartbeat: false });
        seen.push(await offer.decide('rework', '   ').catch((error: unknown) => error));
        seen.push(await offer.decide('rework', 'cover the error paths'));
      },
    })(offerMessage(1));
    expect(seen[0]).toBeInstanceOf(InvalidInputError);
    expect(seen[0]).toMatchObject({ code: 'schema_violation', message: expect.stringContaining('a rework says what to change') });
    expect(sent).toEqual([{ handoff_id: 'ho-s-wr-1', decision: 'rework', note: 'cover the error paths', idempotency_key: 'decide:c-1' }]);
  });

  it('after a refused heartbeat said the claim is lost, finish and the endings send nothing (NotClaimedError.lostBy); a new claim() clears it', async () => {
    let published = 0;
    let claims = 0;
    const ledger = {
      claim: async () => ({
        ok: true,
        handoff: {
          id: 'ho-s-wr-1',
          status: 'claimed',
          claimed_by: 'alice',
          claim_id: `c-${++claims}`,
          claimed_at: new Date().toISOString(),
          lease_expires_at: new Date(Date.now() + 60_000).toISOString(),
        },
        events: 1,
      }),
      heartbeat: async () => ({ ok: false, error: { code: 'stale_claim', kind: 'wrong_state', message: 'another claim holds it' } }),
    };
    const seen: unknown[] = [];
    await createOfferHandler({
      project: 'shop',
      agent: 'alice',
      instance: 'i-1',
      ledger: ledger as never,
      publishResult: async () => {
        published++;
        return { seq: 1, duplicate: false, stream: 'X' };
      },
      onOffer: async (offer) => {
        await offer.claim({ autoHeartbeat: false });
        await expect(offer.heartbeat()).rejects.toMatchObject({ code: 'stale_claim' });
        for (const attempt of [() => offer.finish({ body: 'done' }), () => offer.release('late'), () => offer.fail('late')])
          seen.push(await attempt().catch((error: unknown) => error));
        // Claimed again (a new claim): finishing is allowed again.
        await offer.claim({ autoHeartbeat: false });
        seen.push(await offer.finish({ body: 'done', workflow_run_id: 'wr-1' }));
      },
    })(offerMessage(1));
    expect(seen.slice(0, 3)).toEqual([expect.any(NotClaimedError), expect.any(NotClaimedError), expect.any(NotClaimedError)]);
    expect(seen[0]).toMatchObject({ code: 'not_claimed', lostBy: 'stale_claim', endedBy: null });
    expect(seen[3]).toMatchObject({ seq: 1 });
    expect(published).toBe(1);
  });

  it("a claim's key names this client among the agent's replicas: claim() again while the claim is held is that claim (no request), another replica given the same delivery is another claimer", async () => {
    const first = client('i-1', () => null);
    const second = client('i-2', () => null);
    await Promise.all([first.run(), second.run()]);
    expect(first.claims.map((c) => c['idempotency_key'])).toEqual(['claim:ho-s-wr-1:7:i-1']);
    expect(second.claims[0]!['idempotency_key']).toBe('claim:ho-s-wr-1:7:i-2');
  });

  it('a heartbeat the ledger could not decide (timeout, store down) keeps the claim and the beats going; a refusal stops them and aborts the signal', async () => {
    const unavailable = client('i-1', (n) => (n <= 2 ? { ok: false, error: { code: 'timeout', kind: 'unavailable', message: 'no reply' } } : null));
    await unavailable.run();
    expect(unavailable.beats()).toBeGreaterThanOrEqual(3);
    // Aborted only by the handler's return, not by the unanswered beats.
    expect(String((unavailable.signal()!.reason as Error).message)).toBe('the offer handler returned');
    const refused = client('i-1', () => ({ ok: false, error: { code: 'lease_expired', kind: 'wrong_state', message: 'lease expired' } }));
    await refused.run();
    expect(refused.beats()).toBe(1);
    // The reason says why the claim is lost (the handoff still open: claiming again can work), the ledger's refusal kept.
    expect(refused.signal()!.reason).toMatchObject({
      name: 'ClaimLostError',
      code: 'claim_lost',
      lostBy: 'lease_expired',
      handoffEnded: false,
      refusal: { name: 'LedgerCommandError', code: 'lease_expired' },
    });
  });

  it('a heartbeat the handler sends itself is judged the same: a refusal throws and aborts the signal, an undecided one only throws', async () => {
    const replies = [
      { ok: false, error: { code: 'timeout', kind: 'unavailable', message: 'no reply' } },
      { ok: false, error: { code: 'handoff_not_claimed', kind: 'wrong_state', message: 'requeued' } },
    ];
    const seen: Array<{ code: string; aborted: boolean }> = [];
    let signal: AbortSignal | undefined;
    const handler = createOfferHandler({
      project: 'shop',
      agent: 'alice',
      instance: 'i-1',
      ledger: {
        claim: async (_project: string, body: Record<string, unknown>) => ({
          ok: true,
          handoff: { id: 'ho-s-wr-1', status: 'claimed', claimed_by: 'alice', claim_id: `c-${String(body['idempotency_key'])}` },
          events: 1,
        }),
        heartbeat: async () => replies.shift(),
      } as never,
      publishResult: async () => ({ seq: 0, duplicate: false, stream: 'X' }),
      onOffer: async (offer) => {
        await offer.claim({ leaseMs: 1000, autoHeartbeat: false });
        signal = offer.signal;
        for (let i = 0; i < 2; i++) {
          const error = await offer.heartbeat().catch((e: unknown) => e as { code: string });
          seen.push({ code: (error as { code: string }).code, aborted: offer.signal.aborted });
        }
      },
    });
    await handler(offerMessage(1));
    expect(seen).toEqual([
      { code: 'timeout', aborted: false },
      { code: 'handoff_not_claimed', aborted: true },
    ]);
    // A refusal that says nothing of the handoff's status: lost, for a reason the SDK cannot name (the refusal says which).
    expect(signal!.reason).toMatchObject({ name: 'ClaimLostError', code: 'claim_lost', lostBy: 'claim_refused', handoffEnded: false });
  });

  it.each([
    ['its deadline passed', 'deadline_passed', true, { status: 'failed', ended: 'deadline_passed' }],
    ['a person abandoned it', 'handoff_abandoned', true, { status: 'abandoned', ended: 'handoff_abandoned' }],
    ['it was escalated at its retry cap', 'handoff_escalated', true, { status: 'failed', ended: 'handoff_escalated' }],
    ['an older ledger names only the status', 'handoff_released', true, { status: 'released' }],
    ['a newer ledger names an ending this SDK does not know', 'handoff_failed', true, { status: 'failed', ended: 'handoff_dissolved' }],
    ['it was requeued', 'handoff_requeued', false, { status: 'pending' }],
  ] as const)(
    'a heartbeat refused handoff_not_claimed because %s: the signal is aborted with ClaimLostError lostBy %s, and the helpers throw NotClaimedError with it and advice that fits',
    async (_why, lostBy, ended, details) => {
      let reason: unknown;
      const seen: unknown[] = [];
      await createOfferHandler({
        project: 'shop',
        agent: 'alice',
        instance: 'i-1',
        ledger: {
          claim: async () => ({ ok: true, handoff: { id: 'ho-s-wr-1', status: 'claimed', claimed_by: 'alice', claim_id: 'c-1' }, events: 1 }),
          heartbeat: async () => ({
            ok: false,
            error: { code: 'handoff_not_claimed', kind: 'wrong_state', message: 'not claimed', details: { handoff_id: 'ho-s-wr-1', ...details } },
          }),
        } as never,
        publishResult: async () => ({ seq: 0, duplicate: false, stream: 'X' }),
        onOffer: async (offer) => {
          await offer.claim({ autoHeartbeat: false });
          await offer.heartbeat().catch(() => undefined);
          reason = offer.signal.reason;
          seen.push(await offer.finish({ body: 'done', workflow_run_id: 'wr-1' }).catch((error: unknown) => error));
        },
      })(offerMessage(1));
      expect(reason).toBeInstanceOf(ClaimLostError);
      expect(reason).toMatchObject({ code: 'claim_lost', lostBy, handoffEnded: ended, handoffId: 'ho-s-wr-1' });
      expect(seen[0]).toBeInstanceOf(NotClaimedError);
      expect(seen[0]).toMatchObject({ code: 'not_claimed', lostBy, handoffEnded: ended });
      const message = (seen[0] as Error).message;
      // An ended handoff has nothing to claim again: the advice never says so.
      if (ended) expect(message).toMatch(/the handoff has ended: there is nothing to claim again/);
      else expect(message).toMatch(/claim\(\) it again once it is offered again/);
      expect(message).not.toMatch(ended ? /claim\(\) it again/ : /nothing to claim again/);
    },
  );
});

describe('a handler that returns without settling its offer (docs/handoffs.md rule 5a)', () => {
  /** A handler whose ledger refuses claims with `refusal` (or accepts them when null). */
  const handlerWith = (onOffer: (offer: HandoffOffer) => Promise<void>, refusal: { code: string; kind: string } | null, warned: unknown[]) =>
    createOfferHandler({
      project: 'shop',
      agent: 'alice',
      instance: 'i-1',
      ledger: {
        claim: async () =>
          refusal !== null
            ? { ok: false, error: { ...refusal, message: refusal.code, details: { retry_after_ms: 1234 } } }
            : { ok: true, handoff: { id: 'ho-s-wr-1', status: 'claimed', claimed_by: 'alice', claim_id: 'c-1' }, events: 1 },
      } as never,
      publishResult: async () => ({ seq: 0, duplicate: false, stream: 'X' }),
      onOffer,
      warn: (error) => void warned.push(error),
    });
  const outcome = (run: Promise<void>) =>
    run.then(
      () => 'acknowledged',
      (error: unknown) => error,
    );

  it('returning before any claim fails the delivery with OfferUnsettledError (offer_unsettled), told once per offer message however often it is delivered', async () => {
    const warned: unknown[] = [];
    const handler = handlerWith(async () => undefined, null, warned);
    const first = await outcome(handler(offerMessage(1)));
    const second = await outcome(handler(offerMessage(2)));
    expect(first).toBeInstanceOf(OfferUnsettledError);
    expect(first).toMatchObject({ code: 'offer_unsettled', handoffId: 'ho-s-wr-1', seq: 7, deliveryCount: 1, claimRefusal: null });
    expect(second).toBeInstanceOf(OfferUnsettledError);
    expect(warned).toEqual([first]);
  });

  it('a claim the handler caught is judged by the ledger’s answer: not this agent’s to take settles the offer; rate_limited and project_paused are handled as if let through; an undecided claim leaves it unsettled', async () => {
    const returnAfterClaim = async (offer: HandoffOffer) => {
      await offer.claim().catch(() => undefined);
    };
    const judged = async (code: string, kind: string) => {
      const warned: unknown[] = [];
      return { result: await outcome(handlerWith(returnAfterClaim, { code, kind }, warned)(offerMessage(1))), warned };
    };
    expect(await judged('handoff_not_pending', 'wrong_state')).toEqual({ result: 'acknowledged', warned: [] });
    expect(await judged('project_paused', 'unavailable')).toEqual({ result: 'acknowledged', warned: [] });
    const limited = await judged('rate_limited', 'unavailable');
    expect(limited.result).toBeInstanceOf(TransientError);
    expect(limited.result).toMatchObject({ delayMs: 1234, unbounded: true });
    expect(limited.warned).toEqual([]);
    const undecided = await judged('timeout', 'unavailable');
    expect(undecided.result).toBeInstanceOf(OfferUnsettledError);
    expect(undecided.result).toMatchObject({ claimRefusal: { code: 'timeout' } });
    expect(undecided.warned).toHaveLength(1);
  });

  it('while the subscription stops, an offer left unclaimed is handed back (a transient failure, not counted), without a warning', async () => {
    const warned: unknown[] = [];
    const handler = handlerWith(async () => undefined, null, warned);
    handler.stopping(new Error('stopping'));
    const result = await outcome(handler(offerMessage(1)));
    expect(result).toBeInstanceOf(TransientError);
    expect(result).toMatchObject({ unbounded: true });
    expect(warned).toEqual([]);
  });
});

describe('a claim settles once (finish included)', () => {
  it('LOW-1: after an acknowledged finish, a finish under another result_id (and any other ending) throws NotClaimedError endedBy finish and sends nothing; the same result again is its retry', async () => {
    const published: Array<Record<string, unknown>> = [];
    const seen: unknown[] = [];
    await createOfferHandler({
      project: 'shop',
      agent: 'alice',
      instance: 'i-1',
      ledger: {
        claim: async () => ({ ok: true, handoff: { id: 'ho-s-wr-1', status: 'claimed', claimed_by: 'alice', claim_id: 'c-1' }, events: 1 }),
        release: async () => ({ ok: true, handoff: { id: 'ho-s-wr-1', status: 'released' }, events: 1 }),
      } as never,
      publishResult: async (result) => {
        published.push(result as unknown as Record<string, unknown>);
        return { seq: published.length, duplicate: published.length > 1, stream: 'X' };
      },
      onOffer: async (offer) => {
        await offer.claim({ autoHeartbeat: false });
        seen.push(await offer.finish({ body: 'done', workflow_run_id: 'wr-1', decision: { dispatch: { status: 'advance' } } }));
        seen.push(await offer.finish({ result_id: 'f6', body: 'done again', workflow_run_id: 'wr-1' }).catch((error: unknown) => error));
        seen.push(await offer.release('changed my mind').catch((error: unknown) => error));
        seen.push(await offer.heartbeat().catch((error: unknown) => error));
        seen.push(await offer.finish({ body: 'done', workflow_run_id: 'wr-1', decision: { dispatch: { status: 'advance' } } }));
      },
    })(offerMessage(1));
    expect(seen[0]).toEqual({ seq: 1, duplicate: false, stream: 'X' });
    for (const refused of seen.slice(1, 4)) {
      expect(refused).toBeInstanceOf(NotClaimedError);
      expect(refused).toMatchObject({ code: 'not_claimed', endedBy: 'finish' });
    }
    expect(seen[4]).toEqual({ seq: 2, duplicate: true, stream: 'X' });
    // The ids finish fills in: run_id is the claim id, result_id res-<claim id>.
    expect(published.map((r) => ({ result_id: r['result_id'], run_id: r['run_id'], claim_id: r['claim_id'], handoff_id: r['handoff_id'] }))).toEqual([
      { result_id: 'res-c-1', run_id: 'c-1', claim_id: 'c-1', handoff_id: 'ho-s-wr-1' },
      { result_id: 'res-c-1', run_id: 'c-1', claim_id: 'c-1', handoff_id: 'ho-s-wr-1' },
    ]);
  });

  it('a finish whose publish failed settles nothing: another result_id may follow', async () => {
    let attempts = 0;
    const seen: unknown[] = [];
    await createOfferHandler({
      project: 'shop',
      agent: 'alice',
      instance: 'i-1',
      ledger: { claim: async () => ({ ok: true, handoff: { id: 'ho-s-wr-1', status: 'claimed', claimed_by: 'alice', claim_id: 'c-1' }, events: 1 }) } as never,
      publishResult: async () => {
        if (++attempts === 1) throw new Error('message id reused');
        return { seq: 1, duplicate: false, stream: 'X' };
      },
      onOffer: async (offer) => {
        await offer.claim({ autoHeartbeat: false });
        seen.push(await offer.finish({ result_id: 'a', body: 'done', workflow_run_id: 'wr-1' }).catch((error: unknown) => (error as Error).message));
        seen.push(await offer.finish({ result_id: 'b', body: 'done', workflow_run_id: 'wr-1' }));
      },
    })(offerMessage(1));
    expect(seen).toEqual(['message id reused', { seq: 1, duplicate: false, stream: 'X' }]);
  });
});
