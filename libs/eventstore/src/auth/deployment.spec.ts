import { linkSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Principals } from '@baton/contracts';
import { issueCreds, openDeployment, serverConfig } from './deployment';

describe('the nats-server configuration baton nats-config writes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-conf-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('lets a client 10 s to send its signed CONNECT (the default 2 s closed connections made at once on a busy machine) and carries JWT-sized control lines', () => {
    const text = serverConfig(openDeployment(join(dir, 'nats-auth'), 'confspec'), { storeDir: join(dir, 'js') });
    expect(text).toContain('authorization {\n  timeout: 10\n}');
    expect(text).toContain('max_control_line: 16KB');
    // The trust block follows: operator mode with the timeout alone in `authorization` (nats-server 2.9.10 accepts it).
    expect(text.indexOf('authorization {')).toBeLessThan(text.indexOf('operator:'));
  });
});

describe('credentials written while a service may be reading them', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-creds-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('replaces a creds file whole: the file a reader opened keeps the old credentials, the new one is 0600 from the start, nothing is left beside it', () => {
    const deployment = openDeployment(join(dir, 'nats-auth'), 'credsspec');
    const principal = Principals.agent('acme', 'builder');
    const first = issueCreds(deployment, principal);
    // A reader that opened the file before the second issue (a service re-reading at a reconnect)
    // holds the old file: written in place, it would read an emptied or half-written one.
    const held = join(dir, 'held.creds');
    linkSync(first.file, held);
    const second = issueCreds(deployment, principal);
    expect(second.file).toBe(first.file);
    expect(readFileSync(held, 'utf8')).toBe(first.creds);
    expect(readFileSync(second.file, 'utf8')).toBe(second.creds);
    expect(statSync(second.file).mode & 0o777).toBe(0o600);
    expect(readdirSync(dirname(second.file)).filter((name) => name !== 'builder.creds')).toEqual([]);
  });
});
