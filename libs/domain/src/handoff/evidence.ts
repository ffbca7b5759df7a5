import type { CompletionReport, Evidence, EvidenceFloor, HandoffActorKind } from '@baton/contracts';

/**
 * Values that say "nothing here". Compared in the normalized form `normalizeText` produces (NFKC,
 * no invisible characters, lowercased, inner whitespace collapsed, surrounding punctuation and symbols
 * stripped), so `N/A.`, `(none)` and `"TBD"` match too. A placeholder is not evidence (seed 002,
 * known hole: `[{}]` counted as evidence).
 */
const PLACEHOLDER_WORDS = ['n/a', 'na', 'n.a.', 'none', 'null', 'nil', 'undefined', 'todo', 'tbd', 'tba', 'empty', 'nothing', 'placeholder', 'not applicable'];

/** How deep nested evidence entries are inspected; deeper content does not count. */
const MAX_DEPTH = 6;

/**
 * Code points that take no room: format characters (category Cf: zero-width space and joiners, word
 * joiner, BOM, soft hyphen, bidi marks, tags), control characters, and the non-Cf invisible marks
 * (combining grapheme joiner, Khmer inherent vowels, Mongolian and other variation selectors).
 * They are removed, so `n\u200b/a` reads `n/a`.
 */
const ZERO_WIDTH = /[\p{Cf}\p{Cc}\u034f\u17b4\u17b5\u180b-\u180f\ufe00-\ufe0f\u{e0100}-\u{e01ef}]/gu;

/** Blank space: every separator and whitespace, plus the blank letters (Hangul fillers) and the braille blank. */
const BLANK = /[\p{Z}\s\u115f\u1160\u2800\u3164\uffa0]+/gu;

/** Punctuation and symbols around a value (`N/A.`, `(none)`, `*TBD*`); inner ones are kept (`n/a`). */
const SURROUNDING_PUNCTUATION = /^[\p{P}\p{S}\s]+|[\p{P}\p{S}\s]+$/gu;

/** A letter or a digit: a meaningful text has at least one. */
const LETTER_OR_DIGIT = /[\p{L}\p{N}]/u;

/** Texts that may be JSON containers or JSON strings; numbers and booleans stay text ("42" may be a PR). */
const JSON_LIKE = /^(?:\[[\s\S]*\]|\{[\s\S]*\}|"[\s\S]*")$/;

/**
 * A text as it reads: compatibility forms folded to their plain letters (NFKC: full-width `ＮＯＮＥ`
 * reads `NONE`, the ligature `ﬁ` reads `fi`), blanks (tabs and newlines too) folded to one space,
 * zero-width characters removed, trimmed.
 */
function visibleText(text: string): string {
  return text.normalize('NFKC').replace(BLANK, ' ').replace(ZERO_WIDTH, '').replace(BLANK, ' ').trim();
}

/** The comparable form of a text: visible, lowercased, surrounding punctuation and symbols stripped. */
function normalizeText(text: string): string {
  return visibleText(text).toLowerCase().replace(SURROUNDING_PUNCTUATION, '');
}

const PLACEHOLDERS = new Set(PLACEHOLDER_WORDS.map(normalizeText));

/**
 * Latin look-alikes that NFKC leaves alone (Cyrillic and Greek letters drawn like Latin ones), so a
 * placeholder spelled with them (`nоne` with a Cyrillic `о`) still reads as the placeholder. Used
 * only to compare with the placeholder words: a text in those scripts is otherwise untouched.
 */
const LATIN_LOOKALIKES: Readonly<Record<string, string>> = {
  а: 'a',
  е: 'e',
  о: 'o',
  р: 'p',
  с: 'c',
  у: 'y',
  х: 'x',
  і: 'i',
  ј: 'j',
  ѕ: 's',
  ԁ: 'd',
  һ: 'h',
  ԛ: 'q',
  ԝ: 'w',
  α: 'a',
  ε: 'e',
  ι: 'i',
  κ: 'k',
  ν: 'v',
  ο: 'o',
  τ: 't',
  υ: 'u',
  // Latin small capitals and other Latin letter forms NFKC keeps (`ɴᴏɴᴇ` reads `none`).
  ᴀ: 'a',
  ʙ: 'b',
  ᴄ: 'c',
  ᴅ: 'd',
  ᴇ: 'e',
  ꜰ: 'f',
  ɢ: 'g',
  ʜ: 'h',
  ɪ: 'i',
  ᴊ: 'j',
  ᴋ: 'k',
  ʟ: 'l',
  ᴍ: 'm',
  ɴ: 'n',
  ᴏ: 'o',
  ᴘ: 'p',
  ʀ: 'r',
  ꜱ: 's',
  ᴛ: 't',
  ᴜ: 'u',
  ᴠ: 'v',
  ᴡ: 'w',
  ʏ: 'y',
  ᴢ: 'z',
  ı: 'i',
  ȷ: 'j',
  ɑ: 'a',
  ɡ: 'g',
  ɩ: 'i',
  ʋ: 'u',
};

/** Combining marks, dropped when a text is compared with the placeholders (`niĺ` composes to `niĺ`). */
const COMBINING_MARK = /\p{M}/gu;

/**
 * The letters and digits of a normalized text, accents dropped and look-alikes read as the Latin
 * letters they mimic: `n-a`, `N A`, `n_a`, `t.b.d.`, `nоne`, `ɴᴏɴᴇ` and `nóne` all have the
 * skeleton of a placeholder word.
 */
function skeleton(normalized: string): string {
  let out = '';
  for (const ch of normalized.normalize('NFD').replace(COMBINING_MARK, '')) out += LATIN_LOOKALIKES[ch] ?? ch;
  return out.replace(/[^\p{L}\p{N}]/gu, '');
}

