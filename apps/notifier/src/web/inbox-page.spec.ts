import { InboxWhys, type InboxItem } from '@baton/projections';
import { inboxPage, itemCard } from './inbox-page';

describe('the console inbox page', () => {
  it('offers every why the API filters by, an escalation`s offer_given_up among them (the list is the API`s own)', () => {
    const page = inboxPage({ ctx: { principal: null, csrf: null }, filters: { status: 'open' }, query: '', items: [], nextCursor: null });
    const select = /<select[^>]*name="why"[^>]*>([\s\S]*?)<\/select>/.exec(page)?.[1] ?? '';
    const offered = [...select.matchAll(/<option value="([^"]*)"/g)].map((m) => m[1]).filter((v) => v !== '');
    expect(offered).toEqual([...InboxWhys]);
    expect(offered).toEqual(expect.arrayContaining(['offer_given_up', 'lease_expired', 'rework', 'hold', 'human_gate', 'circuit_open']));
  });
  it('a handback whose reviewer gave up on its offer says so on its card: who, and why', () => {
    const item = {
      id: 'handback:acme:hb-1',
      project: 'acme',
      kind: 'handback',
      status: 'open',
      urgency: 2,
      at: 0,
      title: 'Review the return of h-1',
      opened_at: '2026-12-05T00:00:00.000Z',
      handoff_id: 'hb-1',
      offer_given_up_by: 'alice',
      offer_given_up_reason: 'onOffer failed 5 times: <model down>',
    } as unknown as InboxItem;
    const card = itemCard({ kind: 'handback', item, handoff: null }, { principal: null, csrf: null }, '/inbox').toString();
    expect(card).toContain('data-testid="offer-given-up">by alice: onOffer failed 5 times: &lt;model down&gt;</dd>');
  });
  it('a hold whose result left a call pending shows the call, and says which answers hand it on (Reroute only when nothing to continue to)', () => {
    const hold = (pendingTarget: unknown) =>
      ({
        id: 'hold:7:acme:wr-1',
        project: 'acme',
        kind: 'hold',
        status: 'open',
        urgency: 2,
        at: 0,
        title: 'Approve the human gate at s1',
        opened_at: '2026-12-05T00:00:00.000Z',
        workflow_run_id: 'wr-1',
        hold_kind: 'human_gate',
        step: 's1',
        pending_target: pendingTarget,
        pending_call: { name: 'wire', args: { to: 'acct-<1>', usd: 9000 } },
      }) as unknown as InboxItem;
    const gated = itemCard({ kind: 'hold', item: hold({ agent: 'b', step: 's2' }) } as never, { principal: null, csrf: null }, '/inbox').toString();
    expect(gated).toContain('<dt>Pending call</dt>');
    expect(gated).toContain('acct-&lt;1&gt;');
    expect(gated).toContain('Continue or Reroute hands it on (not approved)');
    const nowhere = itemCard({ kind: 'hold', item: hold(null) } as never, { principal: null, csrf: null }, '/inbox').toString();
    expect(nowhere).toContain('Reroute hands it on (not approved)');
    expect(nowhere).not.toContain('Continue or Reroute hands');
    const none = itemCard({ kind: 'hold', item: { ...hold(null), pending_call: undefined } } as never, { principal: null, csrf: null }, '/inbox').toString();
    expect(none).not.toContain('Pending call');
  });
});
