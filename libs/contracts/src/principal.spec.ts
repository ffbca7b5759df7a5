import { inboxParts, inboxPrefixOf, Principals } from './principal';

describe('reply inbox prefixes', () => {
  it('inboxParts reads back what inboxPrefixOf writes (and a permission pattern under it); anything else is null', () => {
    expect(inboxParts(inboxPrefixOf('baton', Principals.agent('acme', 'support')))).toEqual({ prefix: 'baton', principal: 'agent.acme.support' });
    expect(inboxParts(`${inboxPrefixOf('stg', Principals.service('ledger'))}.>`)).toEqual({ prefix: 'stg', principal: 'svc.ledger.>' });
    expect(inboxParts('_INBOX.>')).toBeNull();
    expect(inboxParts('baton.in.acme.>')).toBeNull();
    expect(inboxParts('_INBOX_baton')).toBeNull();
  });
});
