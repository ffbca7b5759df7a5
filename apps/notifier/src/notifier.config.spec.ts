import { ConfigError } from '@baton/platform';
import { loadNotifierConfig } from './notifier.config';

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
