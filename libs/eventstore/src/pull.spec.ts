import { headers as natsHeaders } from 'nats';
import { headersToRecord } from './dead-letter';
import { ackInfo, consumerGone, headerBlockRecord, headerInBlock } from './pull';

describe('raw header blocks', () => {
  const block = 'NATS/1.0\r\nBaton-Event-Type: run.routed\r\nBaton-Note: first\r\nBaton-Note:  second \r\nNats-Msg-Id:ev-1\r\n\r\n';
  it('headerInBlock reads one header, its first value trimmed; undefined when absent', () => {
    expect(headerInBlock(block, 'Baton-Event-Type')).toBe('run.routed');
    expect(headerInBlock(block, 'Baton-Note')).toBe('first');
    expect(headerInBlock(block, 'Nats-Msg-Id')).toBe('ev-1');
    expect(headerInBlock(block, 'Baton')).toBeUndefined();
    expect(headerInBlock('', 'Baton-Note')).toBeUndefined();
  });
  it('headerBlockRecord reads every header as the client decodes them: names as sent, values trimmed and in order; no status line', () => {
    expect(headerBlockRecord(block)).toEqual({ 'Baton-Event-Type': ['run.routed'], 'Baton-Note': ['first', 'second'], 'Nats-Msg-Id': ['ev-1'] });
    expect(headerBlockRecord('NATS/1.0 404 No Messages\r\n\r\n')).toEqual({});
    expect(headerBlockRecord('')).toEqual({});
  });
  it('headerBlockRecord keeps headers named like Object.prototype members as own members (the sender picks the names)', () => {
    const record = headerBlockRecord('NATS/1.0\r\nconstructor: a\r\n__proto__: b\r\ntoString: c\r\nconstructor: d\r\nhasOwnProperty: e\r\n\r\n');
    expect(Object.entries(record)).toEqual([
      ['constructor', ['a', 'd']],
      ['__proto__', ['b']],
      ['toString', ['c']],
      ['hasOwnProperty', ['e']],
    ]);
    expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
  });
  it('headersToRecord does the same for the headers the client decoded', () => {
    const hdrs = natsHeaders();
    hdrs.append('__proto__', 'b');
    hdrs.append('constructor', 'a');
    const record = headersToRecord(hdrs);
    expect(Object.entries(record)).toEqual([
      ['__proto__', ['b']],
      ['constructor', ['a']],
    ]);
    expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
  });
});

describe('ackInfo: the delivery facts in a JetStream reply subject', () => {
  it('reads the nine-token form', () => {
    expect(ackInfo('$JS.ACK.EVENTS.follow_x_3.2.812.17.1733140000123456789.4')).toEqual({
      stream: 'EVENTS',
      consumer: 'follow_x_3',
      delivered: 2,
      streamSeq: 812,
      delivery: 17,
      timestampMs: 1733140000123,
      pending: 4,
    });
  });

  it('reads the form with a domain and an account hash (and a trailing token)', () => {
    expect(ackInfo('$JS.ACK.hub.ACCHASH.EVENTS.follow_x_3.1.812.17.1733140000000000000.0.r4nd')).toMatchObject({
      stream: 'EVENTS',
      consumer: 'follow_x_3',
      delivered: 1,
      streamSeq: 812,
      delivery: 17,
      pending: 0,
    });
  });

  it('is null for anything else', () => {
    expect(ackInfo('_INBOX.abc.1')).toBeNull();
    expect(ackInfo('$JS.ACK.EVENTS.c.1.2.3')).toBeNull();
    expect(ackInfo('$JS.ACK.EVENTS.c.1.x.17.1.4')).toBeNull();
    // An empty number token is not a number; nor is one with a sign.
    expect(ackInfo('$JS.ACK.EVENTS.c..812.17.1733140000000000000.0')).toBeNull();
    expect(ackInfo('$JS.ACK.EVENTS.c.1.-812.17.1733140000000000000.0')).toBeNull();
    expect(ackInfo('$JSX.ACK.EVENTS.c.1.812.17.1733140000000000000.0')).toBeNull();
  });
});

describe('consumerGone: a pull that ended because its consumer is not there', () => {
  it('is 503 (no consumer answers) or 409 Consumer Deleted; not an expiry or a byte bound', () => {
    expect(consumerGone({ code: 503, description: '' })).toBe(true);
    expect(consumerGone({ code: 409, description: 'Consumer Deleted' })).toBe(true);
    expect(consumerGone({ code: 409, description: 'Message Size Exceeds MaxBytes' })).toBe(false);
    expect(consumerGone({ code: 408, description: 'Request Timeout' })).toBe(false);
    expect(consumerGone(null)).toBe(false);
  });
});
