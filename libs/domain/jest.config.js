const { preset } = require('../../jest.preset');

module.exports = preset('libs/domain', { displayName: 'domain' });
