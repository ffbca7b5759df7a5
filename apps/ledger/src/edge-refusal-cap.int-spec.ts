import { headers as natsHeaders } from 'nats';
import {
  EDGE_REFUSAL_DETAIL_HEADER,
  EDGE_REFUSAL_HEADER,
  edgeRefusalOf,
  EdgeRefusalReplySchema,
  ledgerCommandSenderOf,
  ledgerCommandSubject,
  MsgIds,
  offerDurableName,
  parseEdgeSubject,
  Principals,
} from '@baton/contracts';
import { batonStreamNames, DeadLetterReason, type NatsHandle } from '@baton/eventstore';
import type { RunningService } from '@baton/platform';
import { AgentEdgeRelay, EDGE_DLQ_SOURCE } from './edge/agent-edge';
import { LEDGER_DLQ_SOURCE } from './commands/ledger-commands';
import { bootLedger, connectTest, deadLetters, deleteStreams, DlqHeader, messagesOn, randomPrefix, type StoredMessage } from './int/support';

// The agent edge writes each sender at most its budget of refused letters a window, and sums up
// the rest in one `refusals_suppressed` letter when the window ends. Without authentication (the
// test server's), the relay checks subjects and bodies only: the refusals here are no_handler,
// schema_violation and msg_id_mismatch, each message with bytes or a subject of its own so that no
// two are one letter by their ids.

const BUDGET = 5;
const WINDOW_MS = 3_000;
const encoder = new TextEncoder();

