import { DeadLetterReason } from './dead-letter';
import { DlqSources } from './dlq-sources';
import { checkRedriveTarget, isRefusedMessageReason, redrivableLetter, REFUSED_MESSAGE_REASONS, RedriveSkip } from './redrive-rules';
import { durableNameFor } from './subject-patterns';

const prefix = 'baton';
/** A letter of the router's results consumer, on a subject it consumes, from the inbox. */
const result = (reason?: string) => ({
  source: DlqSources.routerResults,
  subject: 'baton.in.acme.result.support',
  dlqSubject: 'baton.dlq.router-results',
  originalStream: 'BATON_INBOX',
  ...(reason !== undefined ? { reason } : {}),
});

describe('the redrive rule table: reasons that say the message itself was refused', () => {
  it('lists the "fix the sender" reasons of docs/errors.md, and not those a fix elsewhere cures', () => {
    for (const reason of [
      'invalid_utf8',
      'malformed_json',
      'schema_violation',
      'payload_too_large',
      'project_mismatch',
      'identity_mismatch',
      'poison',
      'run_already_started',
      'mesh_already_started',
      'no_notice_recipient',
    ])
      expect(isRefusedMessageReason(reason)).toBe(true);
    for (const reason of [
      'max_deliveries',
      'not_found',
      'unknown_workflow',
      'unknown_agent',
      'unknown_mesh',
      'unknown_event_type',
      'unsupported_version',
      'ledger_refused',
      'no_handler',
      // Refused on the original's own headers by a rule of its own, whatever the flag.
      'msg_id_mismatch',
      // Prototype keys are no reasons.
      'constructor',
      '__proto__',
      'toString',
    ])
      expect(isRefusedMessageReason(reason)).toBe(false);
    for (const explanation of Object.values(REFUSED_MESSAGE_REASONS)) expect(explanation).toEqual(expect.any(String));
  });

  it('a letter of such a reason is skipped message_refused, with a detail saying why and what to do', () => {
    const verdict = checkRedriveTarget(prefix, result(DeadLetterReason.schemaViolation));
    expect(verdict).toEqual({ ok: false, reason: RedriveSkip.messageRefused, detail: expect.any(String) });
    const detail = (verdict as { detail: string }).detail;
    expect(detail).toContain('schema_violation: the message itself is refused (its body does not match its schema)');
    expect(detail).toContain('fix the sender and publish a corrected message');
    expect(detail).toContain('--include-refused');
    expect(RedriveSkip.messageRefused).toBe('message_refused');
  });

  it('includeRefused lets it through; other reasons, and a letter without one, pass as before', () => {
    expect(checkRedriveTarget(prefix, result('malformed_json'), { includeRefused: true })).toEqual({ ok: true });
    expect(checkRedriveTarget(prefix, result('max_deliveries'))).toEqual({ ok: true });
    expect(checkRedriveTarget(prefix, result('not_found'))).toEqual({ ok: true });
    expect(checkRedriveTarget(prefix, result())).toEqual({ ok: true });
    // The letters an older router wrote under its durable name follow the same rule.
    const legacy = { ...result('invalid_utf8'), source: durableNameFor('router', '{prefix}.in.*.result.*') };
    legacy.dlqSubject = `baton.dlq.${legacy.source}`;
    expect(checkRedriveTarget(prefix, legacy)).toMatchObject({ ok: false, reason: 'message_refused' });
    expect(checkRedriveTarget(prefix, legacy, { includeRefused: true })).toEqual({ ok: true });
  });

  it('the subject and source rules come first: an event, an answer, a core request or a forged source keeps its own reason, flag or not', () => {
    const cases: Array<[Parameters<typeof checkRedriveTarget>[1], RedriveSkip]> = [
      [{ ...result('schema_violation'), subject: 'baton.ev.acme.run.wr-1' }, RedriveSkip.eventSubject],
      [{ ...result('schema_violation'), subject: 'baton.in.acme.answer' }, RedriveSkip.operatorAnswer],
      [{ ...result('schema_violation'), originalStream: 'core' }, RedriveSkip.coreRequest],
      [{ ...result('schema_violation'), dlqSubject: 'baton.dlq.router-starts' }, RedriveSkip.sourceMismatch],
      [{ ...result('schema_violation'), subject: 'baton.in.acme.stop' }, RedriveSkip.subjectNotConsumed],
      [{ ...result('schema_violation'), subject: '' }, RedriveSkip.noSubject],
    ];
    for (const [letter, reason] of cases) {
      expect(checkRedriveTarget(prefix, letter)).toMatchObject({ ok: false, reason });
      expect(checkRedriveTarget(prefix, letter, { includeRefused: true })).toMatchObject({ ok: false, reason });
    }
  });

  it('a webhook letter keeps pointing at baton notice redeliver, whatever its reason', () => {
    const webhook = {
      source: DlqSources.notifierWebhooks,
      subject: 'baton.ev.acme.run.wr-1',
      dlqSubject: 'baton.dlq.notifier-webhooks',
      originalStream: 'BATON_EVENTS',
      reason: 'malformed_json',
    };
    expect(checkRedriveTarget(prefix, webhook)).toMatchObject({
      ok: false,
      reason: RedriveSkip.eventSubject,
      detail: expect.stringContaining('baton notice redeliver'),
    });
  });
});

