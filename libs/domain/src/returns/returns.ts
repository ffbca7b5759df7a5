import {
  ownValue,
  setOwn,
  type AgentDefinition,
  type ExecutionSettings,
  type HandoffContext,
  type HandoffRoute,
  type OnReturn,
  type ResumeWith,
  type TranscriptEntry,
} from '@baton/contracts';
import { assertNever } from '../decider';
import { isSetValue } from '../routing/conditions';

/**
 * Pure rules of returnable handoffs (seed 001): what context a child receives, what a return
 * writes into the parent, which message a resume replays, and when a reasoning child's built-in
 * return action is honoured.
 */

/**
 * HISTORY, PASS and SUMMARY → exactly what the child receives. `auto` is summary_only when the
 * SUMMARY has text, otherwise the last five messages. A variable listed in PASS but not set in
 * the parent's scope is not passed.
 */
export function buildHandoffContext(
  route: Pick<HandoffRoute, 'summary' | 'history' | 'pass'>,
  transcript: readonly TranscriptEntry[],
  parentScope: Readonly<Record<string, unknown>>,
): { context: HandoffContext; variables: Record<string, unknown> } {
  const summary = route.summary !== undefined && route.summary.trim() !== '' ? route.summary : null;
  const policy = route.history;
  let mode: HandoffContext['history_mode'];
  let history: TranscriptEntry[];
  switch (policy.mode) {
    case 'full':
      mode = 'full';
      history = [...transcript];
      break;
    case 'none':
      mode = 'none';
      history = [];
      break;
    case 'summary_only':
      mode = 'summary_only';
      history = [];
      break;
    case 'last_n':
      mode = 'last_n';
      history = transcript.slice(Math.max(0, transcript.length - policy.count));
      break;
    case 'auto':
      if (summary !== null) {
        mode = 'summary_only';
        history = [];
      } else {
        mode = 'last_n';
        history = transcript.slice(Math.max(0, transcript.length - 5));
      }
      break;
    default:
      return assertNever(policy, 'history policy');
  }
  const variables: Record<string, unknown> = {};
  for (const name of route.pass ?? []) {
    const value = ownValue(parentScope, name);
    if (isSetValue(value)) setOwn(variables, name, value);
  }
  return { context: { summary, history_mode: mode, history, passed: Object.keys(variables) }, variables };
}

export interface ReturnEffects {
  /** Mapped child fields that had a value (copied). */
  mappedFields: string[];
  /** Mapped child fields without a value (skipped). */
  skippedFields: string[];
  setFields: string[];
  /** The parent-scope writes: MAP first, then SET over it. */
  writes: Record<string, unknown>;
  /** Targets the parent may not write; when non-empty none of the effects apply. */
  notWritable: string[];
}

/**
 * A parent may write a variable it declares in its MEMORY and does not mark READONLY. An agent
 * that declares no MEMORY at all may write nothing through a return.
 */
export function writableBy(parent: AgentDefinition | undefined, variable: string): boolean {
  const declared = parent?.memory?.find((m) => m.name === variable);
  return declared !== undefined && declared.readonly !== true;
}

/**
 * ON_RETURN's MAP and SET: only mapped fields come back, a field with no value is skipped, SET
 * runs after MAP, and when any MAP or SET target is not writable by the parent the whole set of
 * effects is refused (`notWritable` lists the culprits) — every target the return names counts,
 * including a MAP target whose child field has no value this time (seed 001: the parent must be
 * allowed to write each target; whether a return writes depends on nothing the child chose).
 */
export function computeReturnEffects(
  onReturn: Pick<OnReturn, 'map' | 'set'> | null,
  childScope: Readonly<Record<string, unknown>>,
  parent: AgentDefinition | undefined,
): ReturnEffects {
  const effects: ReturnEffects = { mappedFields: [], skippedFields: [], setFields: [], writes: {}, notWritable: [] };
  if (onReturn === null) return effects;
  for (const [childField, parentVariable] of Object.entries(onReturn.map)) {
    const value = ownValue(childScope, childField);
    if (!isSetValue(value)) {
      effects.skippedFields.push(childField);
      continue;
    }
    effects.mappedFields.push(childField);
    setOwn(effects.writes, parentVariable, value);
  }
  for (const [target, value] of Object.entries(onReturn.set)) {
    effects.setFields.push(target);
    setOwn(effects.writes, target, value);
  }
  const targets = new Set([...Object.values(onReturn.map), ...Object.keys(onReturn.set)]);
  effects.notWritable = [...targets].filter((target) => !writableBy(parent, target));
  return effects;
}

export interface ResumeSources {
  originalUtterance: string | null;
  latestChildUtterance: string | null;
  latestSessionUtterance: string | null;
  forwardedMessage: string | null;
}

/** The message a resume_intent replays, per RESUME_WITH (null when that message does not exist). */
export function pickResumeMessage(resumeWith: ResumeWith, sources: ResumeSources): string | null {
  switch (resumeWith) {
    case 'original_handoff_utterance':
      return sources.originalUtterance;
    case 'latest_child_user_utterance':
      return sources.latestChildUtterance;
    case 'latest_session_user_utterance':
      return sources.latestSessionUtterance;
    case 'forwarded_return_message':
      return sources.forwardedMessage;
    default:
      return assertNever(resumeWith, 'resume_with');
  }
}

/** The last customer message of the conversation. */
export function latestCustomerMessage(transcript: readonly TranscriptEntry[]): string | null {
  for (let i = transcript.length - 1; i >= 0; i--) {
    const entry = transcript[i]!;
    if (entry.role === 'customer') return entry.text;
  }
  return null;
}

export interface ParentReturnPolicy {
  minConfidence: number;
  ignoreAmbiguous: boolean;
}

/**
 * EXECUTION.pipeline.parentReturn in force for a waiting parent: each setting of the supervisor
 * (the parent) overrides the project's; defaults are minConfidence 0 and ignoreAmbiguous false.
 */
export function effectiveParentReturn(parent: AgentDefinition | undefined, project: ExecutionSettings | undefined): ParentReturnPolicy {
  const own = parent?.execution?.pipeline?.parent_return;
  const base = project?.pipeline?.parent_return;
  return {
    minConfidence: own?.min_confidence ?? base?.min_confidence ?? 0,
    ignoreAmbiguous: own?.ignore_ambiguous ?? base?.ignore_ambiguous ?? false,
  };
}

/** Whether a built-in return action is honoured; the reason when it is not. */
export function parentReturnVerdict(
  action: { confidence?: number; ambiguous?: boolean },
  policy: ParentReturnPolicy,
): { honoured: true } | { honoured: false; reason: string } {
  if (action.ambiguous === true && policy.ignoreAmbiguous) return { honoured: false, reason: 'parent_return_ambiguous_ignored' };
  if (action.confidence !== undefined && action.confidence < policy.minConfidence) {
    return { honoured: false, reason: `parent_return_below_min_confidence (${action.confidence} < ${policy.minConfidence})` };
  }
  return { honoured: true };
}
