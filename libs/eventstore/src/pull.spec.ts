import { ackInfo, consumerGone } from './pull';

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
