const { preset } = require('../../jest.preset');

module.exports = preset('libs/definitions', { displayName: 'definitions' });
