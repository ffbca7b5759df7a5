import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { TOKEN_KEY_SETTING } from '../auth/token-key';
import { ServiceConfigSchema } from '../service/bootstrap';
import { checkNatsAuth } from './config';

/**
 * No Docker engine runs on the development machines, so `docker compose up` cannot be tried here.
 * What can be checked is checked: the file parses, every Baton service is there with an entry
 * point that exists, and every variable it sets is one the services' configuration knows.
 */
const root = join(__dirname, '..', '..', '..', '..');
const composeText = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
/** A password as an operator would put in `.env` (what Compose substitutes for `${REDIS_PASSWORD…}`). */
const REDIS_PASSWORD = 'c0ffee'.repeat(8);
/**
 * The file as Compose reads it: `${NAME}`, `${NAME:?message}` and `${NAME:-default}` substituted
 * from `vars` (a required one unset throws, as `docker compose` refuses to start), `$$` a `$`.
 */
function interpolate(text: string, vars: Record<string, string>): string {
  return text.replace(
    /\$\$|\$\{([A-Z_][A-Z0-9_]*)(?:(:\?|:-)([^}]*))?\}/g,
    (whole, name: string | undefined, op: string | undefined, arg: string | undefined) => {
      if (name === undefined) return '$';
      const value = vars[name];
      if (value !== undefined && value !== '') return value;
      if (op === ':?') throw new Error(`required variable ${name} is missing a value: ${arg ?? ''}`);
      return op === ':-' ? (arg ?? '') : '';
    },
  );
}
const compose = parse(interpolate(composeText, { REDIS_PASSWORD }), { merge: true }) as {
  services: Record<
    string,
    {
      command?: string[];
      entrypoint?: string[];
      environment?: Record<string, string>;
      image?: string;
      build?: unknown;
      depends_on?: unknown;
      ports?: string[];
      volumes?: string[];
      profiles?: string[];
    }
  >;
};
const services = ['router', 'ledger', 'watchdog', 'notifier'];
// (`!override` is Compose's own tag: the plain parser keeps the sequence under it untagged.)
const overlay = parse(readFileSync(join(root, 'infra', 'scale', 'compose.scale.yml'), 'utf8'), { merge: true, logLevel: 'error' }) as {
  services: Record<string, { environment?: Record<string, string>; ports?: string[] }>;
};
// NODE_OPTIONS is Node's own (heap sizes), not the services' configuration; BATON_TOKEN_KEY_FILE
// the notifier's (its own schema reads the file at start, which this machine has not).
const knownVariables = new Set([...Object.keys(ServiceConfigSchema.shape), 'NODE_OPTIONS', TOKEN_KEY_SETTING]);
const nodeOptions = (JSON.parse(readFileSync(join(root, 'infra', 'service-node-options.json'), 'utf8')) as { services: Record<string, string> }).services;

