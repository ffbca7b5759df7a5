// Shared Jest settings for every Nx project. Tests run TypeScript through @swc/jest with
// legacy decorators and decorator metadata (NestJS needs both); @baton/* resolves to source.
const path = require('node:path');
const root = __dirname;

const libs = ['contracts', 'domain', 'definitions', 'eventstore', 'projections', 'platform', 'sdk', 'testing', 'wait'];

/** How swc compiles the TypeScript sources under test (also used by tests that run sources in a child process). */
const swcOptions = {
  jsc: {
    target: 'es2022',
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: false },
    keepClassNames: true,
  },
  module: { type: 'commonjs' },
};

/** @param {string} projectRoot path relative to the workspace root */
function preset(projectRoot, overrides = {}) {
  return {
    rootDir: path.join(root, projectRoot),
    testEnvironment: 'node',
    testMatch: ['**/*.spec.ts', '**/*.int-spec.ts'],
    transform: {
      '^.+\\.ts$': ['@swc/jest', swcOptions],
    },
    moduleFileExtensions: ['ts', 'js', 'json'],
    moduleNameMapper: Object.fromEntries(
      libs.map((lib) => [`^@baton/${lib}$`, path.join(root, 'libs', lib, 'src', 'index.ts')]),
    ),
    testTimeout: 20000,
    setupFiles: [path.join(root, 'jest.setup-env.js')],
    // In CI a suite whose cleanup failed (an assertion in an afterAll before its connections were
    // closed) must not hold the run until CI's own limit: Jest exits once the tests are done, and
    // says it forced the exit. Locally Jest waits, so a leaked handle is seen.
    forceExit: process.env.CI === 'true',
    ...overrides,
  };
}

module.exports = { preset, swcOptions };
