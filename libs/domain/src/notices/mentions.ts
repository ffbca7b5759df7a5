/** U+200B ZERO WIDTH SPACE: invisible, and it breaks a mention token on every common platform. */
export const ZERO_WIDTH_SPACE = '\u200b';

/** An `@` (or full-width `＠`) followed by a character that can start a handle, group or broadcast. */
const MENTION_START = /[@\uff20](?=[\p{L}\p{N}_\-[@\uff20!])/gu;

/**
 * Make agent-authored text notification-inert (seed 000 §5: "agents never ping a human"; §7: "@@
 * mentions are for humans only"). A zero-width space is inserted right after every `@` (or
 * full-width `＠`) that starts a mention-like token — a letter (any script), digit, `_`, `-`,
 * `[`, `@` or `!` follows it — so `@alice`, `@@alice`, `@org/team`, `@here`, `@channel` and
 * `<@U123>` no longer resolve; the text still reads the same. Slack-style broadcasts `<!here>`, `<!channel>`,
 * `<!everyone>`, `<!subteam^...>` get the space after `<`.
 *
 * Deliberately conservative: an e-mail address (`bob@example.com`) is also broken, because a
 * renderer that links it might notify. Idempotent: an already neutralised `@` is followed by the
 * zero-width space, which is not a mention character, so applying it twice changes nothing.
 */
export function neutralizeMentions(text: string): string {
  return text.replace(MENTION_START, (at) => `${at}${ZERO_WIDTH_SPACE}`).replace(/<(?=!)/g, `<${ZERO_WIDTH_SPACE}`);
}

/**
 * True when `text` holds a live mention (what {@link neutralizeMentions} removes). Used by tests
 * and by the publish path as a last check before posting agent text.
 */
export function hasLiveMention(text: string): boolean {
  return new RegExp(MENTION_START.source, 'u').test(text) || /<!/.test(text);
}
