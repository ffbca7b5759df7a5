const { preset } = require('../../jest.preset');

module.exports = preset('apps/router', { displayName: 'router' });
