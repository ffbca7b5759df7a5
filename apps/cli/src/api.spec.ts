import { answerOutcomeText, callApi, GET_TIMEOUT_MS, POST_TIMEOUT_MS } from './api';
import { createCliContext } from './context';
import { bufferedIo } from './output';

/**
 * What the CLI says when the operator API does not answer in time: an answer's POST waits for the
 * router's decision on the server (up to 60 s), so it gets longer than a read, and a POST that
 * timed out may have been carried out — the CLI says so instead of "cannot reach".
 */
describe('callApi: the operator API not answering in time', () => {
  const timingOut = (async () => {
    throw new DOMException('The operation was aborted due to timeout', 'TimeoutError');
  }) as unknown as typeof fetch;
  const ctx = () => createCliContext({ io: bufferedIo(), env: { BATON_API_URL: 'http://127.0.0.1:9', BATON_TOKEN: 'bt_test' }, fetch: timingOut });

  it('a POST waits longer than the server may wait for an outcome, and a timeout says it may have been carried out', async () => {
    expect(POST_TIMEOUT_MS).toBeGreaterThan(60_000);
    await expect(callApi(ctx(), 'POST', '/v1/stops/s-1/answer', { action: 'deny' })).rejects.toThrow(
      `the operator API at http://127.0.0.1:9 did not answer POST /v1/stops/s-1/answer within ${POST_TIMEOUT_MS / 1000} s: it may have been carried out`,
    );
  });

  it('a GET that times out says so, with its own wait', async () => {
    await expect(callApi(ctx(), 'GET', '/v1/inbox')).rejects.toThrow(`did not answer GET /v1/inbox within ${GET_TIMEOUT_MS / 1000} s`);
  });

  it('an API that cannot be reached at all still says so', async () => {
    const refused = (async () => {
      throw new TypeError('fetch failed');
    }) as unknown as typeof fetch;
    const context = createCliContext({ io: bufferedIo(), env: { BATON_API_URL: 'http://127.0.0.1:9', BATON_TOKEN: 'bt_test' }, fetch: refused });
    await expect(callApi(context, 'GET', '/v1/inbox')).rejects.toThrow('cannot reach the operator API at http://127.0.0.1:9');
  });
});

describe('answerOutcomeText: what an answer did, in words', () => {
  it('an applied answer names the new status; the same answer sent again says it was applied before and nothing new was done', () => {
    const applied = { status: 200, body: { outcome: 'applied', workflow_run_id: 'wr-1', run: { status: 'running' }, duplicate: false } };
    expect(answerOutcomeText(applied as never, 'hold answer a-1')).toBe('applied hold answer a-1; run wr-1 is now running');
    const again = { status: 200, body: { ...applied.body, duplicate: true, event: { seq: 194 }, run: { status: 'held' } } };
    expect(answerOutcomeText(again as never, 'hold answer a-1')).toBe(
      'already applied hold answer a-1 (this answer id was applied before at seq 194; nothing new was done); run wr-1 is now held',
    );
  });
});
