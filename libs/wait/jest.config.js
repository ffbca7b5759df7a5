const { preset } = require('../../jest.preset');

module.exports = preset('libs/wait', { displayName: 'wait' });
