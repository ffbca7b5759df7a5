import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CliWarningCode } from './errors';
import { createCliContext, localDeployment } from './context';
import { bufferedIo } from './output';

/*
 * `npm start` writes the services' BATON_PREFIX into local.json: the CLI run in another shell, which
 * connects through local.json (NATS_URL unset), takes it from there when BATON_PREFIX is not set.
 * A BATON_PREFIX that differs from it is used, with a typed warning (prefix_mismatch).
 */
describe('the local deployment file (local.json): the CLI takes the platform’s prefix from it', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-local-prefix-'));
    writeFileSync(join(dir, 'local.json'), JSON.stringify({ url: 'nats://127.0.0.1:45678', creds: { admin: 'a.creds' }, prefix: 'shopx' }));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const contextOf = (env: Record<string, string>, json = false) => {
    const io = bufferedIo();
    const ctx = createCliContext({ io, env: { BATON_NATS_DIR: dir, ...env } });
    ctx.json = json;
    return { ctx, io };
  };

  it('reads prefix from local.json', () => {
    expect(localDeployment({ BATON_NATS_DIR: dir })).toEqual({ url: 'nats://127.0.0.1:45678', admin: 'a.creds', prefix: 'shopx' });
  });

  it('BATON_PREFIX unset: the CLI uses local.json’s prefix (streams, subjects and the projection keys), and says nothing', () => {
    const { ctx, io } = contextOf({});
    expect(ctx.config().BATON_PREFIX).toBe('shopx');
    expect(io.err()).toBe('');
  });

  it('BATON_PREFIX set to another: it is used, with a prefix_mismatch warning (prose, or kept for --json with details)', () => {
    const { ctx, io } = contextOf({ BATON_PREFIX: 'other' });
    expect(ctx.config().BATON_PREFIX).toBe('other');
    expect(io.err()).toMatch(
      /^baton: warning: BATON_PREFIX is other, and the platform npm start runs \(.*local\.json, NATS at nats:\/\/127\.0\.0\.1:45678\) runs with the prefix shopx/,
    );
    // Once per command: config() is read many times.
    ctx.config();
    expect(io.err().split('\n').filter(Boolean)).toHaveLength(1);

    const json = contextOf({ BATON_PREFIX: 'other' }, true);
    json.ctx.config();
    expect(json.io.err()).toBe('');
    expect(json.ctx.warnings()).toEqual([
      {
        code: CliWarningCode.prefixMismatch,
        message: expect.stringContaining('using other') as string,
        details: { baton_prefix: 'other', local_prefix: 'shopx', local_json: join(dir, 'local.json') },
      },
    ]);
  });

  it('the same BATON_PREFIX, NATS_URL set (local.json not read), or a local.json of an earlier npm start (no prefix): no warning, the usual prefix', () => {
    const same = contextOf({ BATON_PREFIX: 'shopx' });
    expect(same.ctx.config().BATON_PREFIX).toBe('shopx');
    expect(same.io.err()).toBe('');
    const elsewhere = contextOf({ NATS_URL: 'nats://127.0.0.1:4222', BATON_PREFIX: 'other' });
    expect(elsewhere.ctx.config().BATON_PREFIX).toBe('other');
    expect(elsewhere.io.err()).toBe('');
    expect(contextOf({ NATS_URL: 'nats://127.0.0.1:4222' }).ctx.config().BATON_PREFIX).toBe('baton');
    writeFileSync(join(dir, 'local.json'), JSON.stringify({ url: 'nats://127.0.0.1:45678', creds: { admin: 'a.creds' } }));
    const earlier = contextOf({});
    expect(earlier.ctx.config().BATON_PREFIX).toBe('baton');
    expect(earlier.io.err()).toBe('');
  });
});
