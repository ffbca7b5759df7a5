import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCliContext, localDeployment } from './context';
import { bufferedIo } from './output';

/*
 * `npm start` writes local.json with its NATS URL, the admin's credentials and the Redis its
 * services use; the CLI takes the Redis from it only when neither NATS_URL nor REDIS_URL says
 * otherwise, as it takes the NATS server.
 */
describe('the local deployment file (local.json): the CLI finds the running platform’s Redis too', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-local-'));
    writeFileSync(
      join(dir, 'local.json'),
      JSON.stringify({ url: 'nats://127.0.0.1:45678', creds: { admin: join(dir, 'admin.creds') }, redis: 'redis://127.0.0.1:6391/' }),
    );
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const redisOf = (env: Record<string, string>) => createCliContext({ io: bufferedIo(), env: { BATON_NATS_DIR: dir, ...env } }).config().REDIS_URL;

  it('reads url, admin and redis', () => {
    expect(localDeployment({ BATON_NATS_DIR: dir })).toEqual({
      url: 'nats://127.0.0.1:45678',
      admin: join(dir, 'admin.creds'),
      redis: 'redis://127.0.0.1:6391/',
    });
  });

  it('reads the nats-server npm start runs (pid and log) when the file names one whole', () => {
    const base = { url: 'nats://127.0.0.1:45678', creds: { admin: 'a.creds' } };
    writeFileSync(join(dir, 'local.json'), JSON.stringify({ ...base, nats_server: { pid: 4321, log: '/x/var/nats-server.log' } }));
    expect(localDeployment({ BATON_NATS_DIR: dir })).toEqual({ url: base.url, admin: 'a.creds', natsServer: { pid: 4321, log: '/x/var/nats-server.log' } });
    for (const natsServer of [{ pid: -1, log: 'l' }, { pid: 1.5, log: 'l' }, { pid: 7 }, { log: 'l' }, 'x']) {
      writeFileSync(join(dir, 'local.json'), JSON.stringify({ ...base, nats_server: natsServer }));
      expect(localDeployment({ BATON_NATS_DIR: dir })).toEqual({ url: base.url, admin: 'a.creds' });
    }
  });

  it('the operator API npm start names (its port moved with NOTIFIER_HTTP_PORT) is the CLI’s unless BATON_API_URL or NATS_URL is set', () => {
    const apiOf = (env: Record<string, string>) => createCliContext({ io: bufferedIo(), env: { BATON_NATS_DIR: dir, ...env } }).config().BATON_API_URL;
    writeFileSync(
      join(dir, 'local.json'),
      JSON.stringify({ url: 'nats://127.0.0.1:45678', creds: { admin: 'a.creds' }, redis: 'redis://127.0.0.1:6391/', api: 'http://127.0.0.1:7200' }),
    );
    expect(localDeployment({ BATON_NATS_DIR: dir })).toMatchObject({ api: 'http://127.0.0.1:7200' });
    expect(apiOf({})).toBe('http://127.0.0.1:7200');
    expect(apiOf({ BATON_API_URL: 'http://127.0.0.1:7300' })).toBe('http://127.0.0.1:7300');
    expect(apiOf({ NATS_URL: 'nats://127.0.0.1:4222' })).toBe('http://127.0.0.1:7100');
    // REDIS_URL given: the API still comes from the file (and Redis from the variable).
    expect(apiOf({ REDIS_URL: 'redis://127.0.0.1:6400' })).toBe('http://127.0.0.1:7200');
    expect(redisOf({ REDIS_URL: 'redis://127.0.0.1:6400' })).toBe('redis://127.0.0.1:6400');
    // Not a URL: ignored.
    writeFileSync(join(dir, 'local.json'), JSON.stringify({ url: 'nats://127.0.0.1:45678', creds: { admin: 'a.creds' }, api: 'ftp://x' }));
    expect(apiOf({})).toBe('http://127.0.0.1:7100');
  });

  it('with neither NATS_URL nor REDIS_URL set, the CLI reads the projections in the platform’s Redis', () => {
    expect(redisOf({})).toBe('redis://127.0.0.1:6391/');
  });

  it('REDIS_URL wins; with NATS_URL set the file is not the deployment, and the default Redis stays', () => {
    expect(redisOf({ REDIS_URL: 'redis://127.0.0.1:6400' })).toBe('redis://127.0.0.1:6400');
    expect(redisOf({ NATS_URL: 'nats://127.0.0.1:4222' })).toBe('redis://127.0.0.1:6379');
  });

  it('a file written before it named Redis (no redis field) leaves the default', () => {
    writeFileSync(join(dir, 'local.json'), JSON.stringify({ url: 'nats://127.0.0.1:45678', creds: { admin: 'a.creds' } }));
    expect(localDeployment({ BATON_NATS_DIR: dir })).toEqual({ url: 'nats://127.0.0.1:45678', admin: 'a.creds' });
    expect(redisOf({})).toBe('redis://127.0.0.1:6379');
  });
});
