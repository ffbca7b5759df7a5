/**
 * The "Your Team" section injected once per run into an agent's system prompt (seed 000 §7).
 *
 * It is a reminder only: delegation and call-back are enforced by the engine (call_agent, the
 * callback return address, routing precedence rule 3). The wording matches that contract and the
 * section adds no mechanism of its own.
 */

/** An agent as the team context shows it. `role` is the agent definition's free-text role. */
export interface TeamMember {
  name: string;
  role?: string | null;
}

export interface TeamContextInput {
  /** The agent whose prompt is being built. */
  self: TeamMember;
  /** The project's agents. `self` may be listed; it is left out of the teammates. */
  teammates: readonly TeamMember[];
  /** The agent whose call started this run (its function_call), when the run was started by one. */
  calledBy?: string | null;
  /**
   * Where the result goes back to: the route's return address (`callback_after`). It may differ
   * from the caller (a call with `callback: "<other>"`), and it is null when there is none (a
   * callback equal to the callee is a no-op; the result then follows the workflow). Absent or null:
   * no return address is named.
   */
  returnsTo?: string | null;
}

/**
 * The lines that delimit the section inside a prompt. A marker is recognised only as a whole line,
 * and every name or role is written after a fixed prefix on one line, so agent-supplied text can
 * never forge a marker.
 */
export const TeamContextMarkers = {
  start: '<!-- baton:team-context -->',
  end: '<!-- /baton:team-context -->',
} as const;

export const TEAM_CONTEXT_HEADING = '## Your Team';
export const NO_ROLE = '(no role defined)';

/** Rule 1 (issue #478): delegate through call_agent; @-mentions are for humans only. */
export const DELEGATION_RULE =
  'Work outside your own tool scope must be delegated through the call_agent mechanism (see the call-agent skill). ' +
  '@-mentions are for humans only: never @-mention a teammate to hand it work.';

/** Rule 2 (precedence rule 3, the callback): a call is a conversation turn. */
export const CALLBACK_RULE =
  "When a teammate calls you, your answer is returned to them by the engine's callback. " + 'Treat it as a conversation turn, not fire-and-forget.';

/**
 * The sentence naming the caller and where the result returns: seed 000 §7's wording when there is a
 * return address (the caller itself, or the `callback` the call named), and a plain statement that
 * there is none when the callback was a no-op.
 */
export function calledBySentence(caller: string, returnsTo: string | null): string {
  if (returnsTo === null) return `You were called by ${caller}. Your result has no return address: the workflow decides what runs next.`;
  return `You were called by ${caller} — your result returns to ${returnsTo}.`;
}

/** The sentence naming the return address of a run that no call started. */
export function returnsToSentence(returnsTo: string): string {
  return `Your result returns to ${returnsTo}.`;
}

/**
 * Render the "Your Team" section, markers included: the agent's own role, each teammate's role
 * (sorted by name, self left out, duplicates by name shown once, a missing or blank role shown as
 * "(no role defined)"), the two rules, and — when the run was started by a call — the caller's name
 * and the return address (`returnsTo`), or that there is none.
 *
 * A caller equal to the agent itself is not named, and a return address equal to the agent itself
 * is no return address: a callback to oneself is a no-op (seed 000 §4), so the result would not
 * return there. Names and roles are collapsed to one line. Pure and deterministic: the same input
 * always renders the same text.
 */
export function renderTeamContext(input: TeamContextInput): string {
  const selfName = oneLine(input.self.name);
  const lines: string[] = [TeamContextMarkers.start, TEAM_CONTEXT_HEADING, '', `You are **${selfName}**. Your role: ${roleText(input.self.role)}`, ''];

  const teammates = teammatesOf(selfName, input.teammates);
  if (teammates.length === 0) {
    lines.push('You have no teammates in this project.');
  } else {
    lines.push('Your teammates:');
    for (const mate of teammates) lines.push(`- **${mate.name}**: ${mate.role}`);
  }

  lines.push('', 'How to work with your team:', `- ${DELEGATION_RULE}`, `- ${CALLBACK_RULE}`);

  const caller = input.calledBy == null ? '' : oneLine(input.calledBy);
  const returnsTo = input.returnsTo == null ? '' : oneLine(input.returnsTo);
  const address = returnsTo !== '' && returnsTo !== selfName ? returnsTo : null;
  if (caller !== '' && caller !== selfName) lines.push('', calledBySentence(caller, address));
  else if (address !== null) lines.push('', returnsToSentence(address));

  lines.push(TeamContextMarkers.end);
  return lines.join('\n');
}

/**
 * Add the "Your Team" section to a system prompt exactly once.
 *
 * Idempotent: a prompt that already holds the section gets it replaced in place (the first one;
 * any further copies and stray marker lines are removed), so `inject(inject(p, x), x) ===
 * inject(p, x)` and injecting with new input updates the section instead of adding a second one.
 * A prompt without the section gets it appended after a blank line.
 */
export function injectTeamContext(systemPrompt: string, input: TeamContextInput): string {
  const section = renderTeamContext(input);
  const { text, insertAt } = removeSections(systemPrompt);
  if (insertAt !== null) return text.slice(0, insertAt) + section + text.slice(insertAt);
  const base = text.trimEnd();
  return base.length === 0 ? section : `${base}\n\n${section}`;
}

function teammatesOf(selfName: string, members: readonly TeamMember[]): Array<{ name: string; role: string }> {
  const rows = members
    .map((member) => ({ name: oneLine(member.name), role: roleText(member.role) }))
    .filter((member) => member.name !== '' && member.name !== selfName)
    .sort((a, b) => compare(a.name, b.name) || compare(a.role, b.role));
  return rows.filter((row, index) => index === 0 || rows[index - 1]!.name !== row.name);
}

/** Code-unit order: the same everywhere, unlike localeCompare. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function roleText(role: string | null | undefined): string {
  const text = role == null ? '' : oneLine(role);
  return text === '' ? NO_ROLE : text;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/**
 * Remove every marked section (start line through the next end line) and every stray marker line
 * (a start with no end after it, an end outside a section). Returns the remaining text and the
 * offset where the first section was, if there was one. Linear in the prompt length.
 */
function removeSections(prompt: string): { text: string; insertAt: number | null } {
  const lines: Array<{ from: number; end: number; next: number; marker: 'start' | 'end' | null }> = [];
  for (let pos = 0; pos < prompt.length; ) {
    const newline = prompt.indexOf('\n', pos);
    const end = newline === -1 ? prompt.length : newline;
    const next = newline === -1 ? prompt.length : newline + 1;
    const trimmed = prompt.slice(pos, end).trim();
    const marker = trimmed === TeamContextMarkers.start ? 'start' : trimmed === TeamContextMarkers.end ? 'end' : null;
    lines.push({ from: pos, end, next, marker });
    pos = next;
  }
  // nextEnd[i]: the first end-marker line at or after line i, or -1.
  const nextEnd = new Array<number>(lines.length + 1).fill(-1);
  for (let i = lines.length - 1; i >= 0; i--) nextEnd[i] = lines[i]!.marker === 'end' ? i : nextEnd[i + 1]!;

  let out = '';
  let insertAt: number | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.marker === null) {
      out += prompt.slice(line.from, line.next);
      continue;
    }
    const close = line.marker === 'start' ? nextEnd[i + 1]! : -1;
    if (close === -1) continue; // a stray marker line: dropped with its line break
    if (insertAt === null) insertAt = out.length;
    const last = lines[close]!;
    out += prompt.slice(last.end, last.next); // the section's own line break stays
    i = close;
  }
  return { text: out, insertAt };
}
