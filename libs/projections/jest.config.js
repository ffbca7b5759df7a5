const { preset } = require('../../jest.preset');

module.exports = preset('libs/projections', { displayName: 'projections' });
