import { z } from 'zod';
import { BaseConfigSchema, checkNatsAuth, ConfigError, loadConfig } from './config';

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
});
