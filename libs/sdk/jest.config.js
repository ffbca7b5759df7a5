const { preset } = require('../../jest.preset');

module.exports = preset('libs/sdk', { displayName: 'sdk' });
