import { TransientError, type ConsumedMessage } from '@baton/eventstore';
import { LedgerCommandError } from './errors';
import { createOfferHandler } from './offers';

/** An offer message as the runner hands it over (the handler reads its bytes and delivery facts only). */
const offerMessage = (deliveries: number): ConsumedMessage => ({
  subject: 'x.in.shop.offer.alice',
  data: new TextEncoder().encode(JSON.stringify({ id: 'h-1', status: 'pending' })),
  headers: {},
  seq: 7,
  deliveryCount: deliveries,
  stream: 'X_INBOX',
  consumer: 'offers-4-shop-alice',
  pending: 0,
  timestampMs: Date.now(),
  raw: {} as never,
});

const refusedBy = (code: string, details?: Record<string, unknown>) =>
  createOfferHandler({
    project: 'shop',
    agent: 'alice',
    ledger: {} as never,
    publishResult: async () => ({ seq: 0, duplicate: false, stream: 'X' }),
    onOffer: async () => {
      throw new LedgerCommandError('claim', 'h-1', { code, kind: 'unavailable', message: `${code}`, ...(details ? { details } : {}) });
    },
  });

describe('an offer refused for a limit, not for itself', () => {
  it.each(['rate_limited', 'project_paused'])(
    '%s: retried after the ledger’s retry_after_ms for as long as it lasts (unbounded), never terminated — an offer given up on leaves its handoff pending with nobody offered it',
    async (code) => {
      const failure = await refusedBy(code, { retry_after_ms: 1234 })(offerMessage(9)).then(
        () => null,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(TransientError);
      expect(failure).toMatchObject({ delayMs: 1234, unbounded: true });
    },
  );

  it('any other refusal the handler lets through stays the handler’s error (bounded by maxDeliver)', async () => {
    const failure = await refusedBy('identity_mismatch')(offerMessage(1)).then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(LedgerCommandError);
  });
});
