const { preset } = require('../../jest.preset');

module.exports = preset('libs/testing', { displayName: 'testing' });
