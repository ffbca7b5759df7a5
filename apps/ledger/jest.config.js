const { preset } = require('../../jest.preset');

module.exports = preset('apps/ledger', { displayName: 'ledger' });
