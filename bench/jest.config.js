const { preset } = require('../jest.preset');

module.exports = preset('bench', { displayName: 'bench' });