async function waitFor<T>(what: string, probe: () => Promise<T | null>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('agent edge: refused letters per sender are capped, and the rest summed up in one letter (real NATS)', () => {
  const prefix = randomPrefix();
  const inbox = batonStreamNames(prefix).inbox;
  let nats: NatsHandle;
  let ledger: RunningService;
  let relay: AgentEdgeRelay;

  /** The edge letters of one sender (by the subject each names), oldest first. */
  async function lettersOf(sender: string): Promise<StoredMessage[]> {
    const letters = await deadLetters(nats, prefix, EDGE_DLQ_SOURCE);
    return letters.filter((l) => parseEdgeSubject(prefix, l.header(DlqHeader.subject) ?? '', inbox).sender === sender);
  }

  /** Publish the `i`th refused message of `project`/`agent`: a call outside its durable, a pull in disguise, or a foreign message id, in turn. */
  function publishRefused(project: string, agent: string, i: number): string {
    const edge = `${prefix}.edge.${project}`;
    if (i % 3 === 0) {
      const subject = `${edge}.offers.${agent}.api.STREAM.DELETE.${inbox}`;
      nats.connection.publish(subject, encoder.encode(JSON.stringify({ n: i })));
      return subject;
    }
    if (i % 3 === 1) {
      const subject = `${edge}.offers.${agent}.ack.${inbox}.${offerDurableName(project, agent)}.1.${i}.1.1.0`;
      nats.connection.publish(subject, encoder.encode('+NXT'));
      return subject;
    }
    const subject = `${edge}.result.${agent}`;
    const hdrs = natsHeaders();
    hdrs.set('Nats-Msg-Id', MsgIds.result('someone-else', 'run-1', `r-${i}`));
    nats.connection.publish(subject, encoder.encode(JSON.stringify({ i })), { headers: hdrs });
    return subject;
  }

  /** Publish a result the relay passes on (a result of its own agent, under its own id). */
  function publishGood(project: string, agent: string, id: string): void {
    const hdrs = natsHeaders();
    hdrs.set('Nats-Msg-Id', MsgIds.result(project, 'run-1', id));
    const result = { result_id: id, run_id: 'ar-1', project, workflow_run_id: 'run-1', agent, produced_at: new Date().toISOString() };
    nats.connection.publish(`${prefix}.edge.${project}.result.${agent}`, encoder.encode(JSON.stringify(result)), { headers: hdrs });
  }

  /** Wait until the relay has passed on `count` messages in all: everything published before them was handled (one subscription, in order). */
  async function relayedReach(count: number): Promise<void> {
    await nats.connection.flush();
    await waitFor(`${count} messages relayed`, async () => (relay.relayedCount() >= count ? true : null));
  }

  /** A counter's value summed over the series whose labels match `labels` (the ledger's /metrics). */
  async function counted(metric: 'edgeMessages' | 'deadLetters', labels: Record<string, string>): Promise<number> {
    const { values } = await ledger.metrics[metric].get();
    return values
      .filter((v) => Object.entries(labels).every(([k, want]) => (v.labels as Record<string, string | number | undefined>)[k] === want))
      .reduce((sum, v) => sum + v.value, 0);
  }

  beforeAll(async () => {
    nats = await connectTest('ledger-edge-cap-int');
    ledger = await bootLedger(prefix, 'ledger-edge-cap', { BATON_REFUSED_LETTERS_PER_MINUTE: String(BUDGET) }, { refusalWindowMs: WINDOW_MS });
    relay = ledger.app.get(AgentEdgeRelay);
  });

  afterAll(async () => {
    await ledger?.stop();
    if (nats) {
      await deleteStreams(nats, prefix);
      await nats.close();
    }
  });

  it('a burst of refused messages beyond the budget writes exactly the budget of letters, then one summary with the count, the reasons and the first and last subjects', async () => {
    const N = 60;
    const suppressedBefore = relay.suppressedCount();
    const lettersBefore = await counted('deadLetters', { source: EDGE_DLQ_SOURCE });
    const subjects: string[] = [];
    for (let i = 0; i < N; i++) subjects.push(publishRefused('acme', 'flood', i));
    publishGood('acme', 'flood', 'after-burst');
    await relayedReach(relay.relayedCount() + 1);
    expect(relay.suppressedCount() - suppressedBefore).toBe(N - BUDGET);

    const summary = await waitFor('the summary letter', async () => {
      const letters = await lettersOf('acme/flood');
      return letters.find((l) => l.header(DlqHeader.reason) === DeadLetterReason.refusalsSuppressed) ?? null;
    });
    const letters = await lettersOf('acme/flood');
    expect(letters).toHaveLength(BUDGET + 1);
    const own = letters.filter((l) => l.header(DlqHeader.reason) !== DeadLetterReason.refusalsSuppressed);
    expect(own.map((l) => l.header(DlqHeader.subject))).toEqual(subjects.slice(0, BUDGET));
    expect(own.map((l) => l.header(DlqHeader.reason))).toEqual(['no_handler', 'schema_violation', 'msg_id_mismatch', 'no_handler', 'schema_violation']);

    // The 55 suppressed are i = 5…59: i % 3 gives 18 no_handler, 18 schema_violation, 19 msg_id_mismatch.
    expect(summary.json()).toMatchObject({
      sender: 'acme/flood',
      suppressed: N - BUDGET,
      reasons: { no_handler: 18, schema_violation: 18, msg_id_mismatch: 19 },
      first_subject: subjects[BUDGET],
      last_subject: subjects[N - 1],
      letters_per_window: BUDGET,
      window_ms: WINDOW_MS,
    });
    expect(summary.header(DlqHeader.source)).toBe(EDGE_DLQ_SOURCE);
    expect(summary.header(DlqHeader.subject)).toBe(subjects[BUDGET]);
    expect(summary.header(DlqHeader.detail)).toContain(`${N - BUDGET} refused edge messages of acme/flood`);
    expect(summary.header(DlqHeader.detail)).toContain('no_handler 18');
    // baton_dead_letters_total counts the letters written: the budget and the summary.
    await waitFor('the letters counted', async () =>
      (await counted('deadLetters', { source: EDGE_DLQ_SOURCE })) - lettersBefore === BUDGET + 1 ? true : null,
    );
    expect(await counted('deadLetters', { source: EDGE_DLQ_SOURCE, reason: DeadLetterReason.refusalsSuppressed })).toBeGreaterThanOrEqual(1);

    // The window is over: the sender's next refusal is written as a letter of its own again.
    const again = publishRefused('acme', 'flood', N);
    publishGood('acme', 'flood', 'after-window');
    await relayedReach(relay.relayedCount() + 1);
    const after = await waitFor('the next window letter', async () => {
      const found = await lettersOf('acme/flood');
      return found.length === BUDGET + 2 ? found : null;
    });
    expect(after[after.length - 1]!.header(DlqHeader.subject)).toBe(again);
  });

  it("a second sender is unaffected: another agent's budget, and a project's shared subjects, are their own", async () => {
    const sent = { other: [] as string[], shared: [] as string[] };
    for (let i = 0; i < 40; i++) {
      publishRefused('acme', 'flood2', i);
      if (i < BUDGET) sent.other.push(publishRefused('acme', 'other', i));
      if (i < BUDGET) {
        // A start on the project's shared subject under a foreign id: the sender is the project.
        const hdrs = natsHeaders();
        hdrs.set('Nats-Msg-Id', MsgIds.start('someone-else', `run-${i}`));
        const subject = `${prefix}.edge.acme.start`;
        nats.connection.publish(subject, encoder.encode(JSON.stringify({ i })), { headers: hdrs });
        sent.shared.push(subject);
      }
    }
    publishGood('acme', 'other', 'after-flood2');
    await relayedReach(relay.relayedCount() + 1);

    const other = await waitFor(`${BUDGET} letters of acme/other`, async () => {
      const found = await lettersOf('acme/other');
      return found.length >= BUDGET ? found : null;
    });
    expect(other.map((l) => [l.header(DlqHeader.subject), l.header(DlqHeader.reason)])).toEqual(
      sent.other.map((subject, i) => [subject, ['no_handler', 'schema_violation', 'msg_id_mismatch'][i % 3]]),
    );
    const shared = await waitFor(`${BUDGET} letters of project acme`, async () => {
      const found = await lettersOf('acme');
      return found.length >= BUDGET ? found : null;
    });
    expect(shared.map((l) => l.header(DlqHeader.reason))).toEqual(Array(BUDGET).fill('msg_id_mismatch'));
    // The flooding sender is capped meanwhile: its budget, and (once its window ends) one summary.
    const flood = await waitFor('the summary of acme/flood2', async () => {
      const found = await lettersOf('acme/flood2');
      return found.some((l) => l.header(DlqHeader.reason) === DeadLetterReason.refusalsSuppressed) ? found : null;
    });
    expect(flood).toHaveLength(BUDGET + 1);
    // Nothing more came for the others: no summary, their budget was enough.
    expect(await lettersOf('acme/other')).toHaveLength(BUDGET);
    expect(await lettersOf('acme')).toHaveLength(BUDGET);
  });

  it('good messages are relayed during the flood, from the flooding sender and others', async () => {
    const relayedBefore = relay.relayedCount();
    const suppressedBefore = relay.suppressedCount();
    const metricBefore = {
      relayed: await counted('edgeMessages', { route: 'input', outcome: 'relayed' }),
      suppressed: await counted('edgeMessages', { outcome: 'suppressed' }),
      refused: await counted('edgeMessages', { outcome: 'refused' }),
    };
    const good: string[] = [];
    for (let i = 0; i < 200; i++) {
      publishRefused('acme', 'flood3', i);
      if (i % 10 === 0) {
        publishGood('acme', 'flood3', `own-${i}`);
        publishGood('globex', 'bystander', `by-${i}`);
        good.push(`own-${i}`, `by-${i}`);
      }
    }
    await relayedReach(relayedBefore + good.length);
    expect(relay.relayedCount() - relayedBefore).toBe(good.length);
    expect(relay.suppressedCount() - suppressedBefore).toBe(200 - BUDGET);
    // The same counts on /metrics (baton_edge_messages_total by route and outcome).
    expect((await counted('edgeMessages', { route: 'input', outcome: 'relayed' })) - metricBefore.relayed).toBe(good.length);
    expect((await counted('edgeMessages', { outcome: 'suppressed' })) - metricBefore.suppressed).toBe(200 - BUDGET);
    expect((await counted('edgeMessages', { outcome: 'refused' })) - metricBefore.refused).toBe(BUDGET);
    expect(await counted('edgeMessages', { route: 'none', outcome: 'refused' })).toBeGreaterThan(0);

    const ids = (stored: StoredMessage[]) => stored.map((m) => (m.json() as { result_id: string }).result_id);
    // Relayed is published, not yet stored: the stream holds them once the server has caught up.
    const storedOn = (subject: string, count: number) =>
      waitFor(`${count} messages stored on ${subject}`, async () => {
        const found = await messagesOn(nats, inbox, subject);
        return found.length >= count ? found : null;
      });
    const own = await storedOn(`${prefix}.in.acme.result.flood3`, good.length / 2);
    const bystander = await storedOn(`${prefix}.in.globex.result.bystander`, good.length / 2);
    expect(ids(own)).toEqual(good.filter((id) => id.startsWith('own-')));
    expect(ids(bystander)).toEqual(good.filter((id) => id.startsWith('by-')));
  });
  it('rejected ledger commands are capped the same way per principal: every request still answered with its code, letters past the budget summed up', async () => {
    const N = 20;
    const subject = ledgerCommandSubject(prefix, 'acme', Principals.agent('acme', 'noisy'), 'claim');
    const sender = ledgerCommandSenderOf(prefix, subject);
    expect(sender).toBe('acme/agent.noisy');
    // A body that breaks the schema each time (its own bytes, so no two letters share an id).
    const replies = await Promise.all(
      Array.from({ length: N }, (_, i) => nats.connection.request(subject, encoder.encode(JSON.stringify({ handoff_id: '', n: i })), { timeout: 5_000 })),
    );
    for (const reply of replies) expect(reply.json()).toMatchObject({ ok: false, error: { code: 'schema_violation', kind: 'rejected' } });
    const ledgerLetters = async () => (await deadLetters(nats, prefix, LEDGER_DLQ_SOURCE)).filter((l) => l.header(DlqHeader.subject) === subject);
    const summary = await waitFor('the commands summary letter', async () => {
      const found = await ledgerLetters();
      return found.find((l) => l.header(DlqHeader.reason) === DeadLetterReason.refusalsSuppressed) ?? null;
    });
    expect(await ledgerLetters()).toHaveLength(BUDGET + 1);
    expect(summary.json()).toMatchObject({ sender, suppressed: N - BUDGET, reasons: { schema_violation: N - BUDGET }, letters_per_window: BUDGET });
    expect(summary.header(DlqHeader.source)).toBe(LEDGER_DLQ_SOURCE);
    expect(summary.header(DlqHeader.detail)).toContain(`${N - BUDGET} refused ledger commands of ${sender}`);
  });
  it.each([
    [
      'a heartbeat over the 256 KiB cap',
      'heartbeat',
      'payload_too_large',
      { handoff_id: 'h-1', claim_id: 'c-1', idempotency_key: 'k', pad: 'x'.repeat(300_000) },
    ],
    [
      'a release whose 20 kB reason is refused by the schema',
      'release',
      'schema_violation',
      { handoff_id: 'h-1', reason: 'y'.repeat(20_000), idempotency_key: 'k' },
    ],
  ])('a refused ledger command keeps its first 4 KiB in its letter, as the edge does: %s', async (_what, command, code, body) => {
    const subject = ledgerCommandSubject(prefix, 'acme', Principals.agent('acme', `big-${command}`), command as 'heartbeat' | 'release');
    const bytes = encoder.encode(JSON.stringify(body));
    const reply = await nats.connection.request(subject, bytes, { timeout: 5_000 });
    // The sender is answered as before: the cut is the letter's alone.
    expect(reply.json()).toMatchObject({ ok: false, error: { code, kind: 'rejected' } });
    const letter = await waitFor(
      'the letter',
      async () => (await deadLetters(nats, prefix, LEDGER_DLQ_SOURCE)).find((l) => l.header(DlqHeader.subject) === subject) ?? null,
    );
    expect(letter.header(DlqHeader.reason)).toBe(code);
    expect(letter.data.length).toBe(4096);
    expect(Buffer.from(letter.data).equals(Buffer.from(bytes.subarray(0, 4096)))).toBe(true);
    expect(letter.header(DlqHeader.detail)).toContain(`(first 4096 of ${bytes.length} bytes kept)`);
    expect(letter.header(DlqHeader.truncated)).toBe(String(bytes.length));
  });

  it('an inbox message over the 256 KiB cap is refused at the edge, its letter cut to its first 4 KiB, and never reaches the inbox', async () => {
    const subject = `${prefix}.edge.globex.result.big`;
    const hdrs = natsHeaders();
    hdrs.set('Nats-Msg-Id', MsgIds.result('globex', 'run-1', 'big-1'));
    const body = encoder.encode(JSON.stringify({ pad: 'x'.repeat(300_000) }));
    nats.connection.publish(subject, body, { headers: hdrs });
    publishGood('globex', 'big', 'after-big');
    await relayedReach(relay.relayedCount() + 1);
    const letter = await waitFor('the payload_too_large letter', async () => (await lettersOf('globex/big'))[0] ?? null);
    expect(letter.header(DlqHeader.reason)).toBe('payload_too_large');
    expect(letter.data.length).toBe(4096);
    expect(letter.header(DlqHeader.detail)).toContain(`first 4096 of ${body.length} bytes kept`);
    const stored = await messagesOn(nats, inbox, `${prefix}.in.globex.result.big`);
    expect(stored.map((m) => (m.json() as { result_id?: string }).result_id)).toEqual(['after-big']);
  });

  it('the edge answers what it refuses at once, typed, in the form JetStream answers the same request in — every refusal, past the letter budget too — and never on a subject of JetStream, the server or Baton', async () => {
    const edge = `${prefix}.edge.initech`;
    const durable = offerDurableName('initech', 'asker');
    // A JetStream publish under another project's message id: the client throws the answer as its API error.
    const squat = await nats.js
      .publish(`${edge}.start.asker`, encoder.encode(JSON.stringify({ workflow_run_id: 'wr-1' })), { msgID: MsgIds.start('globex', 'wr-1'), timeout: 20_000 })
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(edgeRefusalOf(squat)).toEqual({
      code: 400,
      description: expect.stringMatching(/^msg_id_mismatch: /),
      reason: 'msg_id_mismatch',
      detail: expect.stringContaining("names project 'globex'"),
    });

    // Past the sender's letter budget each refusal is still answered: a raw request reads the JSON body.
    const tooLarge = encoder.encode(JSON.stringify({ pad: 'x'.repeat(300_000) }));
    for (let i = 0; i < BUDGET + 2; i++) {
      const reply = await nats.connection.request(`${edge}.result.asker`, tooLarge, { timeout: 20_000 });
      const body = EdgeRefusalReplySchema.parse(JSON.parse(new TextDecoder().decode(reply.data)));
      expect(body.error).toMatchObject({ code: 400, reason: 'payload_too_large' });
    }
    // A pull and an acknowledgement are answered with an empty 400 status message, the reason in a header.
    for (const [subject, body, detail] of [
      [`${edge}.offers.asker.api.CONSUMER.MSG.NEXT.${inbox}.${durable}`, '{"batch":0}', 'a pull takes batch'],
      [`${edge}.offers.asker.ack.${inbox}.${durable}.1.7.1.1.0`, '+NXT', 'an acknowledgement is +ACK'],
    ] as const) {
      const reply = await nats.connection.request(subject, encoder.encode(body), { timeout: 20_000 });
      expect({ subject, data: reply.data.length, code: reply.headers?.code, reason: reply.headers?.get(EDGE_REFUSAL_HEADER) }).toEqual({
        subject,
        data: 0,
        code: 400,
        reason: 'schema_violation',
      });
      expect(reply.headers?.get(EDGE_REFUSAL_DETAIL_HEADER)).toContain(detail);
    }
    // A subject of another shape: the JSON form, no_handler.
    const nowhere = await nats.connection.request(`${edge}.offers.asker.api.STREAM.DELETE.${inbox}`, new Uint8Array(0), { timeout: 20_000 });
    expect(EdgeRefusalReplySchema.parse(JSON.parse(new TextDecoder().decode(nowhere.data))).error.reason).toBe('no_handler');

    // Replies the edge never answers on, even without authentication: JetStream's API, Baton's own subjects.
    const watched = [`$JS.API.EDGE_TEST.${prefix}`, `${prefix}.in.initech.answer`];
    const heard: string[] = [];
    const subscriptions = watched.map((subject) => nats.connection.subscribe(subject, { callback: (_error, msg) => heard.push(msg.subject) }));
    await nats.connection.flush();
    for (const reply of watched) nats.connection.publish(`${edge}.offers.asker.api.STREAM.DELETE.${inbox}`, new Uint8Array(0), { reply });
    publishGood('initech', 'asker', 'after-unanswered');
    await relayedReach(relay.relayedCount() + 1);
    await nats.connection.flush();
    await new Promise((resolve) => setTimeout(resolve, 200));
    for (const subscription of subscriptions) subscription.unsubscribe();
    expect(heard).toEqual([]);
    // Each refusal is recorded too: the letters of the budget, then one summary.
    const letters = await waitFor('the refusals of initech/asker recorded', async () => {
      const found = await lettersOf('initech/asker');
      return found.some((l) => l.header(DlqHeader.reason) === DeadLetterReason.refusalsSuppressed) ? found : null;
    });
    expect(letters).toHaveLength(BUDGET + 1);
  });

  it('an inbox message its consumer would refuse is refused at the edge and answered with the consumer`s code and fields, never stored; a result under another message`s id likewise; a good one under a client`s own id is relayed', async () => {
    const subject = `${prefix}.edge.hooli.result.gavin`;
    const result = { result_id: 'r1', run_id: 'ar-1', project: 'hooli', workflow_run_id: 'wr-1', agent: 'gavin', produced_at: new Date().toISOString() };
    const ask = async (body: unknown, msgId?: string) => {
      const hdrs = natsHeaders();
      if (msgId !== undefined) hdrs.set('Nats-Msg-Id', msgId);
      const reply = await nats.connection.request(subject, encoder.encode(typeof body === 'string' ? body : JSON.stringify(body)), {
        timeout: 20_000,
        headers: hdrs,
      });
      return JSON.parse(new TextDecoder().decode(reply.data)) as Record<string, unknown>;
    };
    const extra = EdgeRefusalReplySchema.parse(await ask({ ...result, colour: 'blue' }, MsgIds.result('hooli', 'wr-1', 'r1'))).error;
    expect(extra).toMatchObject({
      code: 400,
      reason: 'schema_violation',
      issues: [expect.objectContaining({ path: '(root)', message: expect.stringContaining('colour') })],
    });
    expect(EdgeRefusalReplySchema.parse(await ask('{"result_id":')).error.reason).toBe('malformed_json');
    expect(EdgeRefusalReplySchema.parse(await ask({ ...result, agent: 'richard' })).error.reason).toBe('identity_mismatch');
    expect(EdgeRefusalReplySchema.parse(await ask(result, MsgIds.result('hooli', 'wr-someone-else', 'r1'))).error).toMatchObject({
      reason: 'msg_id_mismatch',
      detail: expect.stringContaining(MsgIds.result('hooli', 'wr-1', 'r1')),
    });
    // Relayed: JetStream answers with its ack (under the client's own id form, then Baton's).
    expect(await ask(result, 'client-own-id-1')).toMatchObject({ stream: inbox, seq: expect.any(Number) });
    expect(await ask({ ...result, result_id: 'r2' }, MsgIds.result('hooli', 'wr-1', 'r2'))).toMatchObject({ stream: inbox, seq: expect.any(Number) });
    const stored = await messagesOn(nats, inbox, `${prefix}.in.hooli.result.gavin`);
    expect(stored.map((m) => (m.json() as { result_id?: string }).result_id)).toEqual(['r1', 'r2']);
    const letters = await waitFor('the four body refusals recorded', async () => {
      const found = await lettersOf('hooli/gavin');
      return found.length >= 4 ? found : null;
    });
    expect(letters.map((l) => l.header(DlqHeader.reason))).toEqual(['schema_violation', 'malformed_json', 'identity_mismatch', 'msg_id_mismatch']);
  });
});
