import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { join } from 'node:path';

export const root = join(__dirname, '..', '..');

/** A free loopback port, chosen by the kernel. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  server.close();
  await once(server, 'close');
  return port;
}

export interface ServiceProcess {
  name: string;
  port: number;
  child: ChildProcess;
  output: string[];
}

/** Start one built service as its own process (`node dist/apps/<name>/src/main.js`). */
export function startService(name: string, port: number, env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, [join(root, 'dist', 'apps', name, 'src', 'main.js')], {
    cwd: root,
    env: { ...process.env, ...env, HTTP_PORT: String(port), HTTP_HOST: '127.0.0.1', BATON_INSTANCE: `${name}-e2e` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const keep = (chunk: Buffer) => {
    output.push(chunk.toString());
    if (output.length > 400) output.splice(0, output.length - 400);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { name, port, child, output };
}

/** Resolve when `/health/ready` answers 200, or fail with the service's last output. */
export async function waitReady(service: ServiceProcess, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (service.child.exitCode !== null) break;
    try {
      const response = await fetch(`http://127.0.0.1:${service.port}/health/ready`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${service.name} did not become ready:\n${service.output.join('').slice(-3000)}`);
}

/** SIGTERM (graceful shutdown) or SIGKILL, then wait for the exit. */
export async function stopService(service: ServiceProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (service.child.exitCode !== null) return service.child.exitCode;
  const exited = once(service.child, 'exit');
  service.child.kill(signal);
  const timer = setTimeout(() => service.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
  return service.child.exitCode;
}

/** Run a command to completion, collecting its output. */
export async function run(command: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
