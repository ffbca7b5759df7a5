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

// The message edge: only the event-store library (libs/eventstore, the edge library) and the Nest
// transport import the NATS client. Everything else uses the edge's functions and types
// (NatsHandle, NatsJetStream, subscribeCore, openKvBucket...), so replacing the client with the
// modular @nats-io/* line touches those two places. Test files may use the client directly.
const NATS_CLIENT_MESSAGE = 'Only libs/eventstore (the message edge) and libs/platform/src/transport import the NATS client: use @baton/eventstore (NatsHandle, NatsJetStream, NatsHeaders, headersFrom, subscribeCore, watchEvents, openKvBucket, newUniqueId, orderedConsumerOptions...).';
const NATS_EDGE = ['libs/eventstore/src/**', 'libs/platform/src/transport/**'];
const TEST_FILES = ['**/*.spec.ts', '**/*.int-spec.ts', '**/*.e2e-spec.ts', 'test/**'];
const natsImportRestriction = {
  paths: [{ name: 'nats', message: NATS_CLIENT_MESSAGE }],
  patterns: [{ group: ['@nats-io/*'], message: NATS_CLIENT_MESSAGE }],
};
// Type-position `import('nats')`, dynamic `import('nats')` and `require('nats')` count too.
const natsSyntaxRestriction = [
  { selector: "TSImportType[argument.literal.value=/^(nats|@nats-io.+)$/]", message: NATS_CLIENT_MESSAGE },
  { selector: "ImportExpression[source.value=/^(nats|@nats-io.+)$/]", message: NATS_CLIENT_MESSAGE },
  { selector: "CallExpression[callee.name='require'][arguments.0.value=/^(nats|@nats-io.+)$/]", message: NATS_CLIENT_MESSAGE },
];

// The one poll-until-ready helper (libs/wait, type:util) is for tests only: every project's test
// files may import it whatever their layer (the `allow` below), nothing else may (libs/testing
// re-exports it to test/, bench/ and the demo). The typescript-eslint twin of no-restricted-imports
// carries this so that it does not replace the NATS and SDK restrictions on the same files.
const WAIT_USERS = [...TEST_FILES, '**/int/**'];
const WAIT_MESSAGE = '@baton/wait (waitFor) is for test files (*.spec.ts, *.int-spec.ts, **/int/**, test/**); libs/testing re-exports it.';

const depConstraints = [
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
  { sourceTag: 'type:testing', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:definitions', 'type:infra', 'type:sdk', 'type:util'] },
  // Production apps (the four services, the CLI) never depend on the test helpers.
  { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:definitions', 'type:infra', 'type:sdk'] },
  {
    // The demo and the bench drive a running platform from outside, as the tests do.
    sourceTag: 'type:tool',
    onlyDependOnLibsWithTags: ['type:contracts', 'type:domain', 'type:definitions', 'type:infra', 'type:sdk', 'type:testing'],
  },
  { sourceTag: 'type:e2e', onlyDependOnLibsWithTags: ['*'] },
  // libs/wait depends on nothing, not even a Node module.
  { sourceTag: 'type:util', onlyDependOnLibsWithTags: [], bannedExternalImports: ['*'] },
];
const moduleBoundaries = (allow) => ['error', { enforceBuildableLibDependency: false, allow, depConstraints }];

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
      '@nx/enforce-module-boundaries': moduleBoundaries([]),
    },
  },
  {
    // Test files of any layer may import @baton/wait (see WAIT_USERS above).
    files: WAIT_USERS,
    rules: { '@nx/enforce-module-boundaries': moduleBoundaries(['@baton/wait']) },
  },
  {
    // ...and nothing else may.
    files: ['**/*.ts'],
    ignores: [...WAIT_USERS, 'libs/testing/src/**'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', { paths: [{ name: '@baton/wait', message: WAIT_MESSAGE }] }] },
  },
  {
    // The NATS client stays behind the message edge (see NATS_EDGE above).
    files: ['**/*.ts'],
    ignores: [...NATS_EDGE, ...TEST_FILES],
    rules: {
      'no-restricted-imports': ['error', natsImportRestriction],
      'no-restricted-syntax': ['error', ...natsSyntaxRestriction],
    },
  },
  {
    // An agent microservice that depends on the SDK loads none of the services' platform: no
    // @baton/platform (NestJS, prom-client), no Redis (libs/sdk/src/boundary.spec.ts proves it at runtime).
    files: ['libs/sdk/src/**/*.ts'],
    ignores: TEST_FILES,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...natsImportRestriction.paths,
            { name: '@baton/platform', message: 'The SDK imports nothing from @baton/platform (NestJS, prom-client): use @baton/eventstore and @baton/contracts.' },
            { name: '@baton/projections', message: 'The SDK does not load the Redis projections.' },
            { name: 'prom-client', message: 'The SDK loads no metrics library.' },
            { name: 'ioredis', message: 'The SDK loads no Redis client.' },
          ],
          patterns: [...natsImportRestriction.patterns, { group: ['@nestjs/*', '@opentelemetry/sdk-*'], message: 'The SDK loads no NestJS and no OpenTelemetry SDK.' }],
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
        ...natsSyntaxRestriction,
      ],
    },
  },
  {
    files: ['**/*.spec.ts', '**/*.int-spec.ts', 'test/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
  {
    // Type-aware rules: a promise is awaited, returned, handled or explicitly `void`ed, and never
    // handed to something that does not await it (an event listener, a Nest lifecycle hook...).
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: __dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
];
