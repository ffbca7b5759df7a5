import { projectOfSubject } from '@baton/contracts';
import { DEAD_LETTER_LOG_DETAIL_CHARS, DEAD_LETTER_REFS_MAX_BYTES, deadLetterLogFields, deadLetterRefs, letterLogFields } from './dead-letter';
import { PoisonError } from './errors';

const encoder = new TextEncoder();
const bytes = (text: string) => encoder.encode(text);
const json = (value: unknown) => bytes(JSON.stringify(value));
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

describe('projectOfSubject: the project a dead letter’s original subject names', () => {
  it.each([
    ['baton.in.acme.start', 'acme'],
    ['baton.in.acme.result.support', 'acme'],
    ['baton.in.acme.offer.support', 'acme'],
    ['baton.ev.acme.run.wr-1', 'acme'],
    ['baton.cmd.ledger.acme.agent.support.claim', 'acme'],
    ['baton.cmd.router.acme.publish_definition', 'acme'],
    // Subjects the table does not describe, by position: an agent edge subject, a malformed ledger command, an inbox kind nobody reads.
    ['baton.edge.acme.result.support', 'acme'],
    ['baton.cmd.ledger.acme.claim', 'acme'],
    ['baton.in.acme.bogus', 'acme'],
  ])('%s → %s', (subject, project) => {
    expect(projectOfSubject('baton', subject)).toBe(project);
  });

  it.each([
    ['another prefix', 'other.in.acme.start'],
    ['a dead letter subject (no project)', 'baton.dlq.router-results'],
    ['a project key that is not one', 'baton.in.ACME!.start'],
    ['a wildcard', 'baton.in.*.start'],
    ['an empty subject', ''],
  ])('%s: none', (_what, subject) => {
    expect(projectOfSubject('baton', subject)).toBeUndefined();
  });
});

