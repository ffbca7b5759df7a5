#!/usr/bin/env node
/*
 * Packs the agent SDK as an npm package an agent microservice outside this repository installs:
 *
 *   npm run pack:sdk                       # → dist/packages/baton-sdk-<version>.tgz
 *   node scripts/pack-sdk.js --out <dir>   # the tarball (and the staged package, <dir>/sdk) elsewhere
 *
 * Inside the monorepo `@baton/sdk` is a path alias; the SDK's compiled files require the contracts,
 * the domain's deciders and the message-edge library by relative path (swc rewrites the aliases).
 * The package holds exactly the files the SDK's entry reaches — followed `require` by `require` from
 * `libs/sdk/src/index.js`, nothing of the services' platform — with their TypeScript declarations
 * (followed import by import from `libs/sdk/src/index.d.ts`, the `@baton/*` aliases rewritten to
 * relative paths), the SDK's README, and a package.json whose dependencies are the third-party
 * packages those files require, at the versions this repository pins. A file requiring a package
 * the manifest would not declare stops the pack (exit 1): the tarball installs on its own or is
 * not made.
 *
 * Prints one JSON line on stdout: { tarball, staged, name, version, files, dependencies }.
 */
'use strict';

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..');
const rootPackage = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
/** The libraries the SDK is compiled from: its own and everything its entry may reach. */
const LIBS = ['contracts', 'domain', 'eventstore', 'sdk'];
const ENTRY = 'libs/sdk/src/index';

