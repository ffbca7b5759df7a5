const { preset } = require('../../jest.preset');

module.exports = preset('libs/contracts', { displayName: 'contracts' });