describe('docker-compose.yml runs the whole platform', () => {
  it('holds NATS with JetStream and authentication, Redis with AOF and the four services', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['cli', 'ledger', 'nats', 'nats-auth', 'notifier', 'redis', 'router', 'watchdog']);
    // nats-server runs the configuration `baton nats-config` writes into the shared volume.
    const auth = compose.services['nats-auth']!;
    expect(auth.entrypoint).toEqual(['node', 'dist/apps/cli/src/main.js']);
    expect(auth.command?.slice(0, 3)).toEqual(['nats-config', '--dir', '/auth']);
    expect(compose.services['nats']!.command).toEqual(['-c', '/auth/nats-server.conf']);
    expect(compose.services['nats']!.depends_on).toEqual({ 'nats-auth': { condition: 'service_completed_successfully' } });
    expect(compose.services['redis']!.command).toEqual(expect.arrayContaining(['--appendonly', 'yes']));
  });

  it('publishes nothing unauthenticated: Redis not at all, NATS and the operator API on the host loopback only', () => {
    expect(compose.services['redis']!.ports).toBeUndefined();
    const published = Object.values(compose.services).flatMap((service) => service.ports ?? []);
    expect(published.length).toBeGreaterThan(0);
    for (const port of published) expect(port).toMatch(/^127\.0\.0\.1:/);
  });

  it('the scale-out overlay publishes on the host loopback only too', () => {
    const published = Object.values(overlay.services).flatMap((service) => service.ports ?? []);
    expect(published.length).toBeGreaterThan(0);
    for (const port of published) expect(port).toMatch(/^127\.0\.0\.1:/);
  });

  it('gives Redis to the notifier alone (router, ledger and watchdog never connect to it)', () => {
    for (const name of ['router', 'ledger', 'watchdog']) {
      expect(compose.services[name]!.environment?.['REDIS_URL']).toBeUndefined();
      expect(Object.keys(compose.services[name]!.depends_on as object)).toEqual(['nats']);
    }
    expect(compose.services['notifier']!.environment?.['REDIS_URL']).toBe(`redis://:${REDIS_PASSWORD}@redis:6379`);
    expect(Object.keys(compose.services['notifier']!.depends_on as object).sort()).toEqual(['nats', 'redis']);
  });

  it('Redis asks for the password REDIS_PASSWORD sets, every REDIS_URL carries it, and there is no starting without it', () => {
    const redis = compose.services['redis']!;
    const command = redis.command ?? [];
    expect(command[command.indexOf('--requirepass') + 1]).toBe(REDIS_PASSWORD);
    // The health check's redis-cli authenticates with it.
    expect(redis.environment?.['REDISCLI_AUTH']).toBe(REDIS_PASSWORD);
    const urls = Object.entries(compose.services).filter(([, service]) => service.environment?.['REDIS_URL'] !== undefined);
    expect(urls.map(([name]) => name).sort()).toEqual(['cli', 'notifier']);
    for (const [, service] of urls) {
      const url = new URL(service.environment!['REDIS_URL']!);
      expect({ host: url.host, password: url.password }).toEqual({ host: 'redis:6379', password: REDIS_PASSWORD });
    }
    // Unset, `docker compose` refuses to start, saying what to set.
    expect(() => interpolate(composeText, {})).toThrow(/required variable REDIS_PASSWORD is missing a value: set REDIS_PASSWORD/);
  });

  it('the notifier and the CLI (and no other service) hold the token key nats-auth makes in its volume', () => {
    for (const name of ['notifier', 'cli']) expect(compose.services[name]!.environment?.[TOKEN_KEY_SETTING]).toBe('/auth/token.key');
    for (const name of ['router', 'ledger', 'watchdog']) expect(compose.services[name]!.environment?.[TOKEN_KEY_SETTING]).toBeUndefined();
    // nats-config writes <dir>/token.key; the volume is the folder it is given.
    expect(compose.services['nats-auth']!.command?.slice(0, 3)).toEqual(['nats-config', '--dir', '/auth']);
  });

  it("runs the baton CLI as the admin under the cli profile, with the services' prefix and its own heap", () => {
    const cli = compose.services['cli']!;
    const prefix = compose.services['router']!.environment?.['BATON_PREFIX'];
    expect(prefix).toBeDefined();
    expect(cli.profiles).toEqual(['cli']);
    expect(cli.entrypoint).toEqual(compose.services['nats-auth']!.entrypoint);
    expect(cli.image).toBe(compose.services['router']!.image);
    expect(cli.environment).toMatchObject({
      NATS_URL: 'nats://nats:4222',
      NATS_CREDS: '/auth/creds/admin.creds',
      REDIS_URL: `redis://:${REDIS_PASSWORD}@redis:6379`,
      BATON_PREFIX: prefix,
      NODE_OPTIONS: '',
    });
    // The admin's credentials read-only; ./backups for baton backup / restore (docs/sre.md).
    expect(cli.volumes).toEqual(['nats-auth:/auth:ro', './backups:/backups']);
    expect(Object.keys(cli.depends_on as object).sort()).toEqual(['nats', 'redis']);
    // nats-auth makes the credentials for the same prefix.
    expect(compose.services['nats-auth']!.environment?.['BATON_PREFIX']).toBe(prefix);
    // Profiled services stay out of `docker compose up`.
    for (const name of Object.keys(compose.services)) if (name !== 'cli') expect(compose.services[name]!.profiles).toBeUndefined();
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
    // Its heap sizes, the ones it is measured with.
    expect(env['NODE_OPTIONS']).toBe(nodeOptions[name]);
    expect(env['HTTP_HOST']).toBe('0.0.0.0');
    expect(env['NATS_URL']).toBe('nats://nats:4222');
    // Its own credentials from the nats-auth volume; no development mode.
    expect(env['BATON_NATS_AUTH']).toBe('creds');
    expect(env['NATS_CREDS']).toBe(`/auth/creds/${name}.creds`);
    expect(compose.services[name]!.volumes).toContain('nats-auth:/auth:ro');
    expect(() => checkNatsAuth(ServiceConfigSchema.parse(env), name)).not.toThrow();
  });
});

