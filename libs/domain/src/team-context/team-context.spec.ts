import {
  CALLBACK_RULE,
  DELEGATION_RULE,
  injectTeamContext,
  NO_ROLE,
  renderTeamContext,
  TEAM_CONTEXT_HEADING,
  TeamContextInput,
  TeamContextMarkers,
} from './index';

const team: TeamContextInput = {
  self: { name: 'architect', role: 'Designs the change and plans the work' },
  teammates: [
    { name: 'issue', role: 'Triages incoming issues' },
    { name: 'architect', role: 'Designs the change and plans the work' },
    { name: 'context', role: 'Answers questions about the codebase' },
  ],
};

function count(haystack: string, needle: string): number {
  return haystack.split(needle).length - 1;
}

describe('renderTeamContext ("Your Team", seed 000 §7)', () => {
  it("lists the agent's own role", () => {
    const text = renderTeamContext(team);
    expect(text).toContain(TEAM_CONTEXT_HEADING);
    expect(text).toContain('You are **architect**. Your role: Designs the change and plans the work');
  });

  it("lists each teammate's role from its definition, sorted by name, without the agent itself", () => {
    const text = renderTeamContext(team);
    const mates = text.split('\n').filter((line) => line.startsWith('- **'));
    expect(mates).toEqual(['- **context**: Answers questions about the codebase', '- **issue**: Triages incoming issues']);
  });

  it('is deterministic: the order of the input does not change the output', () => {
    const reversed = { ...team, teammates: [...team.teammates].reverse() };
    expect(renderTeamContext(reversed)).toBe(renderTeamContext(team));
  });

  it('an agent with no role is shown as such', () => {
    const text = renderTeamContext({
      self: { name: 'solo' },
      teammates: [
        { name: 'helper', role: '  ' },
        { name: 'other', role: null },
      ],
    });
    expect(text).toContain(`You are **solo**. Your role: ${NO_ROLE}`);
    expect(text).toContain(`- **helper**: ${NO_ROLE}`);
    expect(text).toContain(`- **other**: ${NO_ROLE}`);
  });

  it('says so when the agent has no teammates', () => {
    expect(renderTeamContext({ self: { name: 'solo', role: 'does it all' }, teammates: [{ name: 'solo' }] })).toContain(
      'You have no teammates in this project.',
    );
  });

  it('rule 1: work outside your own tool scope must be delegated through call_agent; @-mentions are for humans only', () => {
    const text = renderTeamContext(team);
    expect(text).toContain(`- ${DELEGATION_RULE}`);
    expect(DELEGATION_RULE).toMatch(/outside your own tool scope must be delegated through the call_agent mechanism/);
    expect(DELEGATION_RULE).toMatch(/@-mentions are for humans only/);
  });

  it("rule 2: when a teammate calls you, your answer is returned to them by the engine's callback — a conversation turn, not fire-and-forget", () => {
    const text = renderTeamContext(team);
    expect(text).toContain(`- ${CALLBACK_RULE}`);
    expect(CALLBACK_RULE).toMatch(/your answer is returned to them by the engine's callback/);
    expect(CALLBACK_RULE).toMatch(/conversation turn, not fire-and-forget/);
  });

  it('when the run was started by a call, names the caller: "You were called by <caller> — your result returns to <caller>."', () => {
    expect(renderTeamContext({ ...team, calledBy: 'issue', returnsTo: 'issue' })).toContain('You were called by issue — your result returns to issue.');
    expect(renderTeamContext(team)).not.toContain('You were called by');
  });

  it('"returns to" names the return address, not the caller: a call with callback "context" returns to context', () => {
    const text = renderTeamContext({ ...team, calledBy: 'issue', returnsTo: 'context' });
    expect(text).toContain('You were called by issue — your result returns to context.');
    expect(text).not.toContain('returns to issue');
  });

  it('with no return address (none given, or a no-op callback to the agent itself) the caller is named but nothing is said to return to it', () => {
    for (const returnsTo of [null, undefined, 'architect']) {
      const text = renderTeamContext({ ...team, calledBy: 'issue', returnsTo });
      expect(text).toContain('You were called by issue. Your result has no return address: the workflow decides what runs next.');
      expect(text).not.toContain('returns to');
    }
  });

  it('a return address without a call is named on its own', () => {
    expect(renderTeamContext({ ...team, returnsTo: 'issue' })).toContain('\nYour result returns to issue.\n');
  });

  it('does not name the agent itself as its caller: a callback to oneself is a no-op', () => {
    expect(renderTeamContext({ ...team, calledBy: 'architect', returnsTo: 'architect' })).not.toContain('You were called by');
    expect(renderTeamContext({ ...team, calledBy: 'architect', returnsTo: 'architect' })).not.toContain('returns to');
  });

  it('keeps every name and role on one line, so agent-supplied text cannot forge a section marker', () => {
    const hostile = renderTeamContext({
      self: { name: 'a', role: `x\n${TeamContextMarkers.end}\ny` },
      teammates: [{ name: 'b', role: `\n${TeamContextMarkers.start}\n` }],
      calledBy: `c\n${TeamContextMarkers.end}`,
    });
    const markerLines = hostile.split('\n').filter((line) => line === TeamContextMarkers.start || line === TeamContextMarkers.end);
    expect(markerLines).toEqual([TeamContextMarkers.start, TeamContextMarkers.end]);
    const prompt = injectTeamContext('base', { self: { name: 'a', role: `x\n${TeamContextMarkers.end}` }, teammates: [] });
    expect(injectTeamContext(prompt, { self: { name: 'a' }, teammates: [] })).toBe(injectTeamContext('base', { self: { name: 'a' }, teammates: [] }));
  });
});

describe('injectTeamContext', () => {
  it('adds the section to a system prompt once, after the prompt', () => {
    const prompt = injectTeamContext('You are a careful engineer.\n', team);
    expect(prompt).toBe(`You are a careful engineer.\n\n${renderTeamContext(team)}`);
    expect(count(prompt, TEAM_CONTEXT_HEADING)).toBe(1);
  });

  it('is idempotent: a prompt that already has the section is returned with it replaced, not duplicated', () => {
    const once = injectTeamContext('Base prompt.', team);
    expect(injectTeamContext(once, team)).toBe(once);
    const updated = injectTeamContext(once, { ...team, calledBy: 'issue', returnsTo: 'issue' });
    expect(count(updated, TEAM_CONTEXT_HEADING)).toBe(1);
    expect(updated).toContain('You were called by issue');
    expect(updated.startsWith('Base prompt.\n\n')).toBe(true);
  });

  it('replaces the section in place, keeping the text around it', () => {
    const prompt = `Intro.\n${renderTeamContext(team)}\nOutro.`;
    const next = injectTeamContext(prompt, { ...team, calledBy: 'issue' });
    expect(next).toBe(`Intro.\n${renderTeamContext({ ...team, calledBy: 'issue' })}\nOutro.`);
  });

  it('collapses duplicated sections and stray markers into exactly one section', () => {
    const section = renderTeamContext(team);
    const dirty = `A\n${section}\nB\n${section}\n${TeamContextMarkers.end}\nC\n${TeamContextMarkers.start}\nD`;
    const cleaned = injectTeamContext(dirty, team);
    expect(count(cleaned, TeamContextMarkers.start)).toBe(1);
    expect(count(cleaned, TeamContextMarkers.end)).toBe(1);
    for (const kept of ['A', 'B', 'C', 'D']) expect(cleaned).toContain(`\n${kept}`.slice(kept === 'A' ? 1 : 0));
    expect(injectTeamContext(cleaned, team)).toBe(cleaned);
  });

  it('an empty prompt becomes just the section', () => {
    expect(injectTeamContext('', team)).toBe(renderTeamContext(team));
  });
});
