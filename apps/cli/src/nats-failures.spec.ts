import { EventStoreError, EventStoreErrorCode } from '@baton/eventstore';
import { CliError, ExitCode, exitCodeOf, jetStreamTrouble, natsReadFailure } from './errors';
import { failureOf } from './main';

/*
 * How the CLI names NATS and JetStream failures, from the errors the NATS client throws (their
 * shapes as nats.js 2.29 makes them: a `NatsError` with `code`, a JetStream API error's body as
 * `api_error`). The same failures against real servers: cluster-failover.int-spec.ts.
 */

const natsError = (code: string, message = code, api?: { code: number; err_code: number; description: string }) =>
  Object.assign(new Error(message), { name: 'NatsError', code, ...(api ? { api_error: api } : {}) });
const noLeader = () => natsError('503', '503', { code: 503, err_code: 10008, description: 'JetStream system temporarily unavailable' });
const NATS_URLS = 'nats://a:4222,nats://b:4222';

describe('NATS and JetStream failures in the CLI', () => {
  it('jetStreamTrouble: "no leader" (10008) wherever it is wrapped, no responders, timeouts only where every request was JetStream\'s; other API errors are none of these', () => {
    expect(jetStreamTrouble(noLeader(), false)).toBe('no_leader');
    expect(jetStreamTrouble(new EventStoreError('reading X', { cause: noLeader() }), false)).toBe('no_leader');
    expect(jetStreamTrouble(natsError('503'), false)).toBe('not_enabled');
    expect(jetStreamTrouble(natsError('TIMEOUT'), true)).toBe('no_answer');
    expect(jetStreamTrouble(natsError('TIMEOUT'), false)).toBeNull();
    expect(jetStreamTrouble(natsError('404', 'stream not found', { code: 404, err_code: 10059, description: 'stream not found' }), true)).toBeNull();
    expect(jetStreamTrouble(natsError('CONNECTION_CLOSED'), true)).toBeNull();
  });

  it('a failure of a server that did not answer exits 69, apart from verify\'s "differ" (1)', () => {
    expect(ExitCode.unavailable).toBe(69);
    expect(ExitCode.differ).toBe(1);
    expect(exitCodeOf('unavailable')).toBe(ExitCode.unavailable);
    expect(exitCodeOf('jetstream_unavailable')).toBe(ExitCode.unavailable);
    expect(exitCodeOf('not_found')).toBe(ExitCode.failure);
    expect(new CliError('x', { code: 'unavailable' }).exitCode).toBe(69);
    expect(new CliError('x', { code: 'failed' }).exitCode).toBe(1);
  });

  it('natsReadFailure: a connection closed for good is unavailable even when requests timed out before it closed; JetStream without a leader is jetstream_unavailable; anything else is left alone', () => {
    const closed = new EventStoreError('reading X_EVENTS: the NATS connection closed after seq 12', {
      code: EventStoreErrorCode.connectionClosed,
      cause: natsError('TIMEOUT'),
    });
    expect(natsReadFailure(closed, NATS_URLS, 'verify')).toMatchObject({ code: 'unavailable', exitCode: 69, details: { nats_url: NATS_URLS } });
    expect(natsReadFailure(natsError('CONNECTION_CLOSED'), NATS_URLS, 'verify')?.message).toMatch(
      /^verify failed: the connection to NATS closed under the command/,
    );
    expect(natsReadFailure(new EventStoreError('reading X', { cause: noLeader() }), NATS_URLS, 'verify')).toMatchObject({
      code: 'jetstream_unavailable',
      exitCode: 69,
      details: { nats_url: NATS_URLS, reason: 'no_leader' },
    });
    expect(natsReadFailure(new Error('something else'), NATS_URLS, 'verify')).toBeNull();
    expect(natsReadFailure(new CliError('typed already', { code: 'not_found' }), NATS_URLS, 'verify')).toBeNull();
  });

  it('failureOf: the client\'s "no leader" answer reaching the command as it is says JetStream has no leader, not "is the server up, and NATS_URL right?"', () => {
    const failure = failureOf(noLeader());
    expect(failure).toMatchObject({ code: 'jetstream_unavailable', details: { nats_url: null, reason: 'no_leader' } });
    expect(failure.message).toMatch(/^NATS answered, but a JetStream request failed: JetStream has no leader/);
    expect(failure.message).not.toContain('NATS_URL right');
    expect(failureOf(natsError('CONNECTION_CLOSED'))).toMatchObject({ code: 'unavailable', message: expect.stringContaining('is the server up') });
  });
});
