import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

/*
 * An agent microservice that depends on @baton/sdk loads the SDK, the contracts, the domain's
 * deciders and the message-edge library (@baton/eventstore: the `nats` client, the ledger client,
 * W3C trace context on `@opentelemetry/api`), and nothing of the services' platform: no NestJS, no
 * prom-client, no OpenTelemetry SDK, no Redis client, no Express.
 *
 * The proof compiles the libraries with swc exactly as `npm run build` does (into a temporary
 * directory, not dist/), requires the SDK's entry in a fresh `node` process and lists every module
 * that process loaded (`require.cache`, the same set `module.children` reaches).
 */
const root = join(__dirname, '..', '..', '..');
const libs = ['contracts', 'domain', 'definitions', 'eventstore', 'projections', 'platform', 'sdk'];

/** Modules an agent process must never load because of the SDK. */
const FORBIDDEN: ReadonlyArray<[string, RegExp]> = [
  ['NestJS', /[\\/]node_modules[\\/]@nestjs[\\/]/],
  ['prom-client', /[\\/]node_modules[\\/]prom-client[\\/]/],
  ['OpenTelemetry SDK packages (anything but @opentelemetry/api)', /[\\/]node_modules[\\/]@opentelemetry[\\/](?!api[\\/])/],
  ['ioredis', /[\\/]node_modules[\\/]ioredis[\\/]/],
  ['express', /[\\/]node_modules[\\/]express[\\/]/],
  ['libs/platform', /[\\/]libs[\\/]platform[\\/]/],
  ['libs/projections', /[\\/]libs[\\/]projections[\\/]/],
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.spec.ts') && !name.endsWith('.int-spec.ts') ? [path] : [];
  });
}

describe('the SDK loads no service platform (an agent microservice stays small)', () => {
  let out: string;
  let loaded: string[];

  beforeAll(() => {
    out = mkdtempSync(join(tmpdir(), 'baton-sdk-boundary-'));
    execFileSync(
      join(root, 'node_modules', '.bin', 'swc'),
      [...libs.map((lib) => `libs/${lib}/src`), '-d', out, '--config-file', '.swcrc', '--ignore', '**/*.spec.ts,**/*.int-spec.ts', '--quiet'],
      { cwd: root, stdio: 'pipe' },
    );
    const probe = [
      `require(${JSON.stringify(join(out, 'libs', 'sdk', 'src', 'index.js'))});`,
      // Every module the process holds, and (as a cross-check) every module reachable from the main module's children.
      'const seen = new Set(Object.keys(require.cache));',
      'const walk = (m) => { for (const c of m.children) if (!seen.has(c.filename)) { seen.add(c.filename); walk(c); } };',
      'walk(module);',
      'process.stdout.write(JSON.stringify([...seen]));',
    ].join('\n');
    const stdout = execFileSync(process.execPath, ['-e', probe], {
      cwd: out,
      // The compiled files live outside the workspace: resolve packages from its node_modules.
      env: { PATH: process.env['PATH'] ?? '', NODE_PATH: join(root, 'node_modules') },
      encoding: 'utf8',
    });
    loaded = JSON.parse(stdout) as string[];
  }, 60_000);

  afterAll(() => {
    if (out) rmSync(out, { recursive: true, force: true });
  });

  it('loads the SDK, the edge library and the NATS client (the probe is real)', () => {
    expect(loaded.some((path) => path.endsWith(join('libs', 'sdk', 'src', 'index.js')))).toBe(true);
    expect(loaded.some((path) => path.includes(join('libs', 'eventstore', 'src', 'ledger-client.js')))).toBe(true);
    expect(loaded.some((path) => /[\\/]node_modules[\\/]nats[\\/]/.test(path))).toBe(true);
  });

  it.each(FORBIDDEN)('loads no %s', (_what, pattern) => {
    expect(loaded.filter((path) => pattern.test(path)).map((path) => relative(out, path))).toEqual([]);
  });

  it('imports nothing from @baton/platform in its sources (types included)', () => {
    const offenders = sourceFiles(__dirname).filter((file) =>
      /from\s+['"]@baton\/platform['"]|import\(\s*['"]@baton\/platform['"]\s*\)/.test(readFileSync(file, 'utf8')),
    );
    expect(offenders.map((file) => relative(root, file))).toEqual([]);
  });
});
