import { headers as natsHeaders } from 'nats';
import type { NatsHandle } from './connection';
import { DlqHeader, deadLetter } from './dead-letter';
import { DlqAdmin, letterDigest, letterNotice, noticeRedeliverCommand, redriveMarkerSubject, redriveMsgId, type RedriveItem } from './dlq-admin';
import { DlqSources } from './dlq-sources';
import { durableNameFor } from './subject-patterns';
import { batonStreamNames } from './topology';
import { connectTest, deleteTopology, provisionTopology, randomPrefix } from './int/support';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The readable source of the router's consumer of agent results: what its dead letters name. */
const RESULTS_SOURCE = DlqSources.routerResults;
/** Its durable, as the transport names it: what its letters named before readable sources. */
const RESULTS_DURABLE = durableNameFor('router', '{prefix}.in.*.result.*');

describe('DlqAdmin redrive (real NATS): only trusted letters, once, reported one by one', () => {
  let nats: NatsHandle;
  let prefix: string;
  let names: ReturnType<typeof batonStreamNames>;
  let admin: DlqAdmin;

  beforeEach(async () => {
    prefix = randomPrefix();
    nats = await connectTest('dlq-admin-int');
    await provisionTopology(nats, prefix);
    names = batonStreamNames(prefix);
    admin = new DlqAdmin({ js: nats.js, jsm: nats.jsm, prefix });
  });

  afterEach(async () => {
    await deleteTopology(nats, prefix);
    await nats.close();
  });

  const count = async (stream: string) => (await nats.jsm.streams.info(stream)).state.messages;

  /**
   * A result published to the inbox, then dead-lettered the way the router's consumer does it
   * (by default after its handler kept failing: a letter redrive republishes once the cause is fixed).
   */
  async function realLetter(body: string, agent = 'a', source: string = RESULTS_SOURCE, msgId = `orig-${body}`, reason = 'max_deliveries', project = 'p') {
    const subject = `${prefix}.in.${project}.result.${agent}`;
    const hdrs = natsHeaders();
    hdrs.set('X-Trace', 'trace-1');
    const ack = await nats.js.publish(subject, encoder.encode(body), { msgID: msgId, headers: hdrs });
    const letter = await deadLetter(nats.js, {
      prefix,
      source,
      reason,
      subject,
      headers: { 'Nats-Msg-Id': [msgId], 'X-Trace': ['trace-1'] },
      data: encoder.encode(body),
      deliveries: 1,
      stream: names.inbox,
      seq: ack.seq,
    });
    return { subject, inboxSeq: ack.seq, dlqSeq: letter.seq };
  }

  /** A letter written by hand: any headers anyone who may publish on `<prefix>.dlq.<token>` can write. */
  async function forged(token: string, claims: Record<string, string>, body = '{"forged":true}') {
    const hdrs = natsHeaders();
    for (const [key, value] of Object.entries(claims)) hdrs.set(key, value);
    const ack = await nats.js.publish(`${prefix}.dlq.${token}`, encoder.encode(body), { headers: hdrs });
    return ack.seq;
  }

  const byStatus = (items: RedriveItem[]) => items.map((i) => [i.seq, i.status, i.reason ?? null]);

  it('forged letters are skipped with their reason; a ledger request is skipped and the redrive goes on to the real letter', async () => {
    const held = await realLetter('{"result_id":"held"}');
    const answer = await forged(
      'router',
      {
        [DlqHeader.source]: 'router',
        [DlqHeader.reason]: 'schema_violation',
        [DlqHeader.subject]: `${prefix}.in.p.answer`,
        [DlqHeader.stream]: names.inbox,
        [DlqHeader.seq]: String(held.inboxSeq),
      },
      '{"workflow_run_id":"r1","action":"terminate"}',
    );
    const meshAnswer = await forged(RESULTS_SOURCE, {
      [DlqHeader.source]: RESULTS_SOURCE,
      [DlqHeader.subject]: `${prefix}.in.p.mesh_answer`,
      [DlqHeader.stream]: names.inbox,
      [DlqHeader.seq]: '1',
    });
    const event = await forged(
      'router',
      {
        [DlqHeader.source]: 'router',
        [DlqHeader.subject]: `${prefix}.ev.p.run.forged-run`,
        [DlqHeader.stream]: names.events,
        [DlqHeader.seq]: '1',
      },
      '{"type":"run.started"}',
    );
    // The real source, a subject it does not consume.
    const stop = await forged(RESULTS_SOURCE, {
      [DlqHeader.source]: RESULTS_SOURCE,
      [DlqHeader.subject]: `${prefix}.in.p.stop`,
      [DlqHeader.stream]: names.inbox,
      [DlqHeader.seq]: String(held.inboxSeq),
    });
    // The real source and subject, naming a real original whose bytes differ.
    const mismatch = await forged(
      RESULTS_SOURCE,
      { [DlqHeader.source]: RESULTS_SOURCE, [DlqHeader.subject]: held.subject, [DlqHeader.stream]: names.inbox, [DlqHeader.seq]: String(held.inboxSeq) },
      '{"result_id":"other"}',
    );
    // A source header that is not the letter's subject token.
    const mislabelled = await forged(
      'router',
      { [DlqHeader.source]: RESULTS_SOURCE, [DlqHeader.subject]: held.subject, [DlqHeader.stream]: names.inbox, [DlqHeader.seq]: String(held.inboxSeq) },
      '{"result_id":"held"}',
    );
    // A refused ledger request (core NATS: no stream stores it), as the ledger records one.
    const ledger = await deadLetter(nats.js, {
      prefix,
      source: 'ledger',
      reason: 'invalid',
      subject: `${prefix}.cmd.ledger.p.claim`,
      data: encoder.encode('{"handoff_id":"h"}'),
      deliveries: 1,
      stream: 'core-abc',
      seq: 0,
    });
    const real = await realLetter('{"result_id":"late"}', 'b');
    const inboxBefore = await count(names.inbox);

    const report = await admin.redrive();
    expect(byStatus(report.items)).toEqual([
      [held.dlqSeq, 'redriven', null],
      [answer, 'skipped', 'operator_answer'],
      [meshAnswer, 'skipped', 'operator_answer'],
      [event, 'skipped', 'event_subject'],
      [stop, 'skipped', 'subject_not_consumed'],
      [mismatch, 'skipped', 'original_mismatch'],
      [mislabelled, 'skipped', 'source_mismatch'],
      [ledger.seq, 'skipped', 'core_request'],
      [real.dlqSeq, 'redriven', null],
    ]);
    expect(report).toMatchObject({ redriven: 2, skipped: 7, duplicates: 0 });
    for (const item of report.items.filter((i) => i.status === 'skipped')) expect(item.detail).toEqual(expect.any(String));
    // Only the two real letters reached the inbox; nothing reached the events stream.
    expect(await count(names.inbox)).toBe(inboxBefore + 2);
    expect(await count(names.events)).toBe(0);
    const subjects = [];
    for (let seq = inboxBefore + 1; seq <= inboxBefore + 2; seq++) subjects.push((await nats.jsm.streams.getMessage(names.inbox, { seq })).subject);
    expect(subjects).toEqual([held.subject, real.subject]);
  });

  it('readable sources: a letter names its consumer readably (router-results); letters stored under the durable name are still listed, filtered and redriven as that consumer', async () => {
    const current = await realLetter('{"result_id":"now"}');
    const old = await realLetter('{"result_id":"before"}', 'b', RESULTS_DURABLE);
    const other = await deadLetter(nats.js, {
      prefix,
      source: DlqSources.routerStarts,
      reason: 'schema_violation',
      subject: `${prefix}.in.p.start`,
      data: encoder.encode('{}'),
      deliveries: 1,
      stream: names.inbox,
      seq: 999,
    });
    const all = await admin.list();
    expect(all.map((l) => [l.seq, l.dlqSubject, l.source, l.sourceName])).toEqual([
      [current.dlqSeq, `${prefix}.dlq.router-results`, 'router-results', 'router-results'],
      [old.dlqSeq, `${prefix}.dlq.${RESULTS_DURABLE}`, RESULTS_DURABLE, 'router-results'],
      [other.seq, `${prefix}.dlq.router-starts`, 'router-starts', 'router-starts'],
    ]);
    // --source router-results finds the letters of that consumer under either name; the durable name does too.
    expect((await admin.list({ source: 'router-results' })).map((l) => l.seq)).toEqual([current.dlqSeq, old.dlqSeq]);
    expect((await admin.list({ source: RESULTS_DURABLE })).map((l) => l.seq)).toEqual([current.dlqSeq, old.dlqSeq]);
    const report = await admin.redrive({ source: 'router-results' });
    expect(byStatus(report.items)).toEqual([
      [current.dlqSeq, 'redriven', null],
      [old.dlqSeq, 'redriven', null],
    ]);
  });

  it('a real letter is redriven once, with the headers the inbox stored; the next redrive skips it as already redriven', async () => {
    const real = await realLetter('{"result_id":"r-1"}');
    const dry = await admin.redrive({}, { dryRun: true });
    expect(dry.items).toEqual([expect.objectContaining({ seq: real.dlqSeq, status: 'planned', original: 'matched' })]);
    expect(await count(names.inbox)).toBe(1);

    const first = await admin.redrive();
    expect(first.items).toEqual([expect.objectContaining({ seq: real.dlqSeq, status: 'redriven', original: 'matched', targetSeq: 2 })]);
    const copy = await nats.jsm.streams.getMessage(names.inbox, { seq: 2 });
    expect([copy.subject, decoder.decode(copy.data)]).toEqual([real.subject, '{"result_id":"r-1"}']);
    expect(copy.header.get('X-Trace')).toBe('trace-1');
    expect(copy.header.get('Baton-Original-Msg-Id')).toBe('orig-{"result_id":"r-1"}');
    expect(copy.header.get('Baton-Redriven-From')).toBe(`${names.dlq}:${real.dlqSeq}`);

    const second = await admin.redrive();
    expect(byStatus(second.items)).toEqual([[real.dlqSeq, 'skipped', 'already_redriven']]);
    expect(await count(names.inbox)).toBe(2);
    expect((await admin.list()).map((l) => [l.seq, l.redriven])).toEqual([[real.dlqSeq, true]]);
    // The marker is on the admin-only subject and names the letter's sequence and digest.
    const marker = await nats.jsm.streams.getMessage(names.dlq, { last_by_subj: redriveMarkerSubject(prefix) });
    const letter = (await admin.show(real.dlqSeq))!;
    expect(JSON.parse(decoder.decode(marker.data))).toMatchObject({ dlq_seq: real.dlqSeq, letter_digest: letter.digest, target_seq: 2 });
  });

  it('a redrive`s copy refused again and redriven again keeps the id the message was first published under (Baton-Original-Msg-Id), naming the letter it came from last', async () => {
    const real = await realLetter('{"result_id":"r-again"}');
    const first = await admin.redrive();
    const copySeq = first.items.find((i) => i.seq === real.dlqSeq)?.targetSeq;
    expect(copySeq).toBeDefined();
    const copy = await nats.jsm.streams.getMessage(names.inbox, { seq: copySeq! });
    // Its consumer refuses the copy too (the cause is not fixed): a new letter, with the headers the inbox stored.
    const stored: Record<string, string[]> = {};
    for (const key of copy.header.keys()) stored[key] = copy.header.values(key);
    const again = await deadLetter(nats.js, {
      prefix,
      source: RESULTS_SOURCE,
      reason: 'max_deliveries',
      subject: copy.subject,
      headers: stored,
      data: copy.data,
      deliveries: 1,
      stream: names.inbox,
      seq: copySeq!,
    });
    const second = await admin.redrive();
    const twice = second.items.find((i) => i.seq === again.seq);
    expect(twice).toMatchObject({ status: 'redriven' });
    const copyOfCopy = await nats.jsm.streams.getMessage(names.inbox, { seq: twice!.targetSeq! });
    expect(copy.header.get('Nats-Msg-Id')).toBe(`redrive:${names.dlq}:${real.dlqSeq}`);
    expect(copyOfCopy.header.get('Baton-Original-Msg-Id')).toBe('orig-{"result_id":"r-again"}');
    expect(copyOfCopy.header.get('Baton-Redriven-From')).toBe(`${names.dlq}:${again.seq}`);
  });

  it('a message refused for the id it took (msg_id_mismatch: another project`s id) is never redriven: the redrive`s own id would let it past that check', async () => {
    const squatter = await realLetter('{"result_id":"r-9"}', 'a', RESULTS_SOURCE, 'result:other:wr-1/r-9', 'msg_id_mismatch');
    const fine = await realLetter('{"result_id":"r-10"}');
    const report = await admin.redrive();
    expect(byStatus(report.items)).toEqual([
      [squatter.dlqSeq, 'skipped', 'msg_id_mismatch'],
      [fine.dlqSeq, 'redriven', null],
    ]);
    expect(report.items[0]!.detail).toContain("names project 'other'");
    expect(await count(names.inbox)).toBe(3);
  });

  it('a redrive id another publisher took first (an agent on its own subject) does not make the letter look redriven: it is republished under another id', async () => {
    const real = await realLetter('{"result_id":"r-squat"}');
    // An agent publishes first, on its own subject, under the id the redrive of this letter uses.
    const squat = await nats.js.publish(`${prefix}.in.p.result.mallory`, encoder.encode('{}'), { msgID: redriveMsgId(names.dlq, real.dlqSeq) });
    const redriven = await admin.redrive();
    expect(redriven.items).toEqual([expect.objectContaining({ seq: real.dlqSeq, status: 'redriven' })]);
    const target = redriven.items[0]!.targetSeq!;
    expect(target).toBeGreaterThan(squat.seq);
    const copy = await nats.jsm.streams.getMessage(names.inbox, { seq: target });
    expect([copy.subject, decoder.decode(copy.data)]).toEqual([real.subject, '{"result_id":"r-squat"}']);
  });

  it('fake markers do not hide a real letter: an old-style marker, a forged marker on a letter subject, a marker with the wrong digest', async () => {
    const real = await realLetter('{"result_id":"r-2"}');
    const legacy = natsHeaders();
    legacy.set('Baton-Dlq-Redriven-Seq', String(real.dlqSeq));
    await nats.js.publish(`${prefix}.dlq.redriven`, new Uint8Array(0), { headers: legacy });
    await nats.js.publish(`${prefix}.dlq.router`, new Uint8Array(0), { headers: legacy });
    const wrong = {
      dlq_stream: names.dlq,
      dlq_seq: real.dlqSeq,
      letter_digest: letterDigest('x', {}, new Uint8Array(0)),
      target_subject: real.subject,
      target_seq: 1,
      at: new Date().toISOString(),
    };
    await nats.js.publish(redriveMarkerSubject(prefix), encoder.encode(JSON.stringify(wrong)));

    const listed = await admin.list();
    expect(listed.find((l) => l.seq === real.dlqSeq)?.redriven).toBe(false);
    const report = await admin.redrive();
    expect(report.items.find((i) => i.seq === real.dlqSeq)).toMatchObject({ status: 'redriven' });
    expect((await admin.list()).find((l) => l.seq === real.dlqSeq)?.redriven).toBe(true);
  });

  it('an original that aged out is skipped unless the caller allows it, then redriven unverified', async () => {
    const real = await realLetter('{"result_id":"r-3"}');
    await nats.jsm.streams.deleteMessage(names.inbox, real.inboxSeq);
    const report = await admin.redrive();
    expect(byStatus(report.items)).toEqual([[real.dlqSeq, 'skipped', 'original_gone']]);
    const allowed = await admin.redrive({}, { allowMissingOriginal: true });
    expect(allowed.items).toEqual([expect.objectContaining({ seq: real.dlqSeq, status: 'redriven', original: 'gone' })]);
    const copy = await nats.jsm.streams.getMessage(names.inbox, { last_by_subj: real.subject });
    expect(decoder.decode(copy.data)).toBe('{"result_id":"r-3"}');
    expect(copy.header.get('X-Trace')).toBe('trace-1');
  });

  it('a message dead-lettered twice is stored once: same stream and sequence, or the same core request', async () => {
    const input = {
      prefix,
      source: RESULTS_SOURCE,
      reason: 'poison',
      subject: `${prefix}.in.p.result.a`,
      data: encoder.encode('x'),
      deliveries: 1,
      stream: names.inbox,
      seq: 7,
    };
    const first = await deadLetter(nats.js, input);
    const again = await deadLetter(nats.js, { ...input, deliveries: 5, reason: 'max_deliveries' });
    expect([first.duplicate, again.duplicate, again.seq]).toEqual([false, true, first.seq]);

    const request = {
      prefix,
      source: 'ledger',
      reason: 'invalid',
      subject: `${prefix}.cmd.ledger.p.claim`,
      data: encoder.encode('{"a":1}'),
      deliveries: 1,
      seq: 0,
    };
    const r1 = await deadLetter(nats.js, { ...request, stream: 'core-one' });
    const r2 = await deadLetter(nats.js, { ...request, stream: 'core-two' });
    const r3 = await deadLetter(nats.js, { ...request, stream: 'core' });
    const other = await deadLetter(nats.js, { ...request, stream: 'core', data: encoder.encode('{"a":2}') });
    expect([r1.duplicate, r2.duplicate, r3.duplicate, other.duplicate]).toEqual([false, true, true, false]);
    expect(await count(names.dlq)).toBe(3);
    const stored = await nats.jsm.streams.getMessage(names.dlq, { seq: r1.seq });
    expect(stored.header.get(DlqHeader.stream)).toBe('core');
  });

  it('list filters by the project of the original subject and by the run or handoff its body names, composed with --source and --reason', async () => {
    const a1 = await realLetter('{"result_id":"r-a1","workflow_run_id":"wr-a","handoff_id":"ho-a"}', 'a', RESULTS_SOURCE, 'm-a1', 'not_found', 'alpha');
    const a2 = await realLetter('{"result_id":"r-a2","workflow_run_id":"wr-b"}', 'a', RESULTS_SOURCE, 'm-a2', 'schema_violation', 'alpha');
    const b1 = await realLetter('{"result_id":"r-b1","workflow_run_id":"wr-a"}', 'a', RESULTS_SOURCE, 'm-b1', 'not_found', 'beta');
    // Not JSON: found by its project, never by a run.
    const broken = await realLetter('{"workflow_run_id":"wr-a", ', 'a', RESULTS_SOURCE, 'm-broken', 'malformed_json', 'alpha');
    // A mesh start names its mesh run: --run finds it too.
    const mesh = await deadLetter(nats.js, {
      prefix,
      source: DlqSources.routerMeshStarts,
      reason: 'unknown_mesh',
      subject: `${prefix}.in.alpha.mesh_start`,
      data: encoder.encode('{"mesh_run_id":"mr-1","mesh":"triage"}'),
      deliveries: 1,
      stream: names.inbox,
      seq: 999,
    });
    // A stored event a reactor gave up on: its aggregate names the handoff, its payload the run.
    const event = await deadLetter(nats.js, {
      prefix,
      source: DlqSources.routerHandoffDeadlines,
      reason: 'max_deliveries',
      subject: `${prefix}.ev.alpha.handoff.ho-a`,
      data: encoder.encode('{"id":"e1","type":"handoff.created","aggregate":{"kind":"handoff","id":"ho-a"},"payload":{"workflow_run_id":"wr-a"}}'),
      deliveries: 5,
      stream: names.events,
      seq: 1,
    });
    const seqs = async (filter: Parameters<DlqAdmin['list']>[0]) => (await admin.list(filter)).map((l) => l.seq);
    expect(await seqs({ project: 'alpha' })).toEqual([a1.dlqSeq, a2.dlqSeq, broken.dlqSeq, mesh.seq, event.seq]);
    expect(await seqs({ project: 'beta' })).toEqual([b1.dlqSeq]);
    expect(await seqs({ project: 'gamma' })).toEqual([]);
    expect(await seqs({ run: 'wr-a' })).toEqual([a1.dlqSeq, b1.dlqSeq, event.seq]);
    expect(await seqs({ run: 'mr-1' })).toEqual([mesh.seq]);
    expect(await seqs({ handoff: 'ho-a' })).toEqual([a1.dlqSeq, event.seq]);
    expect(await seqs({ project: 'alpha', run: 'wr-a' })).toEqual([a1.dlqSeq, event.seq]);
    expect(await seqs({ project: 'alpha', run: 'wr-a', source: 'router-results' })).toEqual([a1.dlqSeq]);
    expect(await seqs({ project: 'alpha', reason: 'not_found' })).toEqual([a1.dlqSeq]);
    expect(await seqs({ project: 'alpha', untilSeq: a2.dlqSeq })).toEqual([a1.dlqSeq, a2.dlqSeq]);
  });

  it('a letter whose message itself was refused (schema_violation, malformed_json…) is skipped message_refused, unless includeRefused; it is then redriven once', async () => {
    const refused = await realLetter('{"result_id":"r-bad"}', 'a', RESULTS_SOURCE, 'm-bad', 'schema_violation');
    const malformed = await realLetter('{"result_id": ', 'a', RESULTS_SOURCE, 'm-malformed', 'malformed_json');
    const fine = await realLetter('{"result_id":"r-ok"}', 'a', RESULTS_SOURCE, 'm-ok', 'not_found');
    const inboxBefore = await count(names.inbox);

    const dry = await admin.redrive({}, { dryRun: true });
    expect(byStatus(dry.items)).toEqual([
      [refused.dlqSeq, 'skipped', 'message_refused'],
      [malformed.dlqSeq, 'skipped', 'message_refused'],
      [fine.dlqSeq, 'planned', null],
    ]);
    expect(dry.items[0]!.detail).toContain('fix the sender and publish a corrected message');
    const first = await admin.redrive();
    expect(byStatus(first.items)).toEqual([
      [refused.dlqSeq, 'skipped', 'message_refused'],
      [malformed.dlqSeq, 'skipped', 'message_refused'],
      [fine.dlqSeq, 'redriven', null],
    ]);
    expect(await count(names.inbox)).toBe(inboxBefore + 1);

    const forced = await admin.redrive({ reason: 'schema_violation' }, { includeRefused: true });
    expect(byStatus(forced.items)).toEqual([[refused.dlqSeq, 'redriven', null]]);
    expect(await count(names.inbox)).toBe(inboxBefore + 2);
    const copy = await nats.jsm.streams.getMessage(names.inbox, { seq: forced.items[0]!.targetSeq! });
    expect(decoder.decode(copy.data)).toBe('{"result_id":"r-bad"}');
    // Once redriven it is marked: forcing again republishes nothing.
    const again = await admin.redrive({ reason: 'schema_violation' }, { includeRefused: true });
    expect(byStatus(again.items)).toEqual([[refused.dlqSeq, 'skipped', 'already_redriven']]);
  });

  it('redrive of one project leaves the letters of the other projects alone', async () => {
    const mine = await realLetter('{"result_id":"r-mine"}', 'a', RESULTS_SOURCE, 'm-mine', 'max_deliveries', 'mine');
    const theirs = await realLetter('{"result_id":"r-theirs"}', 'a', RESULTS_SOURCE, 'm-theirs', 'max_deliveries', 'theirs');
    const inboxBefore = await count(names.inbox);
    const dry = await admin.redrive({ project: 'mine' }, { dryRun: true });
    expect(byStatus(dry.items)).toEqual([[mine.dlqSeq, 'planned', null]]);
    const report = await admin.redrive({ project: 'mine' });
    expect(byStatus(report.items)).toEqual([[mine.dlqSeq, 'redriven', null]]);
    expect(await count(names.inbox)).toBe(inboxBefore + 1);
    expect((await admin.list()).map((l) => [l.seq, l.redriven])).toEqual([
      [mine.dlqSeq, true],
      [theirs.dlqSeq, false],
    ]);
  });

  it('the dead-letter stream is bounded: 30 days, 1 GiB, oldest dropped first, duplicates recognised for an hour', async () => {
    const info = await nats.jsm.streams.info(names.dlq);
    expect(info.config).toMatchObject({ max_age: 30 * 24 * 3600 * 1e9, max_bytes: 1024 ** 3, discard: 'old', duplicate_window: 3600 * 1e9 });
  });

  /** A notice event stored in the events stream, then dead-lettered by a webhook consumer as the notifier does it (its letter holds the stored bytes). */
  async function webhookLetter(
    kind: 'run' | 'mesh',
    project: string,
    noticeId: string,
    source: string = kind === 'run' ? DlqSources.notifierWebhooks : DlqSources.notifierMeshWebhooks,
  ) {
    const subject = `${prefix}.ev.${project}.${kind}.wr-hook`;
    const event = {
      id: `ev-${noticeId}`,
      type: `${kind}.notice_emitted`,
      version: 1,
      aggregate: { kind, id: 'wr-hook' },
      project,
      occurredAt: '2025-01-01T00:00:00.000Z',
      actor: 'router',
      origin: 'engine',
      causationId: null,
      correlationId: 'wr-hook',
      payload: {
        notice: {
          notice_id: noticeId,
          project,
          workflow_run_id: 'wr-hook',
          reason: 'hold',
          recipient: { handle: 'olga', source: 'started_by' },
          headline: 'needs a person',
          step: null,
          agent: null,
          created_at: '2025-01-01T00:00:00.000Z',
        },
      },
    };
    const data = encoder.encode(JSON.stringify(event));
    const stored = await nats.js.publish(subject, data);
    const letter = await deadLetter(nats.js, {
      prefix,
      source,
      reason: 'max_deliveries',
      detail: 'TransientError: webhook delivery failed for 0123456789abcdef (connection_refused: connect ECONNREFUSED 10.0.0.7:443)',
      subject,
      data,
      deliveries: 21,
      stream: names.events,
      seq: stored.seq,
    });
    return letter.seq;
  }

  it("a webhook consumer's letter names the notice a webhook never took (project, id): list shows it, and its redrive skip gives the command that sends it again; other letters name none", async () => {
    const run = await webhookLetter('run', 'shop', 'nt-r-res-1');
    const mesh = await webhookLetter('mesh', 'outlet', 'nt-m-stop:7');
    const router = await realLetter('{"result_id":"r-1","workflow_run_id":"wr-1"}');
    // A letter of a webhook source whose bytes are not a notice event (a forged or cut-short one): no notice.
    const odd = await deadLetter(nats.js, {
      prefix,
      source: DlqSources.notifierWebhooks,
      reason: 'max_deliveries',
      subject: `${prefix}.ev.shop.run.wr-2`,
      data: encoder.encode('{"type":"run.notice_emitted","payload":{"notice":{"notice_id":"bad id!","project":"shop"}}}'),
      deliveries: 1,
      stream: names.events,
      seq: 999,
    });
    const letters = await admin.list();
    expect(letters.map((l) => [l.seq, l.notice ?? null])).toEqual([
      [run, { project: 'shop', noticeId: 'nt-r-res-1' }],
      [mesh, { project: 'outlet', noticeId: 'nt-m-stop:7' }],
      [router.dlqSeq, null],
      [odd.seq, null],
    ]);
    expect(noticeRedeliverCommand({ project: 'outlet', noticeId: 'nt-m-stop:7' })).toBe('baton notice redeliver nt-m-stop:7 --project outlet');
    const report = await admin.redrive({ source: DlqSources.notifierWebhooks }, { dryRun: true });
    expect(report.items.find((i) => i.seq === run)).toMatchObject({
      status: 'skipped',
      reason: 'event_subject',
      detail: expect.stringContaining('baton notice redeliver nt-r-res-1 --project shop'),
    });
    expect(report.items.find((i) => i.seq === run)!.detail).not.toContain('<notice_id>');
    expect(
      letterNotice(DlqSources.routerResults, encoder.encode('{"type":"run.notice_emitted","payload":{"notice":{"notice_id":"nt-1","project":"p"}}}')),
    ).toBeUndefined();
  });
});
