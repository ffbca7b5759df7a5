import { inboxParts, inboxPrefixOf, mayReplyTo, Principals } from './principal';

describe('reply inbox prefixes', () => {
  it('inboxParts reads back what inboxPrefixOf writes (and a permission pattern under it); anything else is null', () => {
    expect(inboxParts(inboxPrefixOf('baton', Principals.agent('acme', 'support')))).toEqual({ prefix: 'baton', principal: 'agent.acme.support' });
    expect(inboxParts(`${inboxPrefixOf('stg', Principals.service('ledger'))}.>`)).toEqual({ prefix: 'stg', principal: 'svc.ledger.>' });
    expect(inboxParts('_INBOX.>')).toBeNull();
    expect(inboxParts('baton.in.acme.>')).toBeNull();
    expect(inboxParts('_INBOX_baton')).toBeNull();
  });

  it('mayReplyTo: a request is answered only under its sender`s own inbox (op.notifier: the notifier`s; op.admin: anywhere)', () => {
    const agent = Principals.agent('acme', 'support');
    expect(mayReplyTo('baton', agent, '_INBOX_baton.agent.acme.support.abc.1')).toBe(true);
    for (const reply of [
      '_INBOX_baton.agent.acme.support',
      '_INBOX_baton.agent.acme.supportx.1',
      '_INBOX_baton.agent.globex.support.1',
      '_INBOX_baton.svc.ledger.1',
      '_INBOX.abc',
      '$JS.API.STREAM.PURGE.BATON_EVENTS',
      'baton.in.globex.answer',
      'baton.ev.globex.run.r1',
    ]) {
      expect({ reply, allowed: mayReplyTo('baton', agent, reply) }).toEqual({ reply, allowed: false });
    }
    expect(mayReplyTo('baton', Principals.service('router'), '_INBOX_baton.svc.router.x')).toBe(true);
    expect(mayReplyTo('baton', Principals.service('router'), '_INBOX_baton.svc.watchdog.x')).toBe(false);
    expect(mayReplyTo('baton', Principals.operator('notifier'), '_INBOX_baton.svc.notifier.x')).toBe(true);
    expect(mayReplyTo('baton', Principals.operator('notifier'), '_INBOX_baton.op.notifier.x')).toBe(false);
    expect(mayReplyTo('baton', Principals.operator('admin'), '_INBOX.anything')).toBe(true);
    // The admin speaking on an agent's subject (it may publish anything) is answered on its own inbox.
    expect(mayReplyTo('baton', agent, '_INBOX_baton.op.admin.x.1')).toBe(true);
    expect(mayReplyTo('baton', agent, '_INBOX_baton.op.adminx.1')).toBe(false);
    expect(mayReplyTo('baton', agent, '_INBOX_baton.agent.acme.support.>')).toBe(false);
    expect(mayReplyTo('baton', Principals.operator('admin'), '_INBOX.*')).toBe(false);
  });
});