describe('every way of starting a service gives it the heap sizes it is measured with', () => {
  const heap = (flags: string) => Number(/--max-old-space-size=(\d+)/.exec(flags)?.[1]);

  it('the table names each service once, with a young and an old generation size', () => {
    expect(Object.keys(nodeOptions).sort()).toEqual([...services].sort());
    for (const flags of Object.values(nodeOptions)) {
      expect(flags).toMatch(/^--max-semi-space-size=\d+ --max-old-space-size=\d+$/);
      expect(heap(flags)).toBeGreaterThanOrEqual(64);
    }
  });

  it('the scale-out overlay keeps them (it sets no NODE_OPTIONS of its own)', () => {
    for (const service of Object.values(overlay.services)) expect(service.environment?.['NODE_OPTIONS']).toBeUndefined();
  });

  it("the image's default and infra/scale/service.env (one file for every service) carry the shared value and say what the ledger's is", () => {
    const shared = nodeOptions['router']!;
    for (const name of ['watchdog', 'notifier']) expect(nodeOptions[name]).toBe(shared);
    expect(readFileSync(join(root, 'Dockerfile'), 'utf8')).toContain(`ENV NODE_OPTIONS="${shared}"`);
    const env = readFileSync(join(root, 'infra', 'scale', 'service.env'), 'utf8');
    expect(env).toMatch(new RegExp(`^NODE_OPTIONS=${shared}$`, 'm'));
    expect(env).toMatch(new RegExp(`^#\\s+NODE_OPTIONS=${nodeOptions['ledger']}$`, 'm'));
  });
});

describe('infra/scale/service.env connects each process with its own credentials file', () => {
  const text = readFileSync(join(root, 'infra', 'scale', 'service.env'), 'utf8');
  const env = Object.fromEntries(
    text
      .split('\n')
      .filter((line) => /^[A-Z_]+=/.test(line))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );

  it('sets only variables the configuration schema knows, and valid values once a process adds its port and credentials', () => {
    expect(Object.keys(env).filter((key) => !knownVariables.has(key))).toEqual([]);
    const perProcess = { ...env, HTTP_PORT: '7101', NATS_CREDS: '/etc/baton/nats/router.creds' };
    expect(ServiceConfigSchema.safeParse(perProcess).success).toBe(true);
    expect(() => checkNatsAuth(ServiceConfigSchema.parse(perProcess), 'router')).not.toThrow();
  });

  it('names no NATS user or password: plain URLs, and NATS_CREDS set per process', () => {
    expect(env['BATON_NATS_AUTH']).toBe('creds');
    for (const url of env['NATS_URL']!.split(',')) expect(url).toMatch(/^nats:\/\/[^@/]+:4222$/);
    expect(env['NATS_USER']).toBeUndefined();
    expect(env['NATS_PASSWORD']).toBeUndefined();
    expect(text).toMatch(/^#\s+NATS_CREDS=\S+\.creds\b/m);
    expect(text).not.toContain('permissions/');
  });
});

describe('infra/scale asks every Redis for a password, as docker-compose.yml does', () => {
  const scale = (...parts: string[]) => readFileSync(join(root, 'infra', 'scale', ...parts), 'utf8');
  const envFile = (text: string) =>
    Object.fromEntries(
      text
        .split('\n')
        .filter((line) => /^[A-Z_]+=/.test(line))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );

  it('service.env gives the password in REDIS_URL, and the schema takes it (the placeholder replaced as the file says)', () => {
    const env = envFile(scale('service.env')) as Record<string, string>;
    const url = new URL(env['REDIS_URL']!);
    expect(url.password).toBe('CHANGE_ME');
    // NATS_CREDS and HTTP_PORT are set per process (the file says so).
    const real = { ...env, REDIS_URL: env['REDIS_URL']!.replace('CHANGE_ME', 'f'.repeat(64)), NATS_CREDS: '/etc/baton/nats/notifier.creds', HTTP_PORT: '7100' };
    expect(ServiceConfigSchema.safeParse(real).error?.issues ?? []).toEqual([]);
  });

  it('each Redis asks for it and gives it to its primary; Sentinel and HAProxy authenticate with it', () => {
    const replica = scale('redis', 'redis-replica.conf');
    expect(replica).toMatch(/^requirepass CHANGE_ME$/m);
    expect(replica).toMatch(/^masterauth CHANGE_ME$/m);
    const monitored = /^sentinel monitor (\S+) /m.exec(scale('redis', 'sentinel.conf'))?.[1];
    expect(scale('redis', 'sentinel.conf')).toMatch(new RegExp(`^sentinel auth-pass ${monitored} CHANGE_ME$`, 'm'));
    // HAProxy's health check: AUTH (from its environment) before anything else it sends.
    const checks = scale('redis', 'haproxy.cfg')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line.startsWith('tcp-check send'));
    expect(checks[0]).toBe('tcp-check send "AUTH ${REDIS_PASSWORD}\\r\\n"');
  });
});
