import fc from 'fast-check';
import { HumanActionNoticeSchema } from '@baton/contracts';
import { hasLiveMention, neutralizeMentions, ZERO_WIDTH_SPACE } from './mentions';
import { buildHumanActionNotice, renderNotice, selectNoticeRecipient } from './notice';

describe('seed 000 §5 engine-owned human notification: agents never ping a human', () => {
  it.each([
    ['@alice please look', `@${ZERO_WIDTH_SPACE}alice please look`],
    ['cc @@alice', `cc @${ZERO_WIDTH_SPACE}@${ZERO_WIDTH_SPACE}alice`],
    ['ping @org/team', `ping @${ZERO_WIDTH_SPACE}org/team`],
    ['@here and @channel', `@${ZERO_WIDTH_SPACE}here and @${ZERO_WIDTH_SPACE}channel`],
    ['slack <@U123> <!here>', `slack <@${ZERO_WIDTH_SPACE}U123> <${ZERO_WIDTH_SPACE}!here>`],
    ['full width ＠alice', `full width ＠${ZERO_WIDTH_SPACE}alice`],
    ['unicode @José', `unicode @${ZERO_WIDTH_SPACE}José`],
  ])('agent text is made notification-inert: %j', (input, expected) => {
    const out = neutralizeMentions(input);
    expect(out).toBe(expected);
    expect(hasLiveMention(out)).toBe(false);
    expect(hasLiveMention(input)).toBe(true);
  });

  it('text without mentions is left as written (a lone @ or "a @ b" is not a mention)', () => {
    expect(neutralizeMentions('cost 5 @ 3, a @ b')).toBe('cost 5 @ 3, a @ b');
  });

  it('neutralising is idempotent and leaves no live mention in any text', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('@', '＠', '<', '!', 'a', 'é', '_', ' ', '-', '[', '\u200b') }), (text) => {
        const once = neutralizeMentions(text);
        expect(hasLiveMention(once)).toBe(false);
        expect(neutralizeMentions(once)).toBe(once);
        // Only zero-width spaces were added: the visible text is unchanged.
        expect(once.split(ZERO_WIDTH_SPACE).join('')).toBe(text.split(ZERO_WIDTH_SPACE).join(''));
      }),
    );
  });
});

describe('seed 000 §5 notice recipient: the workflow starter, falling back to the issue author and then the trigger author', () => {
  it('started_by first', () => {
    expect(selectNoticeRecipient({ started_by: 'sam', issue_author: 'ivy', trigger_author: 'tom' })).toEqual({ handle: 'sam', source: 'started_by' });
  });
  it('then the issue author', () => {
    expect(selectNoticeRecipient({ started_by: null, issue_author: 'ivy', trigger_author: 'tom' })).toEqual({ handle: 'ivy', source: 'issue_author' });
  });
  it('then the trigger author', () => {
    expect(selectNoticeRecipient({ started_by: null, issue_author: null, trigger_author: 'tom' })).toEqual({ handle: 'tom', source: 'trigger_author' });
  });
  it('nobody known → null (start_run refuses such a run)', () => {
    expect(selectNoticeRecipient({ started_by: null, issue_author: null, trigger_author: null })).toBeNull();
  });
});

describe('HumanActionNotice', () => {
  const input = {
    noticeId: 'nt-r-1',
    project: 'demo',
    workflowRunId: 'wr-1',
    reason: 'hold',
    recipient: { handle: 'sam', source: 'started_by' },
    headline: 'no-action default: agent emitted no decision',
    agentText: 'Done. @bob and @@carol should review. <!channel>',
    step: 'context',
    agent: 'context',
    now: '2025-01-01T00:00:00.000Z',
  } as const;
  const notice = buildHumanActionNotice(input);

  it('the excerpt is cut to 600 characters as the caps count them (an emoji is one), then …', () => {
    const long = buildHumanActionNotice({ ...input, noticeId: 'nt-r-3', headline: 'held', agentText: `d${'😀'.repeat(700)}` });
    expect(long.agent_excerpt).toBe(`d${'😀'.repeat(599)}…`);
  });

  it('is a valid notice whose agent excerpt holds no live mention', () => {
    expect(HumanActionNoticeSchema.parse(notice)).toEqual(notice);
    expect(hasLiveMention(notice.agent_excerpt ?? '')).toBe(false);
  });

  it('the headline is one line whatever the reason quotes, and every line of the excerpt stays quoted in the rendered text', () => {
    const broken = buildHumanActionNotice({
      noticeId: 'nt-r-2',
      project: 'demo',
      workflowRunId: 'wr-1',
      reason: 'stop',
      recipient: { handle: 'sam', source: 'started_by' },
      headline: 'run stopped (policy): line1\nline2\r\nline3\u2028line4\u2029\u0085line5\rline6',
      agentText: 'first\r\nsecond\u2028third\rfourth',
      step: 'a',
      agent: 'a',
      now: '2025-01-01T00:00:00.000Z',
    });
    expect(broken.headline).toBe('run stopped (policy): line1 line2 line3 line4 line5 line6');
    const lines = renderNotice(broken).split('\n');
    expect(lines).toEqual([`@sam — this run needs you (stop): ${broken.headline}`, '', '> first', '> second', '> third', '> fourth']);
  });

  it('control characters that steer a display are removed from the headline and excerpt (terminal escapes, NUL, bell, bidi overrides); tabs and line breaks are kept as before', () => {
    const steered = buildHumanActionNotice({
      ...input,
      noticeId: 'nt-r-4',
      headline: 'stop: \u0007\u001b[31mred\u0000 text',
      agentText: 'pay \u202eoot\u202c now\tplease\nthen \u0085next \u009b2J\u2066x\u2069',
    });
    expect(steered.headline).toBe('stop: [31mred text');
    expect(steered.agent_excerpt).toBe('pay oot now\tplease\nthen \u0085next 2Jx');
    expect(HumanActionNoticeSchema.parse(steered)).toEqual(steered);
  });

  it('renders with exactly one live mention: the recipient', () => {
    const text = renderNotice(notice);
    const live = [...text.matchAll(/@(?=[\p{L}\p{N}_[@-])/gu)];
    expect(live).toHaveLength(1);
    expect(text.startsWith('@sam ')).toBe(true);
  });
});
