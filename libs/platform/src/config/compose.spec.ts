import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ServiceConfigSchema } from '../service/bootstrap';

/**
 * No Docker engine runs on the development machines, so `docker compose up` cannot be tried here.
 * What can be checked is checked: the file parses, every Baton service is there with an entry
 * point that exists, and every variable it sets is one the services' configuration knows.
 */
const root = join(__dirname, '..', '..', '..', '..');
const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, { command?: string[]; environment?: Record<string, string>; image?: string; build?: unknown; depends_on?: unknown }>;
};
const services = ['router', 'ledger', 'watchdog', 'notifier'];
const knownVariables = new Set(Object.keys(ServiceConfigSchema.shape));

describe('docker-compose.yml runs the whole platform', () => {
  it('holds NATS with JetStream, Redis with AOF and the four services', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['ledger', 'nats', 'notifier', 'redis', 'router', 'watchdog']);
    expect(compose.services['nats']!.command).toEqual(expect.arrayContaining(['-js']));
    expect(compose.services['redis']!.command).toEqual(expect.arrayContaining(['--appendonly', 'yes']));
  });

  it.each(services)('%s starts from its built entry point, built from the one Dockerfile', (name) => {
    const service = compose.services[name]!;
    expect(service.command).toEqual(['node', `dist/apps/${name}/src/main.js`]);
    expect(existsSync(join(root, 'apps', name, 'src', 'main.ts'))).toBe(true);
    expect(service.build).toEqual({ context: '.', dockerfile: 'Dockerfile' });
    expect(existsSync(join(root, 'Dockerfile'))).toBe(true);
  });

  it.each(services)('%s sets only variables the configuration schema knows, and valid values', (name) => {
    const env = compose.services[name]!.environment ?? {};
    expect(Object.keys(env).filter((key) => !knownVariables.has(key))).toEqual([]);
    expect(ServiceConfigSchema.safeParse(env).success).toBe(true);
    expect(env['HTTP_HOST']).toBe('0.0.0.0');
    expect(env['NATS_URL']).toBe('nats://nats:4222');
  });
});
