const { preset } = require('../../jest.preset');

module.exports = preset('apps/notifier', { displayName: 'notifier' });
