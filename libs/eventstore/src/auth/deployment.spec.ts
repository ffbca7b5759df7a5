import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDeployment, serverConfig } from './deployment';

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
