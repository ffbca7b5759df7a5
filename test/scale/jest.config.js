const { preset } = require('../../jest.preset');

// The scale-out test: two processes of every service on one deployment, under load. Run it with
// `npm run test:scale` (builds the services first); it is not part of `npm test`.
module.exports = preset('test/scale', { displayName: 'scale', testMatch: ['**/*.scale-spec.ts'], testTimeout: 240000 });
