const { preset } = require('../../jest.preset');

module.exports = preset('apps/cli', { displayName: 'cli' });
