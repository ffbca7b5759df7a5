import { claimRateBucket, claimRateKey } from './claim-rate-store';

// Names only: the store itself is proven against a real NATS server in rate-cap.int-spec.ts.
describe('claim rate bucket and keys', () => {
  it('one bucket per prefix, named like the streams', () => {
    expect(claimRateBucket('baton')).toBe('BATON_CLAIM_RATES');
    expect(claimRateBucket('acme.prod')).toBe('ACME_PROD_CLAIM_RATES');
  });

  it('an agent name is the key as it is; other actor names are encoded into valid, distinct keys', () => {
    expect(claimRateKey('acme', 'builder-2')).toBe('acme.builder-2');
    const keys = ['ops@example.com', 'a.b', 'a:b', 'a_b'].map((actor) => claimRateKey('acme', actor));
    expect(new Set(keys).size).toBe(4);
    for (const key of keys) {
      expect(key).toMatch(/^[-/=.\w]+$/); // what a KV key may hold
      expect(key.split('.')).toHaveLength(2);
    }
    expect(claimRateKey('acme', 'ops@example.com')).toBe(`acme.=${Buffer.from('ops@example.com').toString('base64url')}`);
  });
});
