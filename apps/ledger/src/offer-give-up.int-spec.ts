import {
  createEventRegistry,
  edgeAckSubject,
  edgeApiPrefix,
  ledgerCommandSubject,
  OfferHeader,
  Principals,
  type HandoffRecord,
  type LedgerReply,
} from '@baton/contracts';
import { batonStreamNames, JetStreamEventStore, LedgerClient, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { waitFor } from '@baton/wait';
import { TerminatedOffers } from './edge/terminated-offers';
import { agentsOf, bootLedger, callers, connectTest, deadLetters, deleteStreams, DlqHeader, offers, publishDefinition, randomPrefix } from './int/support';

const P = 'shop';
const as = agentsOf(P);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

function handoffOf(reply: LedgerReply): HandoffRecord {
  if (!reply.ok) throw new Error(`expected ok, got ${reply.error.code}: ${reply.error.message}`);
  return reply.handoff;
}

function errorOf(reply: LedgerReply) {
  if (reply.ok) throw new Error(`expected an error, got ${reply.handoff.status}`);
  return reply.error;
}

describe('an offer given up before any claim (give_up_offer, real NATS): the handoff is offered again, then escalated — never left silently pending', () => {
  const prefix = randomPrefix();
  let nats: NatsHandle;
  let ledger: RunningService;
  let client: LedgerClient;
  let store: JetStreamEventStore;

  const eventTypes = async (id: string) => (await store.read({ project: P, kind: 'handoff', id })).events.map((e) => e.type);
  /** The offers of `id` published for `agent`, oldest first. */
  const offersOf = async (agent: string, id: string) => (await offers(nats, prefix, P, agent)).filter((m) => (m.json() as HandoffRecord).id === id);

  beforeAll(async () => {
    nats = await connectTest('ledger-give-up-int');
    ledger = await bootLedger(prefix, 'ledger-give-up');
    await publishDefinition(nats, prefix, {
      project: P,
      lead: 'lena',
      agents: [{ name: 'alice' }, { name: 'bob' }, { name: 'carol' }, { name: 'lena' }],
      workflows: [],
    });
    client = new LedgerClient(nats, prefix, { timeoutMs: 5000 });
    store = new JetStreamEventStore({ js: nats.js, jsm: nats.jsm, prefix, registry: createEventRegistry() });
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  async function create(id: string, to: string, maxRetries = 3): Promise<HandoffRecord> {
    return handoffOf(
      await client.create(
        P,
        { handoff_id: id, from_agent: 'alice', to_agent: to, summary: `work ${id}`, max_retries: maxRetries, idempotency_key: `create-${id}` },
        as('alice'),
      ),
    );
  }

  const giveUp = (id: string, key: string, offeredVersion?: number) => ({
    handoff_id: id,
    ...(offeredVersion !== undefined ? { offered_version: offeredVersion } : {}),
    deliveries: 5,
    reason: 'onOffer failed 5 times: model endpoint down',
    idempotency_key: key,
  });

  it('seed 002 retry cap → CONSULT escalation: each give-up is a retry and a new offer; the one past max_retries escalates to the lead, whose consult is offered', async () => {
    const created = await create('h-stuck', 'bob', 1);
    await waitFor(async () => (await offersOf('bob', 'h-stuck')).length === 1 || undefined, 'the first offer of h-stuck');

    const first = handoffOf(await client.giveUpOffer(P, giveUp('h-stuck', 'give_up:h-stuck:1', created.version), as('bob')));
    expect(first).toMatchObject({
      status: 'pending',
      retry: { max_retries: 1, retry_count: 1 },
      offer_given_up: { by: 'bob', deliveries: 5, reason: 'onOffer failed 5 times: model endpoint down' },
    });
    // Offered again by the reactor, as the event that left it pending (a new message id).
    const again = await waitFor(async () => {
      const list = await offersOf('bob', 'h-stuck');
      return list.length === 2 ? list : undefined;
    }, 'h-stuck offered again after the give-up');
    expect(again[1]!.header(OfferHeader.eventType)).toBe('handoff.offer_given_up');
    expect(again[1]!.json()).toMatchObject({ status: 'pending', version: first.version, retry: { retry_count: 1 } });

    const second = handoffOf(await client.giveUpOffer(P, giveUp('h-stuck', 'give_up:h-stuck:2', first.version), as('bob')));
    expect(second).toMatchObject({
      status: 'failed',
      terminal_reason: 'retry cap 1 reached (offer_given_up); escalated to lena',
      escalation_outcome: { escalate_to: 'lena' },
    });
    expect(await eventTypes('h-stuck')).toEqual(['handoff.created', 'handoff.offer_given_up', 'handoff.escalated']);
    const consultId = second.escalation_outcome && 'consult_handoff_id' in second.escalation_outcome ? second.escalation_outcome.consult_handoff_id : '';
    expect(consultId).toMatch(/^esc-[0-9a-f]{32}$/);
    // The ledger's escalation policy creates the consult, and the lead is offered it.
    const [consultOffer] = await waitFor(async () => {
      const list = await offersOf('lena', consultId);
      return list.length > 0 ? list : undefined;
    }, 'the consult offered to the lead');
    expect(consultOffer!.json()).toMatchObject({
      kind: 'consult',
      to_agent: 'lena',
      reply_to_handoff_id: 'h-stuck',
      priority: 'high',
      context: { escalated_handoff_id: 'h-stuck', cause: 'offer_given_up' },
    });
    // Nothing more is offered to the agent that gave up.
    expect(await offersOf('bob', 'h-stuck')).toHaveLength(2);
  });

  it('idempotent by key: the same give-up again stores nothing and offers nothing; a give-up of the earlier round`s offer is stale_offer', async () => {
    const created = await create('h-idem', 'bob');
    const first = handoffOf(await client.giveUpOffer(P, giveUp('h-idem', 'give_up:h-idem:1', created.version), as('bob')));
    const retry = await client.giveUpOffer(P, giveUp('h-idem', 'give_up:h-idem:1', created.version), as('bob'));
    expect(retry).toMatchObject({ ok: true, events: 0, handoff: { status: 'pending', retry: { retry_count: 1 }, version: first.version } });
    // Another offer of the same round (a resume's re-offer, say), given up on too: counted once.
    expect(errorOf(await client.giveUpOffer(P, giveUp('h-idem', 'give_up:h-idem:resume', created.version), as('bob')))).toMatchObject({
      code: 'stale_offer',
      kind: 'wrong_state',
      details: { offered_version: created.version, version: first.version },
    });
    expect(await eventTypes('h-idem')).toEqual(['handoff.created', 'handoff.offer_given_up']);
    await waitFor(async () => (await offersOf('bob', 'h-idem')).length === 2 || undefined, 'h-idem offered again once');
  });

  it('identity from the subject: another agent cannot give up bob`s offer (not_the_addressee), nor claim to be bob (identity_mismatch, dead-lettered); services and operators may not send it (principal_not_allowed)', async () => {
    await create('h-mine', 'bob');
    expect(errorOf(await client.giveUpOffer(P, giveUp('h-mine', 'give_up:h-mine:carol'), as('carol')))).toMatchObject({
      code: 'not_the_addressee',
      kind: 'forbidden',
    });
    // A body naming bob on carol's subject: refused before anything is decided.
    const subject = ledgerCommandSubject(prefix, P, Principals.agent(P, 'carol'), 'give_up_offer');
    const forged = encoder.encode(JSON.stringify({ ...giveUp('h-mine', 'give_up:h-mine:forged'), actor: 'bob' }));
    const answer = JSON.parse(decoder.decode((await nats.connection.request(subject, forged, { timeout: 5000 })).data)) as LedgerReply;
    expect(errorOf(answer)).toMatchObject({ code: 'identity_mismatch', kind: 'forbidden' });
    const letter = await waitFor(
      async () => (await deadLetters(nats, prefix, 'ledger')).find((m) => Buffer.from(m.data).equals(Buffer.from(forged))),
      'the forged give-up dead-lettered',
    );
    expect(letter.header(DlqHeader.reason)).toBe('identity_mismatch');
    for (const caller of [callers.watchdog, callers.router, callers.operator('olga'), callers.admin()]) {
      expect(errorOf(await client.giveUpOffer(P, giveUp('h-mine', 'give_up:h-mine:svc'), caller))).toMatchObject({
        code: 'principal_not_allowed',
        kind: 'forbidden',
      });
    }
    expect(await eventTypes('h-mine')).toEqual(['handoff.created']);
    expect(await client.get(P, 'h-mine')).toMatchObject({ status: 'pending', retry: { retry_count: 0 } });
  });

  it('a claimed handoff`s path is unchanged: a give-up once it is claimed is refused handoff_not_pending, and the claim stands (its lease decides)', async () => {
    await create('h-claimed', 'bob');
    const claimed = handoffOf(await client.claim(P, { handoff_id: 'h-claimed', idempotency_key: 'claim-h-claimed' }, as('bob')));
    expect(errorOf(await client.giveUpOffer(P, giveUp('h-claimed', 'give_up:h-claimed:1'), as('bob')))).toMatchObject({ code: 'handoff_not_pending' });
    expect(await client.get(P, 'h-claimed')).toMatchObject({ status: 'claimed', claim_id: claimed.claim_id, retry: { retry_count: 0 } });
    expect(await eventTypes('h-claimed')).toEqual(['handoff.created', 'handoff.claimed']);
  });

  it('a completion handback its reviewer gave up on is not offered to it again (a review has no retry cap): it waits, pending, for a person', async () => {
    await create('h-reviewed', 'bob');
    const claimed = handoffOf(await client.claim(P, { handoff_id: 'h-reviewed', idempotency_key: 'claim-h-reviewed' }, as('bob')));
    const returned = handoffOf(
      await client.return(
        P,
        {
          handoff_id: 'h-reviewed',
          claim_id: claimed.claim_id!,
          report: { summary: 'done', outcome: 'completed', evidence: { tests_run: ['1 passed'] } },
          idempotency_key: 'return-h-reviewed',
        },
        as('bob'),
      ),
    );
    const handbackId = returned.handback_id!;
    const [offered] = await waitFor(async () => {
      const list = await offersOf('alice', handbackId);
      return list.length > 0 ? list : undefined;
    }, 'the handback offered to alice');
    const gaveUp = handoffOf(
      await client.giveUpOffer(P, giveUp(handbackId, `give_up:${handbackId}:1`, (offered!.json() as HandoffRecord).version), as('alice')),
    );
    expect(gaveUp).toMatchObject({ kind: 'completion_handback', status: 'pending', retry: { retry_count: 0 }, offer_given_up: { by: 'alice' } });
    // The reactor has handled the give-up once a later give-up of another handoff is offered again.
    const later = await create('h-after-review', 'bob');
    handoffOf(await client.giveUpOffer(P, giveUp('h-after-review', 'give_up:h-after-review:1', later.version), as('bob')));
    await waitFor(async () => (await offersOf('bob', 'h-after-review')).length === 2 || undefined, 'h-after-review offered again');
    expect(await offersOf('alice', handbackId)).toHaveLength(1);
    expect(await client.get(P, 'h-reviewed')).toMatchObject({ status: 'returned', handback_id: handbackId });
  });
});

describe('an offer its agent terminates (+TERM) through the edge without give_up_offer is given up for it (real NATS): never left silently pending', () => {
  const prefix = randomPrefix();
  const inbox = batonStreamNames(prefix).inbox;
  let nats: NatsHandle;
  let ledger: RunningService;
  let client: LedgerClient;

  const offersOf = async (agent: string, id: string) => (await offers(nats, prefix, P, agent)).filter((m) => (m.json() as HandoffRecord).id === id);

  beforeAll(async () => {
    nats = await connectTest('ledger-term-int');
    ledger = await bootLedger(prefix, 'ledger-term', {}, { terminatedOfferGraceMs: 300 });
    await publishDefinition(nats, prefix, { project: P, lead: 'lena', agents: [{ name: 'alice' }, { name: 'bob' }, { name: 'lena' }], workflows: [] });
    client = new LedgerClient(nats, prefix, { timeoutMs: 5000 });
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  /** Create `id` for bob, then pull bob's next offer through his edge as a client of its own would: the offer and its ack subject. */
  async function pullOffer(id: string): Promise<{ record: HandoffRecord; ack: string }> {
    handoffOf(
      await client.create(
        P,
        { handoff_id: id, from_agent: 'alice', to_agent: 'bob', summary: `work ${id}`, max_retries: 3, idempotency_key: `create-${id}` },
        as('alice'),
      ),
    );
    const { durable } = (await client.openOffers(P, {}, as('bob'))) as { durable: string };
    for (;;) {
      const pull = `${edgeApiPrefix(prefix, P, 'bob')}.CONSUMER.MSG.NEXT.${inbox}.${durable}`;
      // A reply inbox of its own (noMux): the message JetStream delivers is not a reply the muxed inbox takes.
      const msg = await nats.connection.request(pull, encoder.encode(JSON.stringify({ batch: 1, expires: 2e9 })), { timeout: 5000, noMux: true });
      if (msg.reply === undefined || msg.data.length === 0) continue;
      const record = JSON.parse(decoder.decode(msg.data)) as HandoffRecord;
      // Offers of earlier cases still unacknowledged come first: let them go.
      if (record.id !== id) {
        nats.connection.publish(edgeAckSubject(prefix, P, 'bob', msg.reply), encoder.encode('+ACK'));
        continue;
      }
      return { record, ack: msg.reply };
    }
  }

  it('a +TERM alone: after the grace the offer is given up as its agent (a retry, offered again), the reason saying how', async () => {
    const { record, ack } = await pullOffer('h-term');
    nats.connection.publish(edgeAckSubject(prefix, P, 'bob', ack), encoder.encode('+TERM model endpoint down'));
    const given = await waitFor(async () => {
      const h = await client.get(P, 'h-term');
      return h?.offer_given_up !== undefined ? h : undefined;
    }, 'the terminated offer given up');
    expect(given).toMatchObject({
      status: 'pending',
      retry: { retry_count: 1 },
      offer_given_up: { by: 'bob', deliveries: 1, reason: 'offer terminated (+TERM) after 1 delivery without a give-up: model endpoint down' },
    });
    expect(given.version).toBeGreaterThan(record.version);
    await waitFor(async () => (await offersOf('bob', 'h-term')).length === 2 || undefined, 'h-term offered again');
  });

  it('a +TERM followed by the SDK`s own give-up: the SDK`s is the record, the ledger`s changes nothing (one retry, not two)', async () => {
    const { record, ack } = await pullOffer('h-sdk-term');
    nats.connection.publish(edgeAckSubject(prefix, P, 'bob', ack), encoder.encode('+TERM'));
    const sdkReason = 'onOffer failed 1 time: parser crashed';
    handoffOf(
      await client.giveUpOffer(
        P,
        { handoff_id: 'h-sdk-term', offered_version: record.version, deliveries: 1, reason: sdkReason, idempotency_key: 'give_up:h-sdk-term:sdk' },
        as('bob'),
      ),
    );
    // Past the grace, and the terminations it waited on are done.
    await waitFor(() => (ledger.app.get(TerminatedOffers).waitingCount() === 0 ? true : undefined), 'the grace over');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await client.get(P, 'h-sdk-term')).toMatchObject({ status: 'pending', retry: { retry_count: 1 }, offer_given_up: { reason: sdkReason } });
  });

  it('an acknowledgement that does not terminate (+ACK, -NAK, +WPI) gives nothing up', async () => {
    const { record, ack } = await pullOffer('h-ack');
    nats.connection.publish(edgeAckSubject(prefix, P, 'bob', ack), encoder.encode('+WPI'));
    nats.connection.publish(edgeAckSubject(prefix, P, 'bob', ack), encoder.encode('+ACK'));
    await nats.connection.flush();
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(ledger.app.get(TerminatedOffers).waitingCount()).toBe(0);
    expect(await client.get(P, 'h-ack')).toMatchObject({ status: 'pending', version: record.version, retry: { retry_count: 0 } });
  });
});