describe('deadLetterRefs: the project and the ids a dead letter’s original names', () => {
  const start = 'baton.in.acme.start';

  it('reads the top-level ids of a JSON object body, and the project of its subject', () => {
    const body = json({ workflow_run_id: 'wr-1', handoff_id: 'ho-1', mesh_run_id: 'mr-1', result_id: 'res-1', other: 'x' });
    expect(deadLetterRefs('baton', 'baton.in.acme.result.support', body)).toEqual({
      project: 'acme',
      workflow_run_id: 'wr-1',
      handoff_id: 'ho-1',
      mesh_run_id: 'mr-1',
      result_id: 'res-1',
    });
  });

  it('a stored event names its aggregate’s id by kind, and its payload’s ids', () => {
    const handoffEvent = json({ id: 'ev-1', type: 'handoff.created', aggregate: { kind: 'handoff', id: 'ho-7' }, payload: { workflow_run_id: 'wr-7' } });
    expect(deadLetterRefs('baton', 'baton.ev.acme.handoff.ho-7', handoffEvent)).toEqual({ project: 'acme', handoff_id: 'ho-7', workflow_run_id: 'wr-7' });
    const runEvent = json({ aggregate: { kind: 'run', id: 'wr-8' }, payload: {} });
    expect(deadLetterRefs('baton', 'baton.ev.acme.run.wr-8', runEvent)).toEqual({ project: 'acme', workflow_run_id: 'wr-8' });
    const meshEvent = json({ aggregate: { kind: 'mesh', id: 'mr-9' } });
    expect(deadLetterRefs('baton', 'baton.ev.acme.mesh.mr-9', meshEvent)).toEqual({ project: 'acme', mesh_run_id: 'mr-9' });
    // A project event's aggregate is no id a letter is found by; the body's own field wins over the payload's.
    expect(deadLetterRefs('baton', 'baton.ev.acme.project.acme', json({ aggregate: { kind: 'project', id: 'acme' } }))).toEqual({ project: 'acme' });
    expect(deadLetterRefs('baton', start, json({ workflow_run_id: 'top', payload: { workflow_run_id: 'inner' } }))).toMatchObject({ workflow_run_id: 'top' });
  });

  it('a handoff offered to an agent names the handoff by its record’s id (on an offer subject only)', () => {
    const record = json({ id: 'ho-3', workflow_run_id: 'wr-3' });
    expect(deadLetterRefs('baton', 'baton.in.acme.offer.support', record)).toEqual({ project: 'acme', handoff_id: 'ho-3', workflow_run_id: 'wr-3' });
    expect(deadLetterRefs('baton', start, record)).toEqual({ project: 'acme', workflow_run_id: 'wr-3' });
  });

  it.each([
    ['malformed JSON', bytes('{"workflow_run_id": "wr-1", ')],
    ['bytes that are not UTF-8', new Uint8Array([0x7b, 0xff, 0xfe, 0x7d])],
    ['an empty body', new Uint8Array(0)],
    ['a JSON array', json([{ workflow_run_id: 'wr-1' }])],
    ['a JSON string', json('wr-1')],
    ['null', bytes('null')],
    ['ids nested deeper than the body, its aggregate and its payload', json({ context: { workflow_run_id: 'wr-1' }, payload: { data: { handoff_id: 'h' } } })],
  ])('%s: no ids, only the project, and no throw', (_what, data) => {
    expect(deadLetterRefs('baton', start, data)).toEqual({ project: 'acme' });
  });

  it('values that are not valid ids are left out, the valid ones kept', () => {
    const body = json({
      workflow_run_id: 'has space',
      handoff_id: 7,
      mesh_run_id: 'x'.repeat(129),
      result_id: 'res:1@a_b-c',
      aggregate: { kind: 'run', id: ['wr'] },
      payload: { handoff_id: { id: 'h' } },
    });
    expect(deadLetterRefs('baton', start, body)).toEqual({ project: 'acme', result_id: 'res:1@a_b-c' });
    expect(deadLetterRefs('baton', start, json({ workflow_run_id: 'wr.1' }))).toEqual({ project: 'acme' });
    expect(deadLetterRefs('baton', start, json({ workflow_run_id: '' }))).toEqual({ project: 'acme' });
  });

  it('hostile keys are read as own fields only: __proto__, constructor and prototype name nothing', () => {
    const body = bytes('{"__proto__": {"workflow_run_id": "wr-evil"}, "constructor": {"prototype": {"handoff_id": "h"}}}');
    expect(deadLetterRefs('baton', start, body)).toEqual({ project: 'acme' });
    expect(({} as Record<string, unknown>)['workflow_run_id']).toBeUndefined();
  });

  it('a body over the bound is not parsed (bounded work): it names no ids; deep nesting never throws', () => {
    const padding = 'x'.repeat(DEAD_LETTER_REFS_MAX_BYTES);
    expect(deadLetterRefs('baton', start, json({ workflow_run_id: 'wr-1', padding }))).toEqual({ project: 'acme' });
    // Within the bound and parsed: nesting as deep as the bytes allow.
    const deep = bytes(`${'['.repeat(120_000)}${']'.repeat(120_000)}`);
    expect(deep.length).toBeLessThanOrEqual(DEAD_LETTER_REFS_MAX_BYTES);
    expect(deadLetterRefs('baton', start, deep)).toEqual({ project: 'acme' });
    const deepObject = bytes(`{"workflow_run_id":"wr-1","a":${'{"a":'.repeat(40_000)}1${'}'.repeat(40_000)}}`);
    expect(deepObject.length).toBeLessThanOrEqual(DEAD_LETTER_REFS_MAX_BYTES);
    expect(deadLetterRefs('baton', start, deepObject)).toEqual({ project: 'acme', workflow_run_id: 'wr-1' });
  });
});

