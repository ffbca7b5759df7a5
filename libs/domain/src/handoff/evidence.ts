import type { CompletionReport, Evidence, EvidenceFloor, HandoffActorKind } from '@baton/contracts';

/**
 * Values that say "nothing here". Compared after trimming, lowercasing and collapsing inner
 * whitespace. A placeholder is not evidence (seed 002, known hole: `[{}]` counted as evidence).
 */
const PLACEHOLDERS = new Set([
  'n/a',
  'na',
  'n.a.',
  'none',
  'null',
  'nil',
  'undefined',
  'todo',
  'tbd',
  'tba',
  '-',
  '--',
  '---',
  '...',
  '…',
  '?',
  '[]',
  '{}',
  'empty',
  'nothing',
  'placeholder',
  'not applicable',
]);

/** How deep nested evidence entries are inspected; deeper content does not count. */
const MAX_DEPTH = 6;

/** Whether a string says something: not blank and not a placeholder such as "n/a" or "todo". */
export function isMeaningfulText(text: string): boolean {
  const normalized = text.trim().replace(/\s+/g, ' ').toLowerCase();
  return normalized.length > 0 && !PLACEHOLDERS.has(normalized);
}

/**
 * Whether one evidence entry carries information: a meaningful string, or an array / object that
 * contains one. Numbers, booleans and null alone are not evidence (a bare `true` names no test),
 * so `{}`, `""`, `"  "`, `null`, `{ "name": "" }` and objects whose values are all blank are not.
 */
export function isMeaningfulEntry(value: unknown, depth = 0): boolean {
  if (depth > MAX_DEPTH) return false;
  if (typeof value === 'string') return isMeaningfulText(value);
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