function fail(message) {
  process.stderr.write(`pack-sdk: ${message}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  let out = path.join(root, 'dist', 'packages');
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--out' && argv[i + 1] !== undefined) {
      out = path.resolve(argv[i + 1]);
      i += 1;
    } else if (arg.startsWith('--out=')) {
      out = path.resolve(arg.slice('--out='.length));
    } else {
      process.stderr.write('usage: node scripts/pack-sdk.js [--out <dir>]\n');
      process.exit(2);
    }
  }
  return out;
}

/** `@baton/x` → the repository path of its index, from tsconfig.base.json (the one alias table). */
function aliasTable() {
  const base = JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.base.json'), 'utf8'));
  const table = new Map();
  for (const [alias, targets] of Object.entries(base.compilerOptions.paths)) {
    table.set(alias, targets[0].replace(/\.ts$/, ''));
  }
  return table;
}

/** Resolves a relative specifier the way Node does for these files: `x.js`, `x/index.js`, or `x` itself. */
function resolveFile(from, specifier, suffix) {
  const base = path.resolve(path.dirname(from), specifier);
  for (const candidate of [base + suffix, path.join(base, 'index' + suffix), base]) {
    if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}

/** The package name a bare specifier names (`@scope/name/sub` → `@scope/name`). */
function packageOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/**
 * Every file reachable from `entry` through `pattern`'s specifiers; bare specifiers (not `node:`
 * built-ins) are collected as packages. `onFile`, when given, returns the text to scan (and may rewrite it).
 */
function closure(entry, pattern, suffix, onFile) {
  const files = new Set();
  const packages = new Set();
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop();
    if (files.has(file)) continue;
    files.add(file);
    const text = onFile ? onFile(file) : fs.readFileSync(file, 'utf8');
    for (const match of text.matchAll(pattern)) {
      const specifier = match[1] ?? match[2];
      if (specifier.startsWith('.')) {
        const target = resolveFile(file, specifier, suffix);
        if (target === undefined) fail(`${path.relative(root, file)}: cannot resolve ${specifier}`);
        pending.push(target);
      } else if (!specifier.startsWith('node:')) {
        if (require('node:module').builtinModules.includes(specifier)) continue;
        packages.add(packageOf(specifier));
      }
    }
  }
  return { files, packages };
}

const REQUIRE = /require\("([^"]+)"\)/g;
const DTS_IMPORT = /(?:from|import)\s+['"]([^'"]+)['"]|import\(['"]([^'"]+)['"]\)/g;

function compileJs(work) {
  const out = path.join(work, 'js');
  execFileSync(
    path.join(root, 'node_modules', '.bin', 'swc'),
    [...LIBS.map((lib) => `libs/${lib}/src`), '-d', out, '--config-file', '.swcrc', '--ignore', '**/*.spec.ts,**/*.int-spec.ts', '--quiet'],
    { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return out;
}

function compileTypes(work) {
  const out = path.join(work, 'types');
  const config = path.join(work, 'tsconfig.pack.json');
  fs.writeFileSync(
    config,
    JSON.stringify({
      extends: path.join(root, 'tsconfig.base.json'),
      compilerOptions: {
        declaration: true,
        emitDeclarationOnly: true,
        noEmit: false,
        sourceMap: false,
        outDir: out,
        rootDir: root,
        types: ['node'],
        typeRoots: [path.join(root, 'node_modules', '@types')],
      },
      files: [path.join(root, `${ENTRY}.ts`)],
    }),
  );
  try {
    execFileSync(path.join(root, 'node_modules', '.bin', 'tsc'), ['-p', config], { cwd: root, stdio: 'pipe' });
  } catch (error) {
    fail(`declarations did not compile:\n${String(error.stdout ?? '')}${String(error.stderr ?? '')}`);
  }
  return out;
}

function main() {
  const outDir = parseArgs(process.argv.slice(2));
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-pack-sdk-'));
  try {
    const jsRoot = compileJs(work);
    const typesRoot = compileTypes(work);
    const aliases = aliasTable();

    const js = closure(path.join(jsRoot, `${ENTRY}.js`), REQUIRE, '.js');
    // Declarations name the libraries by alias: rewrite each to a relative path before following it.
    const rewritten = new Map();
    const types = closure(path.join(typesRoot, `${ENTRY}.d.ts`), DTS_IMPORT, '.d.ts', (file) => {
      const text = fs.readFileSync(file, 'utf8').replace(/(['"])(@baton\/[a-z-]+)\1/g, (whole, quote, alias) => {
        const target = aliases.get(alias);
        if (target === undefined) fail(`${path.relative(typesRoot, file)}: unknown alias ${alias}`);
        let relative = path.relative(path.dirname(file), path.join(typesRoot, target)).split(path.sep).join('/');
        if (!relative.startsWith('.')) relative = `./${relative}`;
        return `${quote}${relative}${quote}`;
      });
      rewritten.set(file, text);
      return text;
    });

    const dependencies = {};
    const declared = rootPackage.dependencies ?? {};
    for (const name of [...new Set([...js.packages, ...types.packages])].sort()) {
      if (declared[name] === undefined) {
        fail(`the SDK's files require ${name}, which the repository's package.json does not list as a dependency`);
      }
      dependencies[name] = declared[name];
    }

    const staged = path.join(outDir, 'sdk');
    fs.rmSync(staged, { recursive: true, force: true });
    const copy = (from, fromRoot, text) => {
      const to = path.join(staged, path.relative(fromRoot, from));
      fs.mkdirSync(path.dirname(to), { recursive: true });
      // The source maps stay behind (they point at sources the package does not hold): so do their comments.
      if (text === undefined && from.endsWith('.js')) fs.writeFileSync(to, fs.readFileSync(from, 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n'));
      else if (text === undefined) fs.copyFileSync(from, to);
      else fs.writeFileSync(to, text);
      return path.relative(staged, to).split(path.sep).join('/');
    };
    const files = [
      ...[...js.files].map((file) => copy(file, jsRoot)),
      ...[...types.files].map((file) => copy(file, typesRoot, rewritten.get(file))),
    ].sort();
    // Node finds a CommonJS module's named exports (for `import { … } from '@baton/sdk'` in an ES
    // module) by reading its source; the compiled entry defines them through getters it cannot
    // read, so the entry ends with the plain assignment Node recognises (never run: `0 &&`).
    const entryFile = path.join(staged, `${ENTRY}.js`);
    const names = JSON.parse(
      execFileSync(process.execPath, ['-e', `process.stdout.write(JSON.stringify(Object.keys(require(${JSON.stringify(entryFile)}))))`], {
        env: { PATH: process.env.PATH ?? '', NODE_PATH: path.join(root, 'node_modules') },
        encoding: 'utf8',
      }),
    );
    const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
    const odd = names.filter((name) => !identifier.test(name));
    if (odd.length > 0) fail(`export names that are not identifiers: ${odd.join(', ')}`);
    fs.appendFileSync(
      entryFile,
      `\n// The names an ES module imports (Node reads them from this line; it is never run).\n0 && (module.exports = { ${names.join(', ')} });\n`,
    );

    // The README, with its links to Baton's docs pointing into the package, and the docs it links
    // to: the JSON Schemas (for agents in other languages) and the rules it cites.
    const readme = fs.readFileSync(path.join(root, 'libs', 'sdk', 'README.md'), 'utf8').replace(/\]\(\.\.\/\.\.\/docs\//g, '](docs/');
    fs.writeFileSync(path.join(staged, 'README.md'), readme);
    const docs = path.join(staged, 'docs');
    fs.mkdirSync(path.join(docs, 'schemas'), { recursive: true });
    for (const name of fs.readdirSync(path.join(root, 'docs', 'schemas'))) {
      fs.copyFileSync(path.join(root, 'docs', 'schemas', name), path.join(docs, 'schemas', name));
    }
    // The docs the README cites, and the docs those link to, and so on: every link between them resolves.
    const pending = [...readme.matchAll(/docs\/([a-z-]+\.md)/g)].map((m) => m[1]);
    const shipped = new Set();
    while (pending.length > 0) {
      const name = pending.pop();
      if (shipped.has(name)) continue;
      if (!fs.existsSync(path.join(root, 'docs', name))) fail(`docs/${name} is cited but does not exist`);
      shipped.add(name);
      const text = fs.readFileSync(path.join(root, 'docs', name), 'utf8');
      fs.writeFileSync(path.join(docs, name), text);
      for (const m of text.matchAll(/\]\(([a-z-]+\.md)(?:#[^)]*)?\)/g)) pending.push(m[1]);
    }

    const manifest = {
      name: '@baton/sdk',
      version: rootPackage.version,
      description: 'The typed client agent microservices use to work with Baton: results, runs, offers, claims, meshes.',
      license: rootPackage.license,
      engines: rootPackage.engines,
      main: `${ENTRY}.js`,
      types: `${ENTRY}.d.ts`,
      // One way in: the entry (its declarations, its CommonJS module, which ES modules import too).
      exports: {
        '.': { types: `./${ENTRY}.d.ts`, default: `./${ENTRY}.js` },
        // The JSON Schemas of the messages (for a validator of your own): `@baton/sdk/schemas/agent-result.json`.
        './schemas/*': './docs/schemas/*',
        './package.json': './package.json',
      },
      files: ['libs', 'docs', 'README.md'],
      dependencies,
    };
    fs.writeFileSync(path.join(staged, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

    const packed = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', outDir], { cwd: staged, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' }),
    );
    const tarball = path.join(outDir, packed[0].filename);
    process.stdout.write(
      `${JSON.stringify({ tarball, staged, name: manifest.name, version: manifest.version, files: files.length, dependencies })}\n`,
    );
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main();
