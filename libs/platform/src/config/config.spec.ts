import { z } from 'zod';
import { BaseConfigSchema, checkNatsAuth, ConfigError, envInt, loadConfig, loadServiceSettings, natsAuthenticated, unknownOwnVariables } from './config';

describe('configuration is validated at start with a clear message', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig(BaseConfigSchema, {});
    expect(config.NATS_URL).toBe('nats://127.0.0.1:4222');
    expect(config.REDIS_URL).toBe('redis://127.0.0.1:6379');
    expect(config.BATON_PREFIX).toBe('baton');
    // Unset: each service's own default (createRuntime).
    expect(config.BATON_FOLD_CACHE_SIZE).toBeUndefined();
    expect(config.BATON_FOLD_CACHE_MB).toBeUndefined();
  });

  it('the fold cache size is a whole number from 0 (no cache) up', () => {
    expect(loadConfig(BaseConfigSchema, { BATON_FOLD_CACHE_SIZE: '0' }).BATON_FOLD_CACHE_SIZE).toBe(0);
    expect(loadConfig(BaseConfigSchema, { BATON_FOLD_CACHE_SIZE: '2500' }).BATON_FOLD_CACHE_SIZE).toBe(2500);
    for (const bad of ['-1', '1.5', 'lots']) expect(() => loadConfig(BaseConfigSchema, { BATON_FOLD_CACHE_SIZE: bad })).toThrow(/BATON_FOLD_CACHE_SIZE/);
  });

  it('the fold cache byte bound is a whole number of MiB from 1 up (there is no "unbounded": use a large number)', () => {
    expect(loadConfig(BaseConfigSchema, { BATON_FOLD_CACHE_MB: '24' }).BATON_FOLD_CACHE_MB).toBe(24);
    for (const bad of ['0', '-3', '2.5', 'big']) expect(() => loadConfig(BaseConfigSchema, { BATON_FOLD_CACHE_MB: bad })).toThrow(/BATON_FOLD_CACHE_MB/);
  });

  it('the dead-letter stream keeps 30 days and 1 GiB unless told otherwise (0 = no limit)', () => {
    const config = loadConfig(BaseConfigSchema, {});
    expect([config.BATON_DLQ_MAX_AGE_MS, config.BATON_DLQ_MAX_BYTES]).toEqual([30 * 24 * 3600 * 1000, 1024 ** 3]);
    const set = loadConfig(BaseConfigSchema, { BATON_DLQ_MAX_AGE_MS: '0', BATON_DLQ_MAX_BYTES: '1048576' });
    expect([set.BATON_DLQ_MAX_AGE_MS, set.BATON_DLQ_MAX_BYTES]).toEqual([0, 1048576]);
    expect(() => loadConfig(BaseConfigSchema, { BATON_DLQ_MAX_BYTES: '-1' })).toThrow(/BATON_DLQ_MAX_BYTES/);
  });

  it('names every bad variable in the error', () => {
    let error: unknown;
    try {
      loadConfig(BaseConfigSchema.extend({ HTTP_PORT: z.coerce.number().int().min(1) }), {
        NATS_URL: 'http://nope',
        BATON_PREFIX: 'Bad Prefix',
        HTTP_PORT: 'abc',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as ConfigError).message;
    expect(message).toContain('NATS_URL');
    expect(message).toContain('BATON_PREFIX');
    expect(message).toContain('HTTP_PORT');
    expect((error as ConfigError).problems.map((p) => p.variable).sort()).toEqual(['BATON_PREFIX', 'HTTP_PORT', 'NATS_URL']);
  });

  it('a whole number is written in digits: blanks, signs, fractions, exponents and hexadecimal are refused, not read as some other number', () => {
    expect(loadConfig(BaseConfigSchema, { BATON_MAX_DELIVER: ' 7 ' }).BATON_MAX_DELIVER).toBe(7);
    for (const bad of [' ', '0x5', '5e0', '5.0', '+5', '-5', '5 tries']) {
      expect(() => loadConfig(BaseConfigSchema, { BATON_MAX_DELIVER: bad })).toThrow(/BATON_MAX_DELIVER: must be a whole number written in digits/);
    }
    expect(() => loadConfig(BaseConfigSchema, { BATON_MAX_DELIVER: '101' })).toThrow(/BATON_MAX_DELIVER: must be at most 100/);
    const port = BaseConfigSchema.extend({ HTTP_PORT: envInt(0, 65535) });
    for (const bad of [' ', '0x1BBC', '7.1e3']) expect(() => loadConfig(port, { HTTP_PORT: bad })).toThrow(/HTTP_PORT/);
    // A schema parsed from an object (not the environment) takes numbers as they are.
    expect(port.shape.HTTP_PORT.parse(7100)).toBe(7100);
  });

  it('the dead letters are kept at most as long as JetStream can count (its max_age is int64 nanoseconds)', () => {
    expect(loadConfig(BaseConfigSchema, { BATON_DLQ_MAX_AGE_MS: '9007199254740' }).BATON_DLQ_MAX_AGE_MS).toBe(9_007_199_254_740);
    expect(() => loadConfig(BaseConfigSchema, { BATON_DLQ_MAX_AGE_MS: '9000000000000000' })).toThrow(/BATON_DLQ_MAX_AGE_MS: must be at most/);
    expect(() => loadConfig(BaseConfigSchema, { BATON_DLQ_MAX_BYTES: '90071992547409910' })).toThrow(/BATON_DLQ_MAX_BYTES: must be at most/);
  });

  it('server addresses are checked as the clients will read them: each entry of a NATS list, host present, port 1-65535', () => {
    const ok = loadConfig(BaseConfigSchema, { NATS_URL: 'nats://a:4222, nats://b:4223,tls://c', REDIS_URL: 'rediss://user:pw@r.example:6380/7' });
    expect([ok.NATS_URL, ok.REDIS_URL]).toEqual(['nats://a:4222, nats://b:4223,tls://c', 'rediss://user:pw@r.example:6380/7']);
    const refused: Array<[Record<string, string>, RegExp]> = [
      [{ NATS_URL: 'nats://' }, /NATS_URL: "nats:\/\/" (is not a valid URL|names no host)/],
      [{ NATS_URL: 'nats://host:99999' }, /NATS_URL: "nats:\/\/host:99999" is not a valid URL/],
      [{ NATS_URL: 'nats://host:0' }, /NATS_URL: "nats:\/\/host:0": the port must be 1-65535/],
      [{ NATS_URL: 'nats://a:4222,http://b:4222' }, /NATS_URL: must start with nats:\/\/ or tls:\/\/ or ws:\/\/ or wss:\/\//],
      [{ NATS_URL: 'nats://a:4222,' }, /NATS_URL: an empty entry in the list/],
      [{ REDIS_URL: 'redis://127.0.0.1:notaport' }, /REDIS_URL: "redis:\/\/127.0.0.1:notaport" is not a valid URL/],
      [{ REDIS_URL: 'redis://a:6379,redis://b:6379' }, /REDIS_URL/],
    ];
    for (const [env, message] of refused) expect(() => loadConfig(BaseConfigSchema, env)).toThrow(message);
  });

  it("a service's own settings are checked with the shared ones: one start names every bad variable of both kinds", () => {
    const own = z.object({ LEDGER_LEASE_MS: envInt(1_000, 86_400_000).default(60_000) });
    let error: unknown;
    try {
      loadServiceSettings(own, { LEDGER_LEASE_MS: '-5', BATON_STREAM_REPLICAS: '9' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems.map((p) => p.variable).sort()).toEqual(['BATON_STREAM_REPLICAS', 'LEDGER_LEASE_MS']);
    expect(loadServiceSettings(own, { LEDGER_LEASE_MS: '5000' })).toEqual({ LEDGER_LEASE_MS: 5000 });
  });

  it('treats empty variables as unset', () => {
    expect(loadConfig(BaseConfigSchema, { LOG_LEVEL: '' }).LOG_LEVEL).toBe('info');
  });
});

describe('NATS authentication at start', () => {
  it('refuses to start a service without credentials unless BATON_NATS_AUTH=none says so', () => {
    const config = loadConfig(BaseConfigSchema, {});
    expect(config.BATON_NATS_AUTH).toBe('creds');
    expect(() => checkNatsAuth(config, 'router service')).toThrow(/NATS_CREDS: required/);
    try {
      checkNatsAuth(config, 'router service');
    } catch (error) {
      expect((error as ConfigError).problems.map((p) => p.variable)).toEqual(['NATS_CREDS']);
    }
  });

  it('starts with a credentials file, or with authentication explicitly off', () => {
    expect(() => checkNatsAuth(loadConfig(BaseConfigSchema, { NATS_CREDS: '/run/secrets/router.creds' }), 'router')).not.toThrow();
    expect(() => checkNatsAuth(loadConfig(BaseConfigSchema, { BATON_NATS_AUTH: 'none' }), 'router')).not.toThrow();
    expect(() => loadConfig(BaseConfigSchema, { BATON_NATS_AUTH: 'off' })).toThrow(/BATON_NATS_AUTH/);
  });

  it('natsAuthenticated: on with a credentials file or a NATS user, whatever BATON_NATS_AUTH says; off only with none and neither', () => {
    const on = (env: Record<string, string>) => natsAuthenticated(loadConfig(BaseConfigSchema, env));
    expect(on({ NATS_CREDS: '/run/secrets/ledger.creds' })).toBe(true);
    expect(on({ NATS_USER: 'ledger', NATS_PASSWORD: 'p' })).toBe(true);
    expect(on({ BATON_NATS_AUTH: 'none', NATS_CREDS: '/run/secrets/ledger.creds' })).toBe(true);
    expect(on({ BATON_NATS_AUTH: 'none', NATS_USER: 'ledger', NATS_PASSWORD: 'p' })).toBe(true);
    expect(on({ BATON_NATS_AUTH: 'none' })).toBe(false);
  });
});

describe('unknownOwnVariables: a misspelt setting of the service is named at start, not ignored in silence', () => {
  const known = ['WATCHDOG_TICK_MS', 'WATCHDOG_SNAPSHOT_INTERVAL_MS', 'WATCHDOG_MAX_HOPS'];

  it('names every variable of the own prefix the service does not read, with the known name nearest to a misspelling', () => {
    const env = {
      WATCHDOG_SNAPSHOT_INTERVAL: '1000',
      WATCHDOG_MAX_HOP: '9',
      WATCHDOG_TICK_MS: '100',
      WATCHDOG_SOMETHING_ELSE_ENTIRELY: '1',
      LEDGER_LEASE_MS: '5',
      BATON_PREFIX: 'baton',
      WATCHDOG_UNSET: undefined,
    };
    expect(unknownOwnVariables('watchdog', known, env)).toEqual([
      { variable: 'WATCHDOG_MAX_HOP', nearest: 'WATCHDOG_MAX_HOPS' },
      { variable: 'WATCHDOG_SNAPSHOT_INTERVAL', nearest: 'WATCHDOG_SNAPSHOT_INTERVAL_MS' },
      { variable: 'WATCHDOG_SOMETHING_ELSE_ENTIRELY' },
    ]);
  });

  it('a service with no settings of its own (the router) names every ROUTER_ variable; nothing when all are known', () => {
    expect(unknownOwnVariables('router', [], { ROUTER_CONCURRENCY: '8' })).toEqual([{ variable: 'ROUTER_CONCURRENCY' }]);
    expect(unknownOwnVariables('watchdog', known, { WATCHDOG_TICK_MS: '100', NATS_URL: 'nats://127.0.0.1:4222' })).toEqual([]);
  });
});
