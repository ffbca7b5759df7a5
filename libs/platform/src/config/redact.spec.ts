import { addressProblem, BaseConfigSchema, ConfigError, loadConfig, redactUrl } from './config';

/*
 * A server address in a configuration problem is printed (stderr) and logged: its password must
 * not be. addressProblem echoed the whole value, so `redis://:secret@host:bad` (a port that does
 * not parse) showed `secret` in the config error. One masking function (redactUrl) serves the
 * config problems, the start failures and the CLI.
 */

const messageOf = (env: Record<string, string>): string => {
  try {
    loadConfig(BaseConfigSchema, env);
  } catch (error) {
    if (error instanceof ConfigError) return `${error.message} ${JSON.stringify(error.problems)}`;
    throw error;
  }
  throw new Error('the configuration was accepted');
};

describe('config problems never show a URL password', () => {
  it.each([
    ['REDIS_URL', 'redis://:s3cretpw@host:bad'],
    ['REDIS_URL', 'redis://baton:s3cretpw@host:0'],
    ['REDIS_URL', 'rediss://baton:s3c/ret@host:bad'],
    ['NATS_URL', 'nats://ok:fine@h1:4222,nats://admin:s3cretpw@h2:bad'],
    ['NATS_URL', 'nats://s3cretpw@:4222'],
  ])('%s=%s: the problem names the address, password masked', (variable, value) => {
    const said = messageOf({ [variable]: value });
    expect(said).toContain(variable);
    expect(said).toContain('***@');
    expect(said).not.toContain('s3c');
  });

  it('addressProblem masks the password in each of its messages', () => {
    for (const value of ['redis://u:pw123456@host:bad', 'redis://u:pw123456@:6379', 'redis://u:pw123456@host:0']) {
      const problem = addressProblem(value, ['redis']);
      expect(problem).toContain('redis://u:***@');
      expect(problem).not.toContain('pw123456');
    }
  });

  it('redactUrl: the user kept, the password masked, whatever it holds; addresses without one unchanged', () => {
    expect(redactUrl('redis://:secret@host:6379')).toBe('redis://:***@host:6379');
    expect(redactUrl('redis://user:p@ss/w:rd@host:6379/0')).toBe('redis://user:***@host:6379/0');
    expect(redactUrl('nats://a:x@h1:4222,nats://b:y@h2:4222')).toBe('nats://a:***@h1:4222,nats://b:***@h2:4222');
    expect(redactUrl('nats://token@h:4222')).toBe('nats://***@h:4222');
    expect(redactUrl('redis://user@h:6379')).toBe('redis://user@h:6379');
    expect(redactUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
    expect(redactUrl('cannot reach Redis at redis://:pw@h:1: ECONNREFUSED')).toBe('cannot reach Redis at redis://:***@h:1: ECONNREFUSED');
  });
});