describe('deadLetterLogFields: the structured log line of a dead-lettering', () => {
  const base = {
    prefix: 'baton',
    source: 'router-starts',
    durable: 'router__prefix__in_any_start_c19d2d2c',
    reason: 'unknown_workflow',
    error: new PoisonError('unknown_workflow: the project has not published workflow "x"', 'unknown_workflow'),
    subject: 'baton.in.bb-diag-1.start',
    seq: 2007,
    headers: { traceparent: [TRACEPARENT], 'Nats-Msg-Id': ['start:bb-diag-1:wr-1'] },
    data: json({ workflow_run_id: 'wr-1', workflow: 'x' }),
  };

  it('carries source, durable, reason, detail, subject, stream_seq, project, trace_id and the ids, in that order', () => {
    const fields = deadLetterLogFields(base);
    expect(fields).toEqual({
      source: 'router-starts',
      durable: 'router__prefix__in_any_start_c19d2d2c',
      reason: 'unknown_workflow',
      detail: 'PoisonError: unknown_workflow: the project has not published workflow "x"',
      subject: 'baton.in.bb-diag-1.start',
      stream_seq: 2007,
      project: 'bb-diag-1',
      trace_id: TRACE_ID,
      workflow_run_id: 'wr-1',
    });
    expect(Object.keys(fields)).toEqual(['source', 'durable', 'reason', 'detail', 'subject', 'stream_seq', 'project', 'trace_id', 'workflow_run_id']);
  });

  it('a source recorded under a durable name is logged by its readable name', () => {
    expect(deadLetterLogFields({ ...base, source: 'router__prefix__in_any_start_c19d2d2c' }).source).toBe('router-starts');
    expect(deadLetterLogFields({ ...base, source: 'notifier_webhooks' }).source).toBe('notifier-webhooks');
  });

  it('a traceparent that is not valid (or none, or another header’s case) gives no trace_id, or the right one', () => {
    expect(deadLetterLogFields({ ...base, headers: { traceparent: ['00-not-a-trace-01'] } })).not.toHaveProperty('trace_id');
    expect(deadLetterLogFields({ ...base, headers: { traceparent: [`00-${'0'.repeat(32)}-00f067aa0ba902b7-01`] } })).not.toHaveProperty('trace_id');
    expect(deadLetterLogFields({ ...base, headers: {} })).not.toHaveProperty('trace_id');
    const { headers: _none, ...withoutHeaders } = base;
    expect(deadLetterLogFields(withoutHeaders)).not.toHaveProperty('trace_id');
    expect(deadLetterLogFields({ ...base, headers: { Traceparent: [TRACEPARENT] } }).trace_id).toBe(TRACE_ID);
  });

  it('a malformed, binary or huge body, and a huge multi-line error, still give one bounded line and never throw', () => {
    for (const data of [
      bytes('{"workflow_run_id": '),
      new Uint8Array([0xc3, 0x28]),
      json({ workflow_run_id: 'wr-1', pad: 'x'.repeat(DEAD_LETTER_REFS_MAX_BYTES) }),
    ]) {
      const fields = deadLetterLogFields({ ...base, data });
      expect(fields).toMatchObject({ project: 'bb-diag-1', trace_id: TRACE_ID });
      expect(fields).not.toHaveProperty('workflow_run_id');
    }
    const fields = deadLetterLogFields({ ...base, error: new Error(`line one\nline two ${'y'.repeat(1_000_000)}`) });
    const detail = String(fields['detail']);
    expect(detail.startsWith('Error: line one line two y')).toBe(true);
    expect([...detail].length).toBe(DEAD_LETTER_LOG_DETAIL_CHARS);
    expect(detail).not.toMatch(/[\r\n]/);
    // An error that is not an Error, one that does not serialise, and no reason (a letter that was not written).
    expect(deadLetterLogFields({ ...base, error: { code: 'x' } }).detail).toBe('{"code":"x"}');
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(deadLetterLogFields({ ...base, error: cyclic }).detail).toBe('[object Object]');
    const { reason: _reason, ...unwritten } = base;
    expect(deadLetterLogFields(unwritten)).not.toHaveProperty('reason');
  });

  it('a subject outside the prefix has no project; the fields are still written', () => {
    expect(deadLetterLogFields({ ...base, subject: 'elsewhere.start' })).not.toHaveProperty('project');
  });
});

describe('letterLogFields: the line of a letter a service writes itself (a refused core request or edge message)', () => {
  it('names the source, reason, refusal, project, trace and the ids the body names; a core message has no stream sequence', () => {
    const fields = letterLogFields({
      prefix: 'baton',
      source: 'ledger',
      reason: 'schema_violation',
      detail: 'project: Invalid input',
      subject: 'baton.cmd.ledger.bb-diag2-1.agent.good.create',
      headers: { traceparent: [TRACEPARENT] },
      data: json({ handoff_id: 'h-bad', workflow_run_id: 'wr-1' }),
      deliveries: 1,
      stream: 'core-abc',
      seq: 0,
    });
    expect(fields).toEqual({
      source: 'ledger',
      reason: 'schema_violation',
      detail: 'project: Invalid input',
      subject: 'baton.cmd.ledger.bb-diag2-1.agent.good.create',
      project: 'bb-diag2-1',
      trace_id: TRACE_ID,
      workflow_run_id: 'wr-1',
      handoff_id: 'h-bad',
    });
  });

  it('a letter of a stream message keeps its stream sequence', () => {
    const fields = letterLogFields({
      prefix: 'baton',
      source: 'ledger-edge',
      reason: 'reply_not_allowed',
      subject: 'baton.edge.p.result.good',
      data: json({}),
      deliveries: 1,
      stream: 'BATON_INBOX',
      seq: 42,
    });
    expect(fields).toMatchObject({ source: 'ledger-edge', reason: 'reply_not_allowed', detail: 'reply_not_allowed', stream_seq: 42, project: 'p' });
  });
});
