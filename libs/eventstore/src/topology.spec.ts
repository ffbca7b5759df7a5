import { LruCache } from './lru';
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
    expect(inbox!.subjects).toEqual(['baton.in.>']);
    expect(dlq!.subjects).toEqual(['baton.dlq.>']);
  });
});

describe('LruCache', () => {
  it('evicts the least recently used entry past capacity', () => {
    const cache = new LruCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.get('a');
    cache.set('c', 3);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBe(1);
    expect(cache.get('c')).toBe(3);
  });
});
