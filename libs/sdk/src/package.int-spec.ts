import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { batonStreamNames, batonTopology, connectNats, provision, type NatsHandle } from '@baton/eventstore';

/*
 * `npm run pack:sdk` makes the package an agent microservice outside this repository installs. The
 * proof installs the tarball the way npm lays it out (the package under node_modules/@baton/sdk, its
 * declared dependencies beside it — linked to this repository's copies, so no registry is needed)
 * in a directory outside the repository, then: its manifest declares what its files require; a
 * TypeScript consumer compiles against its declarations (and a wrong call does not); and a plain
 * `node` process there publishes a result through it to a real NATS stream, loading nothing from
 * the repository's libs or dist.
 */
const root = join(__dirname, '..', '..', '..');
const NATS_URL = process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222';

interface Packed {
  tarball: string;
  name: string;
  version: string;
  files: number;
  dependencies: Record<string, string>;
}

describe('the packed SDK (npm run pack:sdk) works outside the repository', () => {
  let work: string;
  let consumer: string;
  let packed: Packed;
  let manifest: { name: string; main: string; types: string; dependencies: Record<string, string> };
  let entries: string[];

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'baton-sdk-package-'));
    const stdout = execFileSync(process.execPath, [join(root, 'scripts', 'pack-sdk.js'), '--out', join(work, 'out')], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    packed = JSON.parse(stdout.trim()) as Packed;
    entries = execFileSync('tar', ['-tzf', packed.tarball], { encoding: 'utf8' }).trim().split('\n');

    consumer = join(work, 'consumer');
    const installed = join(consumer, 'node_modules', '@baton', 'sdk');
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['-xzf', packed.tarball, '-C', installed, '--strip-components=1']);
    manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as typeof manifest;
    for (const name of Object.keys(manifest.dependencies)) {
      const link = join(consumer, 'node_modules', ...name.split('/'));
      mkdirSync(dirname(link), { recursive: true });
      symlinkSync(join(root, 'node_modules', ...name.split('/')), link, 'dir');
    }
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'an-agent', private: true }));
  }, 120_000);

  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('holds the SDK, the libraries it reaches and their declarations, and declares exactly the packages they require', () => {
    const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string; dependencies: Record<string, string> };
    expect(manifest.name).toBe('@baton/sdk');
    expect(packed.version).toBe(rootManifest.version);
    expect(manifest.main).toBe('libs/sdk/src/index.js');
    expect(entries).toEqual(
      expect.arrayContaining(['package/libs/sdk/src/index.js', 'package/libs/sdk/src/index.d.ts', 'package/README.md', 'package/package.json']),
    );
    // The message edge and the contracts come along; nothing of the services' platform does.
    expect(entries).toEqual(expect.arrayContaining(['package/libs/eventstore/src/ledger-client.js', 'package/libs/contracts/src/agent-result.d.ts']));
    expect(entries.filter((e) => /libs\/(platform|projections|testing|definitions)\/|\.spec\.|\.map$/.test(e))).toEqual([]);
    // The docs its README links to travel with it (other languages read the JSON Schemas).
    expect(entries).toEqual(expect.arrayContaining(['package/docs/schemas/agent-result.json', 'package/docs/errors.md']));
    const readme = execFileSync('tar', ['-xzOf', packed.tarball, 'package/README.md'], { encoding: 'utf8' });
    expect(readme).not.toContain('](../../');
    expect(readme).toContain('](docs/errors.md)');
    // Every link between the shipped docs lands on a shipped doc.
    const shippedDocs = new Set(entries.filter((e) => /^package\/docs\/[a-z-]+\.md$/.test(e)).map((e) => e.slice('package/docs/'.length)));
    const dangling: string[] = [];
    for (const name of shippedDocs) {
      const text = execFileSync('tar', ['-xzOf', packed.tarball, `package/docs/${name}`], { encoding: 'utf8' });
      for (const m of text.matchAll(/\]\(([a-z-]+\.md)(?:#[^)]*)?\)/g)) if (!shippedDocs.has(m[1]!)) dangling.push(`${name} → ${m[1]}`);
    }
    expect(dangling).toEqual([]);
    expect(manifest.dependencies).toEqual({
      '@opentelemetry/api': rootManifest.dependencies['@opentelemetry/api'],
      nats: rootManifest.dependencies['nats'],
      zod: rootManifest.dependencies['zod'],
    });
    // Every alias of the monorepo is gone from the declarations: a consumer has no `@baton/contracts`.
    const aliased = execFileSync('tar', ['-xzOf', packed.tarball, ...entries.filter((e) => e.endsWith('.d.ts'))], { encoding: 'utf8', maxBuffer: 64 << 20 });
    expect(aliased).not.toMatch(/['"]@baton\/(?!sdk)/);
  });

  it('a TypeScript agent compiles against its declarations, and a wrong call does not', () => {
    const tsc = (file: string, source: string, extra: string[] = []) => {
      writeFileSync(join(consumer, file), source);
      return spawnSync(
        process.execPath,
        [
          join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
          '--strict',
          '--esModuleInterop',
          '--module',
          'commonjs',
          '--target',
          'es2022',
          '--noEmit',
          '--typeRoots',
          join(root, 'node_modules', '@types'),
          '--types',
          'node',
          ...extra,
          file,
        ],
        { cwd: consumer, encoding: 'utf8' },
      );
    };
    const good = tsc(
      'agent.ts',
      [
        "import { createBatonClient, decisions, LedgerCommandError, verifyWebhookSignature, type AgentResultInput } from '@baton/sdk';",
        'export async function run(): Promise<void> {',
        "  const agent = await createBatonClient({ project: 'shop', agent: 'coder', requestTimeoutMs: 2000 });",
        '  const subscription = await agent.handoffs({',
        '    concurrency: 2,',
        '    async onOffer(offer) {',
        '      const handoff = await offer.tryClaim({ leaseMs: 60_000 });',
        '      if (!handoff) return;',
        '      const id: string = handoff.id;',
        '      await offer.release(`not mine: ${id}`);',
        '    },',
        '  });',
        "  const result: AgentResultInput = { result_id: 'r1', run_id: 'r', workflow_run_id: 'wr', handoff_id: 'h', claim_id: 'c', body: 'done', decision: decisions.advance('ok') };",
        '  const receipt = await agent.publishResult(result);',
        '  const seq: number = receipt.seq;',
        "  const ok: boolean = verifyWebhookSignature('{}', {}, 'secret').ok;",
        '  void seq; void ok; void LedgerCommandError;',
        '  subscription.stop();',
        '  await agent.close();',
        '}',
        '',
      ].join('\n'),
    );
    expect(`${good.stdout}${good.stderr}`).toBe('');
    expect(good.status).toBe(0);

    // The declarations were checked above; here only the call is (skipLibCheck halves the time).
    const wrong = tsc(
      'wrong.ts',
      "import { decisions, type HandoffOffer } from '@baton/sdk';\nexport const d = decisions.advance(42);\ndeclare const offer: HandoffOffer;\nexport const r = offer.decide('rework');\n",
      ['--skipLibCheck'],
    );
    expect(wrong.status).not.toBe(0);
    expect(wrong.stdout).toMatch(/wrong\.ts\(2,\d+\): error TS2345/);
    // A rework must say what to change: a call without its note does not compile.
    expect(wrong.stdout).toMatch(/wrong\.ts\(4,\d+\): error TS/);
  }, 60_000);

  it('an ES module imports its names (Node reads them from the CommonJS entry), and only the entry is a way in', () => {
    const { NODE_PATH: _ignored, ...env } = process.env;
    const esm = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        [
          "import { createBatonClient, decisions, DelegatedResultError, BatonSdkError, connectNats, AgentResultSchema } from '@baton/sdk';",
          "const error = new DelegatedResultError('h-1', 'wr-1');",
          "process.stdout.write(JSON.stringify({ client: typeof createBatonClient, connect: typeof connectNats, advance: decisions.advance('ok'), sdk: error instanceof BatonSdkError, code: error.code, schema: typeof AgentResultSchema.safeParse }));",
        ].join('\n'),
      ],
      { cwd: consumer, env, encoding: 'utf8' },
    );
    expect(esm.stderr).toBe('');
    expect(JSON.parse(esm.stdout)).toEqual({
      client: 'function',
      connect: 'function',
      advance: { dispatch: { status: 'advance', reason: 'ok' } },
      sdk: true,
      code: 'delegated_handoff',
      schema: 'function',
    });
    // The JSON Schemas are a way in of their own; the package's insides are not an interface: a deep import is refused by its exports map.
    const schema = spawnSync(process.execPath, ['-e', "process.stdout.write(require('@baton/sdk/schemas/agent-result.json').title)"], {
      cwd: consumer,
      env,
      encoding: 'utf8',
    });
    expect(schema.stdout).toBe('agent-result');
    const deep = spawnSync(process.execPath, ['-e', "require('@baton/sdk/libs/eventstore/src/index.js')"], { cwd: consumer, env, encoding: 'utf8' });
    expect(deep.status).not.toBe(0);
    expect(deep.stderr).toContain('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('a plain node process outside the repository publishes a result through it to a real stream', async () => {
    const nats: NatsHandle = await connectNats({ servers: NATS_URL, name: 'sdk-package-int', reconnect: false });
    const prefix = `pk${randomBytes(5).toString('hex')}`;
    const names = batonStreamNames(prefix);
    try {
      await provision(nats.jsm, batonTopology(prefix, { storage: 'memory' }));
      const script = [
        "const sdk = require('@baton/sdk');",
        '(async () => {',
        `  const agent = await sdk.createBatonClient({ natsUrl: ${JSON.stringify(NATS_URL)}, prefix: ${JSON.stringify(prefix)}, project: 'shop', agent: 'coder' });`,
        "  const receipt = await agent.publishResult({ result_id: 'res-1', run_id: 'r', workflow_run_id: 'wr-1', handoff_id: 'h', claim_id: 'c', body: 'done', decision: sdk.decisions.advance('ok') });",
        '  let refused = null;',
        "  try { await agent.publishResult({ result_id: 'res-2', run_id: 'r', workflow_run_id: 'wr-1', handoff_id: 'h', claim_id: 'c', body: 'x', decision: { action: 'nonsense' } }); }",
        '  catch (error) { refused = { name: error.constructor.name, code: error.code, sdkError: error instanceof sdk.BatonSdkError }; }',
        '  await agent.close();',
        '  const outside = Object.keys(require.cache).filter((file) => !file.startsWith(process.cwd()));',
        '  process.stdout.write(JSON.stringify({ receipt, refused, outside }));',
        '})().catch((error) => { console.error(error); process.exit(1); });',
      ].join('\n');
      const { NODE_PATH: _ignored, ...env } = process.env;
      const child = spawnSync(process.execPath, ['-e', script], { cwd: consumer, env, encoding: 'utf8', timeout: 30_000 });
      expect(child.stderr).toBe('');
      const out = JSON.parse(child.stdout) as {
        receipt: { seq: number; duplicate: boolean; stream: string };
        refused: { name: string; code: string; sdkError: boolean };
        outside: string[];
      };
      expect(out.receipt).toMatchObject({ duplicate: false, stream: names.inbox });
      expect(out.refused).toEqual({ name: 'InvalidInputError', code: 'schema_violation', sdkError: true });
      // Loaded from the package and the linked dependencies (which resolve into this repository's
      // node_modules), never from the repository's libs or dist. Node keys its module cache by real
      // path, so a node_modules that is itself a link (a clone sharing another checkout's install)
      // is compared by where it really lies.
      const modules = realpathSync(join(root, 'node_modules'));
      expect(out.outside.filter((file) => !file.startsWith(`${modules}/`))).toEqual([]);

      const stored = await nats.jsm.streams.getMessage(names.inbox, { seq: out.receipt.seq });
      expect(stored.subject).toBe(`${prefix}.in.shop.result.coder`);
      expect(stored.header.get('Nats-Msg-Id')).toBe('result:shop:wr-1/res-1');
      expect(JSON.parse(new TextDecoder().decode(stored.data))).toMatchObject({ project: 'shop', agent: 'coder', result_id: 'res-1', body: 'done' });
    } finally {
      for (const name of [names.events, names.inbox, names.dlq]) await nats.jsm.streams.delete(name).catch(() => undefined);
      await nats.drain();
    }
  }, 60_000);
});
