import type { MeshDiagnosticCode } from '@baton/contracts';

/**
 * Diagnostics of the definition compiler. Every diagnostic has a file, a 1-based line and column,
 * a stable code, a severity and a hint. Codes are part of Baton's public surface: tests, docs and
 * operators match on them, so a code is never renamed.
 */

export const Severity = { error: 'error', warning: 'warning' } as const;
export type Severity = (typeof Severity)[keyof typeof Severity];

export const DiagnosticCode = {
  /** The file is not valid YAML / JSON. */
  yamlSyntax: 'YAML_SYNTAX',
  /** A YAML alias (`*name`, a merge `<<: *name` included): Baton does not read aliases; the document is not compiled. */
  yamlAlias: 'YAML_ALIAS',
  /** A value has the wrong shape (a list where a map belongs, an unknown enum value...). */
  invalidValue: 'INVALID_VALUE',
  /**
   * A key Baton does not know in the header, an agent, a route or one of their blocks; it is ignored
   * (named with the known key nearest to it). In a workflow, a step or a mesh it is SCHEMA_VIOLATION.
   */
  unknownKey: 'UNKNOWN_KEY',
  /** One key written twice in two spellings (`human_gate` and `humanGate`): keys are read case-insensitively, camelCase as snake_case. */
  duplicateKey: 'DUPLICATE_KEY',
  /** A project header key (`lead`, `accepts_handoffs_from`, `meshes`…) in a document that has no `project:` (an agent document included): it would be ignored. */
  headerKeyOutsideHeader: 'HEADER_KEY_OUTSIDE_HEADER',
  /** No document names a project. */
  missingProject: 'MISSING_PROJECT',
  /** Two documents define the same agent. */
  duplicateAgent: 'DUPLICATE_AGENT',
  /** A HANDOFF `TO` names no agent of the project. */
  unknownHandoffTarget: 'UNKNOWN_HANDOFF_TARGET',
  /** A MAP source the child does not declare (GATHER or MEMORY). */
  unknownHandoffReturnField: 'UNKNOWN_HANDOFF_RETURN_FIELD',
  /** ON_RETURN on a route that does not return (it never runs). */
  onReturnWithoutReturn: 'HANDOFF_ON_RETURN_WITHOUT_RETURN',
  /** An ON_RETURN action other than continue / resume_intent; it runs continue. */
  unsupportedOnReturnAction: 'UNSUPPORTED_HANDOFF_ON_RETURN_ACTION',
  /** ON_RETURN names both an action and a handler, or a handler combines RESPOND with RESUME_INTENT. */
  onReturnActionAndHandler: 'HANDOFF_ON_RETURN_ACTION_AND_HANDLER',
  /** ON_RETURN names a handler RETURN_HANDLERS does not define. */
  unknownReturnHandler: 'UNKNOWN_RETURN_HANDLER',
  /** A SET target not declared in the parent's MEMORY. */
  setTargetNotDeclared: 'W801',
  /** A MAP target not declared in the parent's MEMORY. */
  mapTargetNotDeclared: 'W802',
  /** A MAP or SET target the parent's MEMORY declares READONLY: every return of the route fails (memory_error). */
  returnTargetReadonly: 'W803',
  /** RETURN / EXPECT_RETURN written other than lowercase `true` (True, "true"...): reads as false. */
  returnNotLowercaseTrue: 'HANDOFF_RETURN_NOT_LOWERCASE_TRUE',
  /** An uppercase key inside CONTEXT: ignored. */
  contextKeyNotLowercase: 'HANDOFF_CONTEXT_KEY_NOT_LOWERCASE',
  /** A one-line `{ mode: last_n }` history: ignored, falls back to full. */
  inlineLastNHistory: 'HANDOFF_HISTORY_INLINE_LAST_N',
  /** A WHEN / COMPLETE / ENABLED_WHEN that is neither a valid condition nor quoted natural language. */
  invalidCondition: 'INVALID_CONDITION',
  /** An AUTH block that is not `required` or a map of REQUIRED (a boolean) and VARIABLE (a variable name). */
  invalidAuthProfile: 'INVALID_AUTH_PROFILE',
  /** An AUTH VARIABLE no agent of the project declares in its MEMORY: routes to the agent stay blocked until it is set. */
  authVariableNotDeclared: 'AUTH_VARIABLE_NOT_DECLARED',
  /** A route from an agent to itself: the runtime refuses it with `recursion`. */
  selfHandoff: 'HANDOFF_TO_SELF',
  /** A workflow with no terminal step: its runs complete only when an agent terminates them. */
  workflowWithoutTerminal: 'WORKFLOW_WITHOUT_TERMINAL',
  /** A step with no `next` that is not terminal: an agent's `advance` there has no workflow edge, and the run holds. */
  stepWithoutNext: 'STEP_WITHOUT_NEXT',
  /**
   * The compiled project failed the contract schema (its cross-field checks run even beside a value
   * out of shape), or a workflow, a step or a mesh holds a key the contract does not know.
   */
  schemaViolation: 'SCHEMA_VIOLATION',
} as const;
export type DiagnosticCode = (typeof DiagnosticCode)[keyof typeof DiagnosticCode];

/**
 * A diagnostic's code: the compiler's own, or the code of the contract check that failed when it
 * has one (a mesh that does not build: `MESH_SELF_HANDOFF`…, the code the router refuses it with).
 */
export type AnyDiagnosticCode = DiagnosticCode | MeshDiagnosticCode;

export interface Diagnostic {
  file: string;
  /** 1-based. */
  line: number;
  /** 1-based. */
  column: number;
  severity: Severity;
  code: AnyDiagnosticCode;
  message: string;
  hint: string;
}

/** `file:line:col severity code message — hint`, the `baton validate` line format. */
export function formatDiagnostic(d: Diagnostic): string {
  return `${d.file}:${d.line}:${d.column} ${d.severity} ${d.code} ${d.message} — ${d.hint}`;
}

/** True when any diagnostic is an error. */
export function hasErrors(diagnostics: readonly Diagnostic[]): boolean {
  return diagnostics.some((d) => d.severity === Severity.error);
}
