const { preset } = require('../../jest.preset');

module.exports = preset('apps/demo', { displayName: 'demo' });
