import { ackInfo } from './pull';

describe('ackInfo: the delivery facts in a JetStream reply subject', () => {
  it('reads the nine-token form', () => {
    expect(ackInfo('$JS.ACK.EVENTS.follow_x_3.1.812.17.1733140000000000000.4')).toEqual({ consumer: 'follow_x_3', streamSeq: 812, delivery: 17, pending: 4 });
  });

  it('reads the form with a domain and an account hash (and a trailing token)', () => {
    expect(ackInfo('$JS.ACK.hub.ACCHASH.EVENTS.follow_x_3.1.812.17.1733140000000000000.0.r4nd')).toEqual({
      consumer: 'follow_x_3',
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
