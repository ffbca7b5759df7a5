import { InboxWhys } from '@baton/projections';
import { inboxPage } from './inbox-page';

describe('the console inbox page', () => {
  it('offers every why the API filters by, an escalation`s offer_given_up among them (the list is the API`s own)', () => {
    const page = inboxPage({ ctx: { principal: null, csrf: null }, filters: {}, query: '', items: [], nextCursor: null });
    const select = /<select[^>]*name="why"[^>]*>([\s\S]*?)<\/select>/.exec(page)?.[1] ?? '';
    const offered = [...select.matchAll(/<option value="([^"]*)"/g)].map((m) => m[1]).filter((v) => v !== '');
    expect(offered).toEqual([...InboxWhys]);
    expect(offered).toEqual(expect.arrayContaining(['offer_given_up', 'lease_expired', 'rework', 'hold', 'human_gate', 'circuit_open']));
  });
});
