const { preset } = require('../../jest.preset');

// Browser tests: the four services as processes, driven in headless Chromium (Debian's
// /usr/bin/chromium through playwright-core; no browser download). Needs the services and the CLI
// built first (`npm run test:browser` builds them).
module.exports = preset('test/browser', { displayName: 'browser', testMatch: ['**/*.browser-spec.ts'], testTimeout: 90000 });