describe('redrivableLetter: the letters a redrive would republish, read from the same rules', () => {
  /** The letter of a stored message, as a consumer of the inbox writes it. */
  const stored = (over: Partial<Parameters<typeof redrivableLetter>[1]> = {}) => ({
    source: DlqSources.routerStarts,
    subject: 'baton.in.acme.start',
    stream: 'BATON_INBOX',
    reason: 'unknown_workflow',
    headers: {},
    ...over,
  });

  it('a stored message refused for a reason a fix elsewhere cures is redrivable, on every inbox consumer the table names', () => {
    for (const reason of ['unknown_workflow', 'unknown_agent', 'unknown_mesh', 'not_found', 'unsupported_version', 'unknown_event_type', 'max_deliveries'])
      expect(redrivableLetter(prefix, stored({ reason }))).toBe(true);
    expect(redrivableLetter(prefix, stored({ source: DlqSources.routerResults, subject: 'baton.in.acme.result.bob', reason: 'not_found' }))).toBe(true);
    expect(redrivableLetter(prefix, stored({ source: DlqSources.routerMeshTurns, subject: 'baton.in.acme.mesh_result.bob', reason: 'unknown_mesh' }))).toBe(
      true,
    );
    // Its own id, in Baton's form, is no obstacle.
    expect(redrivableLetter(prefix, stored({ headers: { 'Nats-Msg-Id': ['start:acme:wr-1'] } }))).toBe(true);
  });

  it('not when redrive would refuse it: refused for itself, a foreign id, no inbox consumer, another stream, or a core message', () => {
    for (const reason of Object.keys(REFUSED_MESSAGE_REASONS)) expect(redrivableLetter(prefix, stored({ reason }))).toBe(false);
    expect(redrivableLetter(prefix, stored({ headers: { 'nats-msg-id': ['start:other:wr-1'] } }))).toBe(false);
    expect(redrivableLetter(prefix, stored({ reason: DeadLetterReason.refusalsSuppressed }))).toBe(false);
    expect(redrivableLetter(prefix, stored({ source: DlqSources.routerAnswers, subject: 'baton.in.acme.answer' }))).toBe(false);
    expect(redrivableLetter(prefix, stored({ source: DlqSources.routerResults }))).toBe(false);
    expect(redrivableLetter(prefix, stored({ stream: 'BATON_EVENTS' }))).toBe(false);
    expect(redrivableLetter(prefix, stored({ stream: 'core' }))).toBe(false);
    expect(redrivableLetter(prefix, stored({ stream: 'core-abc', source: DlqSources.ledger, subject: 'baton.cmd.ledger.acme.claim' }))).toBe(false);
  });
});

describe('a refusals_suppressed letter is never redriven, and its skip says truthfully what it stands for', () => {
  const summary = (over: Partial<Parameters<typeof checkRedriveTarget>[1]>) => ({ ...result(DeadLetterReason.refusalsSuppressed), ...over });

  it('of stored messages: the stream that holds them, not a core request', () => {
    const verdict = checkRedriveTarget(prefix, summary({}), { includeRefused: true });
    expect(verdict).toMatchObject({ ok: false, reason: RedriveSkip.summaryLetter });
    const detail = (verdict as { detail: string }).detail;
    expect(detail).toContain('BATON_INBOX stored them');
    expect(detail).toContain('stored[].sequences');
    expect(detail).not.toMatch(/core|sends it again/);
    expect(RedriveSkip.summaryLetter).toBe('summary_letter');
  });

  it('written by an earlier version (stream core) for an inbox consumer: still stored messages, found by subject and time', () => {
    const verdict = checkRedriveTarget(prefix, summary({ originalStream: 'core' }));
    expect(verdict).toMatchObject({ ok: false, reason: RedriveSkip.summaryLetter });
    expect((verdict as { detail: string }).detail).toContain('stands for messages BATON_INBOX stored and acknowledged');
  });

  it('of core messages (the ledger, its edge): no stream stores them, their senders send again', () => {
    const edge = checkRedriveTarget(prefix, {
      source: DlqSources.ledgerEdge,
      subject: 'baton.edge.acme.result.bob',
      dlqSubject: 'baton.dlq.ledger-edge',
      originalStream: 'core',
      reason: DeadLetterReason.refusalsSuppressed,
    });
    expect(edge).toMatchObject({ ok: false, reason: RedriveSkip.summaryLetter, detail: expect.stringContaining('core NATS messages no stream stores') });
  });
});
