const { preset } = require('../jest.preset');

module.exports = preset('test', { displayName: 'e2e', testMatch: ['**/*.e2e-spec.ts'], testTimeout: 120000 });
