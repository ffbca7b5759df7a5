import { EventStoreErrorCode, isUnavailable, mapPublishError, PermissionDenied, PublishTimeout, StreamNotFound } from './errors';

describe('what counts as the infrastructure not answering (isUnavailable: retried without a bound)', () => {
  it('a publish without acknowledgement, a request timeout or no responder, a closing connection, Redis not answering', () => {
    const unavailable = [
      new PublishTimeout('x.in.p.stop'),
      Object.assign(new Error('TIMEOUT'), { code: 'TIMEOUT' }),
      Object.assign(new Error('503'), { code: '503' }),
      Object.assign(new Error('closed'), { code: 'CONNECTION_CLOSED' }),
      Object.assign(new Error('draining'), { code: 'CONNECTION_DRAINING' }),
      Object.assign(new Error('redis did not answer'), { name: 'RedisUnavailableError' }),
    ];
    expect(unavailable.map(isUnavailable)).toEqual(unavailable.map(() => true));
  });

  it('not a refusal, a bug or a bad message: those stay bounded (dead-lettered at maxDeliver)', () => {
    const others = [
      new PermissionDenied('x.in.q.result.a'),
      new TypeError('undefined is not a function'),
      Object.assign(new Error('maximum payload exceeded'), { code: 'MAX_PAYLOAD_EXCEEDED' }),
      'a string',
      null,
    ];
    expect(others.map(isUnavailable)).toEqual(others.map(() => false));
  });

  it('mapPublishError gives each its typed error and stable code', () => {
    expect(mapPublishError(Object.assign(new Error('perm'), { code: 'PERMISSIONS_VIOLATION' }), 's', undefined)).toMatchObject({
      code: EventStoreErrorCode.permissionDenied,
    });
    expect(mapPublishError(Object.assign(new Error('503'), { code: '503' }), 's', undefined)).toBeInstanceOf(StreamNotFound);
    expect(mapPublishError(Object.assign(new Error('t'), { code: 'TIMEOUT' }), 's', undefined)).toMatchObject({ code: 'publish_timeout' });
    expect(mapPublishError(new Error('other'), 's', undefined)).toMatchObject({ code: 'store_error' });
  });
});
