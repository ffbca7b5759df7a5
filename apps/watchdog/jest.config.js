const { preset } = require('../../jest.preset');

module.exports = preset('apps/watchdog', { displayName: 'watchdog' });
