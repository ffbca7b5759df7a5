const { preset } = require('../../jest.preset');

module.exports = preset('libs/eventstore', { displayName: 'eventstore' });
