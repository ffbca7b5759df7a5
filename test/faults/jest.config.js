const { preset } = require('../../jest.preset');

// The fault suite: real processes (the four services from dist), our own nats-server and
// redis-server processes on free loopback ports. Run with `npm run test:faults` (builds first).
module.exports = preset('test/faults', {
  displayName: 'faults',
  testMatch: ['**/*.fault-spec.ts'],
  testTimeout: 240000,
  maxWorkers: 1,
});
