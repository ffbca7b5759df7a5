const { preset } = require('../../jest.preset');

module.exports = preset('libs/platform', { displayName: 'platform' });
