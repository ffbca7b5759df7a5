// Lint rules for the whole workspace. The module-boundary rule is how Baton keeps its layers honest:
// contracts depend on nothing of ours, the domain only on contracts and never on anything that does
// I/O, infrastructure never on apps. Domain purity is also proven by libs/domain/src/purity.spec.ts.
const js = require('@eslint/js');
const tseslint = require('typescript-eslint');
const nx = require('@nx/eslint-plugin');

const ioModules = [
  'fs', 'node:fs', 'fs/promises', 'node:fs/promises', 'net', 'node:net', 'http', 'node:http', 'https',
  'node:https', 'child_process', 'node:child_process', 'dgram', 'node:dgram', 'dns', 'node:dns', 'tls',
  'node:tls', 'worker_threads', 'node:worker_threads', 'cluster', 'node:cluster', 'os', 'node:os',
  'nats', '@nats-io/*', 'ioredis', '@nestjs/*', 'express', 'timers', 'node:timers', 'perf_hooks', 'node:perf_hooks',
];

module.exports = [
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', '.nx/**', '**/*.js', 'var/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    plugins: { '@nx': nx },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'off',
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          allow: [],
          depConstraints: [
            { sourceTag: 'type:contracts', onlyDependOnLibsWithTags: ['type:contracts'], bannedExternalImports: ioModules },
            {
              sourceTag: 'type:domain',
              onlyDependOnLibsWithTags: ['type:contracts', 'type:domain'],
              bannedExternalImports: ioModules,
            },
            {
              // The definition compiler: pure like the domain, but it may parse YAML.
              sourceTag: 'type:definitions',
              onlyDependOnLibsWithTags: ['type:contracts', 'type:domain'],
              bannedExternalImports: ioModules,
            },
            { sourceTag: 'type:infra', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:definitions', 'type:infra'] },
            { sourceTag: 'type:sdk', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:definitions', 'type:infra'] },
            // Test helpers and the demo scenarios (libs/testing): only the test suites, the bench and the demo use them.
            { sourceTag: 'type:testing', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:definitions', 'type:infra', 'type:sdk'] },
            // Production apps (the four services, the CLI) never depend on the test helpers.
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:definitions', 'type:infra', 'type:sdk'] },
            {
              // The demo and the bench drive a running platform from outside, as the tests do.
              sourceTag: 'type:tool',
              onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:definitions', 'type:infra', 'type:sdk', 'type:testing'],
            },
            { sourceTag: 'type:e2e', onlyDependOnLibsWithTags: ['*'] },
          ],
        },
      ],
    },
  },
  {
    // The domain never reads the clock, randomness or the process: time and ids arrive in commands.
    files: ['libs/domain/src/**/*.ts', 'libs/contracts/src/**/*.ts'],
    ignores: ['**/*.spec.ts', '**/*.int-spec.ts', 'libs/contracts/scripts/**'],
    rules: {
      'no-restricted-globals': ['error', 'process', 'setTimeout', 'setInterval', 'setImmediate', 'fetch', 'require'],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'The domain is pure: take time from the command.' },
        { object: 'Math', property: 'random', message: 'The domain is pure: take ids from the command.' },
        { object: 'crypto', property: 'randomUUID', message: 'The domain is pure: take ids from the command.' },
      ],
      'no-restricted-syntax': [
        'error',
        { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'The domain is pure: take time from the command.' },
      ],
    },
  },
  {
    files: ['**/*.spec.ts', '**/*.int-spec.ts', 'test/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
];