/** Whether a normalized text, or a piece of one, is a placeholder word as written or by its skeleton. */
function isPlaceholder(normalized: string): boolean {
  return PLACEHOLDERS.has(normalized) || PLACEHOLDER_SKELETONS.has(skeleton(normalized));
}

/** What separates the words of a list of placeholders (`n/a n/a`, `none, none`, `TBD; TBD`). */
const LIST_SEPARATOR = /[\s,;|+&]+/u;

/** The most words one placeholder has (`not applicable`: 2), and so the most a piece is joined from. */
const PLACEHOLDER_WORDS_MAX = Math.max(...PLACEHOLDER_WORDS.map((word) => word.split(' ').length));

/**
 * Whether a normalized text is nothing but placeholders in a row (`n/a n/a`, `none, none`, `not
 * applicable; TBD`): its words, those without a letter or digit left out, fall into consecutive
 * groups that each read as a placeholder.
 */
function isPlaceholderList(normalized: string): boolean {
  const words = normalized
    .split(LIST_SEPARATOR)
    .map((word) => word.replace(SURROUNDING_PUNCTUATION, ''))
    .filter((word) => LETTER_OR_DIGIT.test(word));
  if (words.length < 2) return false;
  // covered[i]: the first i words fall into placeholder groups.
  const covered = [true, ...words.map(() => false)];
  for (let end = 1; end <= words.length; end++) {
    for (let size = 1; size <= Math.min(PLACEHOLDER_WORDS_MAX, end) && !covered[end]; size++) {
      if (covered[end - size] && isPlaceholder(words.slice(end - size, end).join(' '))) covered[end] = true;
    }
  }
  return covered[words.length]!;
}

const PLACEHOLDER_SKELETONS = new Set(PLACEHOLDER_WORDS.map((word) => skeleton(normalizeText(word))));

/** The value a text encodes when it is a JSON array, object or string; `undefined` when it is not one. */
function parseJsonText(trimmed: string): { value: unknown } | undefined {
  if (!JSON_LIKE.test(trimmed)) return undefined;
  try {
    return { value: JSON.parse(trimmed) as unknown };
  } catch {
    return undefined;
  }
}

/**
 * Whether a string says something. Invisible characters (zero-width spaces, word joiners, …) are
 * removed first. A text that is a JSON array, object or string (`"[{}]"`, `"[\"\"]"`, `"\"\""`) is
 * judged by the value it encodes, within the same depth budget as nested entries. Otherwise it must
 * contain a letter or a digit and must not be a placeholder such as `n/a`, `None.` or `(todo)`, nor
 * a list of nothing but placeholders (`n/a n/a`, `none, none`).
 */
export function isMeaningfulText(text: string, depth = 0): boolean {
  if (depth > MAX_DEPTH) return false;
  const visible = visibleText(text);
  const parsed = parseJsonText(visible);
  if (parsed) return isMeaningfulEntry(parsed.value, depth + 1);
  const normalized = normalizeText(visible);
  return LETTER_OR_DIGIT.test(normalized) && !isPlaceholder(normalized) && !isPlaceholderList(normalized);
}

/**
 * Whether one evidence entry carries information: a meaningful string, or an array / object that
 * contains one. Numbers, booleans and null alone are not evidence (a bare `true` names no test),
 * so `{}`, `""`, `"  "`, `null`, `{ "name": "" }` and objects whose values are all blank are not.
 */
export function isMeaningfulEntry(value: unknown, depth = 0): boolean {
  if (depth > MAX_DEPTH) return false;
  if (typeof value === 'string') return isMeaningfulText(value, depth);
  if (Array.isArray(value)) return value.some((item) => isMeaningfulEntry(item, depth + 1));
  if (value !== null && typeof value === 'object') {
    return Object.values(value as Record<string, unknown>).some((item) => isMeaningfulEntry(item, depth + 1));
  }
  return false;
}

/** Whether a report's evidence shows anything: a real test run, a real artifact or a work product id. */
export function hasEvidence(evidence: Evidence | undefined): boolean {
  if (!evidence) return false;
  const tests = (evidence.tests_run ?? []).some((entry) => isMeaningfulEntry(entry));
  const artifacts = (evidence.artifacts ?? []).some((entry) => isMeaningfulEntry(entry));
  const workProduct = evidence.work_product_id !== undefined && isMeaningfulText(evidence.work_product_id);
  return tests || artifacts || workProduct;
}

/**
 * Whether the evidence floor applies to a return. Decided ONLY by the actor kind the platform
 * attached to the command, never by anything in the report or the request: operator and human
 * returns are left untouched; every other actor (agents, and by default anything else) is floored.
 */
export function evidenceFloorApplies(actorKind: HandoffActorKind): boolean {
  return actorKind !== 'operator' && actorKind !== 'human';
}

/**
 * The evidence floor (seed 002, `apply_completion_evidence_floor`): a return whose outcome is
 * `completed` but which shows no tests_run, artifacts or work_product_id is recorded as `partial`
 * and the floor is noted. Pure; the report is copied, never mutated.
 */
export function applyEvidenceFloor(report: CompletionReport, actorKind: HandoffActorKind): { report: CompletionReport; evidence_floor?: EvidenceFloor } {
  if (!evidenceFloorApplies(actorKind) || report.outcome !== 'completed' || hasEvidence(report.evidence)) return { report };
  return {
    report: { ...report, outcome: 'partial' },
    evidence_floor: { applied: true, original_outcome: 'completed', reason: 'no_evidence' },
  };
}
