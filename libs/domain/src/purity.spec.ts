import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * The domain library is pure: it may import only zod, its own files and @baton/contracts, and it
 * never reads the clock, randomness, the environment or timers. This test fails the build when a
 * file breaks that rule (the ESLint module-boundary rule says the same at lint time).
 */
const roots = [join(__dirname), join(__dirname, '..', '..', 'contracts', 'src')];
const allowedImports = [/^zod$/, /^@baton\/contracts$/, /^\.{1,2}\//];
const forbiddenCalls = [
  /\bDate\.now\s*\(/,
  /\bnew Date\s*\(\s*\)/,
  /\bMath\.random\s*\(/,
  /\bprocess\./,
  /\bsetTimeout\s*\(/,
  /\bsetInterval\s*\(/,
  /\bsetImmediate\s*\(/,
  /\bfetch\s*\(/,
  /\brequire\s*\(/,
  /\bcrypto\./,
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'testing' ? [] : sourceFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.spec.ts') && !name.endsWith('.int-spec.ts') ? [path] : [];
  });
}

function stripComments(code: string): string {
  return code.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
}

describe('domain purity (decisions are pure: time and ids arrive in commands)', () => {
  const files = roots.flatMap(sourceFiles);

  it('finds the files it guards', () => {
    expect(files.length).toBeGreaterThan(3);
  });

  it.each(files.map((f) => [relative(join(__dirname, '..', '..'), f), f]))('%s imports nothing with side effects', (_name, file) => {
    const code = stripComments(readFileSync(file, 'utf8'));
    const imports = [...code.matchAll(/(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/g)].map((m) => m[1]!);
    const bad = imports.filter((spec) => !allowedImports.some((re) => re.test(spec)));
    expect(bad).toEqual([]);
  });

  it.each(files.map((f) => [relative(join(__dirname, '..', '..'), f), f]))('%s never reads the clock, randomness or the process', (_name, file) => {
    const code = stripComments(readFileSync(file, 'utf8')).replace(/(['"`])(?:\\.|(?!\1).)*\1/g, '""');
    const hits = forbiddenCalls.filter((re) => re.test(code)).map(String);
    expect(hits).toEqual([]);
  });

  it('the guard itself catches an impure line', () => {
    const sample = "import { connect } from 'nats';\nconst t = Date.now();";
    const imports = [...sample.matchAll(/(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]/g)].map((m) => m[1]!);
    expect(imports.filter((spec) => !allowedImports.some((re) => re.test(spec)))).toEqual(['nats']);
    expect(forbiddenCalls.some((re) => re.test(sample))).toBe(true);
  });
});
