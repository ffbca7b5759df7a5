import { streamConfig } from './provision';
import { batonStreamNames, batonTopology, streamStem } from './topology';

describe('topology', () => {
  it('stream names derive from the prefix: uppercase, subject separators made safe', () => {
    expect(batonStreamNames('baton')).toEqual({ events: 'BATON_EVENTS', inbox: 'BATON_INBOX', dlq: 'BATON_DLQ' });
    expect(streamStem('acme.prod-1')).toBe('ACME_PROD-1');
  });

  it('the event stream binds <prefix>.ev.>, keeps everything, denies delete and purge, dedupes for 2 minutes', () => {
    const [events, inbox, dlq] = batonTopology('baton', { replicas: 3 }).streams;
    expect(streamConfig(events!)).toMatchObject({
      name: 'BATON_EVENTS',
      subjects: ['baton.ev.>'],
      retention: 'limits',
      storage: 'file',
      num_replicas: 3,
      duplicate_window: 120_000_000_000,
      max_age: 0,
      deny_delete: true,
      deny_purge: true,
    });
    // Only inputs some consumer reads; `baton.in.<p>.bogus` has no stream.
    expect(inbox!.subjects).toEqual([
      'baton.in.*.start',
      'baton.in.*.start.*',
      'baton.in.*.result.*',
      'baton.in.*.message',
      'baton.in.*.message.*',
      'baton.in.*.answer',
      'baton.in.*.stop',
      'baton.in.*.offer.*',
      'baton.in.*.mesh_start',
      'baton.in.*.mesh_start.*',
      'baton.in.*.mesh_result.*',
      'baton.in.*.mesh_answer',
    ]);
    expect(dlq!.subjects).toEqual(['baton.dlq.>']);
  });

  it('the dead-letter stream keeps 30 days and 1 GiB by default, discarding the oldest, and dedupes for an hour; the limits are options', () => {
    const dlq = batonTopology('baton').streams[2]!;
    expect(streamConfig(dlq)).toMatchObject({
      name: 'BATON_DLQ',
      max_age: 30 * 24 * 3600 * 1e9,
      max_bytes: 1024 ** 3,
      discard: 'old',
      duplicate_window: 3600 * 1e9,
    });
    const small = batonTopology('baton', { dlqMaxAgeMs: 60_000, dlqMaxBytes: 0 }).streams[2]!;
    // No byte limit (0), and a duplicate window no longer than the age limit (the server requires it).
    expect(streamConfig(small)).toMatchObject({ max_age: 60_000 * 1e6, max_bytes: -1, duplicate_window: 60_000 * 1e6 });
    const forever = batonTopology('baton', { dlqMaxAgeMs: 0 }).streams[2]!;
    expect(streamConfig(forever)).toMatchObject({ max_age: 0, duplicate_window: 3600 * 1e9 });
    // The other streams keep no byte limit.
    expect(streamConfig(batonTopology('baton').streams[0]!).max_bytes).toBe(-1);
  });
});
