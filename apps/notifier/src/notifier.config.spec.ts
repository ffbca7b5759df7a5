import { ConfigError } from '@baton/platform';
import { loadNotifierConfig, webhookBackoff, webhookRetryWindowMs } from './notifier.config';

const trust = (value: string | undefined) => loadNotifierConfig(value === undefined ? {} : { NOTIFIER_TRUST_PROXY: value }).NOTIFIER_TRUST_PROXY;

describe('NOTIFIER_TRUST_PROXY', () => {
  it('is off unless set: unset, empty, false and 0 trust no proxy', () => {
    expect([trust(undefined), trust(''), trust('false'), trust('0')]).toEqual([false, false, false, false]);
  });

  it('takes a hop count, or a list of addresses, prefixes and named ranges', () => {
    expect(trust('1')).toBe(1);
    expect(trust(' loopback, 10.0.0.0/8 ,fd00::/8, 192.0.2.7 ')).toEqual(['loopback', '10.0.0.0/8', 'fd00::/8', '192.0.2.7']);
  });

  it('refuses what Express would misread, naming each bad entry', () => {
    for (const [value, named] of [
      ['10.0.0.0/33', '"10.0.0.0/33"'],
      ['fd00::/129', '"fd00::/129"'],
      ['loopback,proxy.internal', '"proxy.internal"'],
      ['10.0.0.0/8/8', '"10.0.0.0/8/8"'],
      ['true', '"true"'],
      ['17', 'between 0 and 16'],
    ]) {
      let thrown: unknown;
      try {
        trust(value);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect({ value, message: (thrown as Error).message }).toEqual({ value, message: expect.stringContaining(named!) });
      expect((thrown as Error).message).toContain('NOTIFIER_TRUST_PROXY');
    }
  });
});

describe('NOTIFIER_WEBHOOK_* retries', () => {
  const refused = (env: Record<string, string>) => {
    try {
      loadNotifierConfig(env);
      return null;
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    }
  };

  it('the defaults ride out a receiver down for an hour: the delays reach NOTIFIER_WEBHOOK_BACKOFF_MAX_MS and the retries span ~63.5 minutes, past a one-hour outage', () => {
    const config = loadNotifierConfig({});
    expect([config.NOTIFIER_WEBHOOK_MAX_ATTEMPTS, config.NOTIFIER_WEBHOOK_BACKOFF_MS, config.NOTIFIER_WEBHOOK_BACKOFF_MAX_MS]).toEqual([21, 1000, 300_000]);
    // The delay before each retry (MAX_ATTEMPTS − 1 of them): 1 s doubling to the 5-minute cap, then the cap.
    const delays = webhookBackoff(config).slice(0, config.NOTIFIER_WEBHOOK_MAX_ATTEMPTS - 1);
    expect(delays.slice(0, 10)).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000]);
    expect(delays.filter((delay) => delay === config.NOTIFIER_WEBHOOK_BACKOFF_MAX_MS)).toHaveLength(11);
    expect(webhookRetryWindowMs(config)).toBe(3_811_000);
    expect(webhookRetryWindowMs(config)).toBeGreaterThan(3_600_000);
    // What the docs state (README, docs/operators.md): over an hour, not the two minutes of 8 attempts.
    expect(webhookRetryWindowMs({ ...config, NOTIFIER_WEBHOOK_MAX_ATTEMPTS: 8 })).toBe(127_000);
  });

  it('the window follows the settings; the bounds are what they were (attempts 1–30, first delay 10 ms–10 min, longest 10 ms–1 h)', () => {
    expect(webhookRetryWindowMs(loadNotifierConfig({ NOTIFIER_WEBHOOK_MAX_ATTEMPTS: '1' }))).toBe(0);
    expect(webhookRetryWindowMs(loadNotifierConfig({ NOTIFIER_WEBHOOK_MAX_ATTEMPTS: '4', NOTIFIER_WEBHOOK_BACKOFF_MS: '100' }))).toBe(700);
    expect(webhookRetryWindowMs(loadNotifierConfig({ NOTIFIER_WEBHOOK_MAX_ATTEMPTS: '30' }))).toBe(511_000 + 20 * 300_000);
    for (const env of <Array<Record<string, string>>>[
      { NOTIFIER_WEBHOOK_MAX_ATTEMPTS: '1' },
      { NOTIFIER_WEBHOOK_MAX_ATTEMPTS: '30' },
      { NOTIFIER_WEBHOOK_BACKOFF_MS: '10' },
      { NOTIFIER_WEBHOOK_BACKOFF_MS: '600000' },
      { NOTIFIER_WEBHOOK_BACKOFF_MAX_MS: '10' },
      { NOTIFIER_WEBHOOK_BACKOFF_MAX_MS: '3600000' },
    ])
      expect({ env, refused: refused(env) }).toEqual({ env, refused: null });
    for (const [name, value] of [
      ['NOTIFIER_WEBHOOK_MAX_ATTEMPTS', '0'],
      ['NOTIFIER_WEBHOOK_MAX_ATTEMPTS', '31'],
      ['NOTIFIER_WEBHOOK_BACKOFF_MS', '9'],
      ['NOTIFIER_WEBHOOK_BACKOFF_MS', '600001'],
      ['NOTIFIER_WEBHOOK_BACKOFF_MAX_MS', '9'],
      ['NOTIFIER_WEBHOOK_BACKOFF_MAX_MS', '3600001'],
    ] as const)
      expect(refused({ [name]: value })).toContain(name);
  });
});
