import {
  AgentDefinitionSchema,
  DEFAULT_AUTH_VARIABLE,
  issueOwnCode,
  MAX_RETURN_DEADLINE_MS,
  MeshDefinitionSchema,
  MeshDiagnosticCode,
  ProjectDefinitionSchema,
  RESERVED_NAME_MESSAGE,
  setOwn,
  VariableNameSchema,
  WorkflowDefinitionSchema,
  WorkflowStepSchema,
  type AuthProfile,
  type CompiledCondition,
  type HistoryPolicy,
  type OnFailure,
  type ProjectDefinition,
} from '@baton/contracts';
import { parseCondition } from '@baton/domain';
import {
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseAllDocuments,
  visit as visitYaml,
  type Document,
  type Node,
  type Scalar,
  type YAMLMap,
  type YAMLSeq,
} from 'yaml';
import type { z } from 'zod';
import { DiagnosticCode, hasErrors, Severity, type AnyDiagnosticCode, type Diagnostic } from './diagnostics';
import { didYouMean } from './nearest';

/**
 * The definition compiler: Baton's YAML (JSON accepted) → a validated {@link CompiledProject}.
 * Pure: the caller reads the files (see `compileFiles` callers in the CLI) and passes their text.
 *
 * Keys are case-insensitive and camelCase is read as snake_case (`ON_RETURN`, `on_return` and
 * `onReturn` are one key; `humanGate` is a step's `human_gate`), in the header, an agent, a route,
 * a workflow, a step and a mesh alike ({@link fields}); one key written twice in two spellings is
 * DUPLICATE_KEY. Except inside CONTEXT, whose keys must be lowercase (seed 001). YAML aliases are
 * not read (YAML_ALIAS).
 */

/** The compiler's output: a ProjectDefinition with every conversation field normalized. */
export type CompiledProject = ProjectDefinition;

export interface SourceFile {
  path: string;
  text: string;
}

export interface CompileResult {
  /** Null when any error was reported. */
  project: CompiledProject | null;
  diagnostics: Diagnostic[];
}

type Pos = { file: string; line: number; column: number };

class Reporter {
  readonly diagnostics: Diagnostic[] = [];
  report(at: Pos, severity: Severity, code: AnyDiagnosticCode, message: string, hint: string): void {
    this.diagnostics.push({ ...at, severity, code, message, hint });
  }
  error(at: Pos, code: AnyDiagnosticCode, message: string, hint: string): void {
    this.report(at, Severity.error, code, message, hint);
  }
  warn(at: Pos, code: DiagnosticCode, message: string, hint: string): void {
    this.report(at, Severity.warning, code, message, hint);
  }
}

/** A file being read: positions of its nodes. */
class FileCtx {
  /** The maps whose keys {@link fields} has read (a key written twice is reported once per map). */
  readonly fieldsRead = new WeakSet<YAMLMap>();
  constructor(
    readonly path: string,
    readonly text: string,
    readonly lines: LineCounter,
    readonly out: Reporter,
  ) {}
  pos(node: Node | null | undefined): Pos {
    const offset = node?.range?.[0] ?? 0;
    const { line, col } = this.lines.linePos(offset);
    return { file: this.path, line, column: col };
  }
  raw(node: Node): string {
    const range = node.range;
    return range ? this.text.slice(range[0], range[1]) : '';
  }
}

interface Entry {
  /** The key as written. */
  raw: string;
  /** Normalized: camelCase → snake_case, lowercase. */
  key: string;
  keyNode: Node;
  value: Node | null;
}

/** The one key normaliser: camelCase → snake_case, then lowercase (`onReturn`, `ON_RETURN` → `on_return`). */
function normKey(raw: string): string {
  return raw.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

/** Every entry of a map, with its normalized key (see {@link fields} for a map of Baton's own keys). */
function entries(map: YAMLMap): Entry[] {
  const result: Entry[] = [];
  for (const pair of map.items) {
    const keyNode = pair.key as Node;
    const raw = isScalar(keyNode) ? String(keyNode.value) : '';
    result.push({ raw, key: normKey(raw), keyNode, value: (pair.value as Node | null) ?? null });
  }
  return result;
}

/**
 * The entries of a map of Baton's own keys — a header, an agent, a route, a workflow, a step, a
 * mesh, a setting's block — each read by its normalized key. One key written twice in two spellings
 * (`human_gate` and `humanGate`, `ROLE` and `role`) is DUPLICATE_KEY, an error at the second (once
 * per map): which one was meant cannot be told. The first is read, the other left out. Maps keyed by
 * names (GATHER, RETURN_HANDLERS, MAP, SET, a mesh's handoffs) and CONTEXT (lowercase keys only)
 * use {@link entries}: `income` and `Income` are two names.
 */
function fields(ctx: FileCtx, map: YAMLMap): Entry[] {
  const report = !ctx.fieldsRead.has(map);
  ctx.fieldsRead.add(map);
  const first = new Map<string, Entry>();
  const result: Entry[] = [];
  for (const e of entries(map)) {
    const seen = e.raw === '' ? undefined : first.get(e.key);
    if (seen === undefined) {
      if (e.raw !== '') first.set(e.key, e);
      result.push(e);
    } else if (report) {
      ctx.out.error(
        ctx.pos(e.keyNode),
        DiagnosticCode.duplicateKey,
        `'${e.raw}' is the key '${seen.raw}' (line ${ctx.pos(seen.keyNode).line}) written again: keys are case-insensitive and camelCase reads as snake_case, so both are '${e.key}'`,
        `Keep one '${e.key}'.`,
      );
    }
  }
  return result;
}

/**
 * YAML aliases (`*name`, a merge `<<: *name` included) in a document: each is YAML_ALIAS, an error
 * at the alias, naming the anchor it refers to. Baton does not read aliases: a definition is read
 * node by node, each diagnostic at the line it is written on, and an alias would make one value
 * stand at two places (or, nested, at very many: an alias bomb). Returns true when there was one
 * (the document is then not compiled). The parser keeps aliases as nodes, never expanding them.
 */
function refuseAliases(ctx: FileCtx, doc: Document.Parsed): boolean {
  /** Each anchor's line: where `&name` is written (a node's range starts at its content, after its anchor). */
  const anchors = new Map<string, number>();
  let found = false;
  visitYaml(doc, (_, node) => {
    if (isAlias(node)) {
      found = true;
      const anchor = anchors.get(node.source);
      ctx.out.error(
        ctx.pos(node),
        DiagnosticCode.yamlAlias,
        anchor !== undefined
          ? `*${node.source} is a YAML alias (of &${node.source}, line ${anchor}): Baton does not read aliases`
          : `*${node.source} is a YAML alias: Baton does not read aliases (and no anchor &${node.source} comes before it in this document)`,
        'Write the value out where it is used; anchors (&name), aliases (*name) and merge keys (<<) are not read.',
      );
    } else if ((isScalar(node) || isMap(node) || isSeq(node)) && node.anchor) {
      const start = node.range?.[0] ?? 0;
      const at = ctx.text.lastIndexOf(`&${node.anchor}`, start);
      anchors.set(node.anchor, ctx.lines.linePos(at >= 0 ? at : start).line);
    }
  });
  return found;
}

/** Make the seed's memory item shape (`- name` then indented `TYPE: ...` lines) valid YAML. */
export function normalizeSeedMemoryItems(text: string): string {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length - 1; i++) {
    const item = /^(\s*)- ([A-Za-z_][A-Za-z0-9_]*)\s*$/.exec(lines[i]!);
    if (!item) continue;
    const next = lines.slice(i + 1).find((l) => l.trim() !== '');
    if (next === undefined) continue;
    const indent = /^(\s*)/.exec(next)![1]!.length;
    if (indent > item[1]!.length && /^\s*[A-Za-z_]+\s*:/.test(next)) lines[i] = `${item[1]}- NAME: ${item[2]}`;
  }
  return lines.join('\n');
}

/** The keys of a project header. */
const PROJECT_KEYS: ReadonlySet<string> = new Set([
  'project',
  'lead',
  'accepts_handoffs_from',
  'execution',
  'agents',
  'workflows',
  'return_handlers',
  'meshes',
]);
/**
 * The keys read from the project header only (`agents`, `workflows` and `return_handlers` are also
 * merged from a document without `project:`): in a document without `project:` one is
 * HEADER_KEY_OUTSIDE_HEADER, an error, for it would be ignored.
 */
const HEADER_ONLY_KEYS = new Set(['lead', 'accepts_handoffs_from', 'execution', 'meshes']);
/**
 * The header keys an agent's map (an agent document, an `agents:` entry) cannot hold: each is
 * HEADER_KEY_OUTSIDE_HEADER (`execution` and `return_handlers` are agent keys too).
 */
const HEADER_KEYS_IN_AGENT = new Set(['project', 'lead', 'accepts_handoffs_from', 'agents', 'workflows', 'meshes']);
const AGENT_KEYS = new Set([
  'name',
  'agent',
  'supervisor',
  'role',
  'goal',
  'memory',
  'gather',
  'complete',
  'handoff',
  'handoffs',
  'return_handlers',
  'enabled_when',
  'auth',
  'execution',
]);
const ROUTE_KEYS = new Set([
  'to',
  'when',
  'summary',
  'history',
  'pass',
  'return',
  'expect_return',
  'on_return',
  'on_failure',
  'context',
  'deadline',
  'deadline_ms',
]);

interface RawHandler {
  at: Pos;
  respond?: string;
  resumeIntent: boolean;
  resumeWith?: string;
  map: Record<string, string>;
  set: Record<string, unknown>;
}

interface RawAgent {
  at: Pos;
  file: FileCtx;
  node: YAMLMap;
  name: string;
  supervisor: boolean;
}

interface PendingRoute {
  file: FileCtx;
  from: string;
  toNode: Node;
  route: Record<string, unknown>;
  mapNodes: { child: string; parent: string; node: Node }[];
  setNodes: { target: string; node: Node }[];
  onReturnAt: Pos | null;
  returnsTo: boolean;
}

/**
 * Compile a project from its source files (one project; every document of every file is read:
 * a document with `project:` is the header, `AGENT:` / `SUPERVISOR:` documents are agents, and
 * `agents:` / `workflows:` lists are merged). Returns every diagnostic; `project` is null when
 * any is an error. Never throws for bad input.
 */
export function compileProject(files: readonly SourceFile[]): CompileResult {
  const out = new Reporter();
  let header: { node: YAMLMap; file: FileCtx } | null = null;
  const agentDocs: RawAgent[] = [];
  const workflows: unknown[] = [];
  const projectHandlers = new Map<string, RawHandler>();
  // A document that does not parse may be the one that names the project: no MISSING_PROJECT then.
  let unreadable = false;
  // Paths of the compiled project (`workflows.0.version`) whose value the compiler refused as
  // INVALID_VALUE: the schema's issues at or under them would only repeat it.
  const refused = new Set<string>();
  let agentsRefused = false;

  for (const file of files) {
    const lines = new LineCounter();
    const text = normalizeSeedMemoryItems(file.text);
    const docs = parseAllDocuments(text, { lineCounter: lines, prettyErrors: false });
    const ctx = new FileCtx(file.path, text, lines, out);
    const list = Array.isArray(docs) ? docs : [];
    if (!Array.isArray(docs)) {
      out.error({ file: file.path, line: 1, column: 1 }, DiagnosticCode.yamlSyntax, 'the file could not be read as YAML', 'Check the indentation and quoting.');
      unreadable = true;
      agentsRefused = true;
      continue;
    }
    for (const doc of list) {
      let broken = false;
      for (const err of doc.errors) {
        broken = true;
        const { line, col } = lines.linePos(err.pos[0]);
        out.error(
          { file: file.path, line, column: col },
          DiagnosticCode.yamlSyntax,
          err.message.split('\n')[0] ?? err.code,
          'Fix the YAML syntax at this position (indentation, quotes, colons).',
        );
      }
      if (!broken && refuseAliases(ctx, doc)) broken = true;
      if (broken) {
        // It may be the document that names the project, or an agent: no MISSING_PROJECT, no "at least one agent" then.
        unreadable = true;
        agentsRefused = true;
      }
      if (broken || doc.contents === null) continue;
      const root = doc.contents as Node;
      if (!isMap(root)) {
        out.error(
          ctx.pos(root),
          DiagnosticCode.invalidValue,
          `a definition document is a map, not ${shapeOf(ctx, root)}`,
          'Start the document with `project:`, `AGENT:` or `SUPERVISOR:`.',
        );
        continue;
      }
      const es = fields(ctx, root);
      const keys = new Set(es.map((e) => e.key));
      if (keys.has('agent') || keys.has('supervisor')) {
        if (!collectAgent(ctx, root, agentDocs)) agentsRefused = true;
        continue;
      }
      const isHeader = keys.has('project');
      if (isHeader) {
        if (header !== null) out.error(ctx.pos(root), DiagnosticCode.invalidValue, 'a second project header', 'One document per project holds `project:`.');
        else header = { node: root, file: ctx };
      }
      for (const e of es) {
        // Read from the header only: without `project:` beside them they would be ignored (a
        // consent list, the lead, the project's execution settings, its meshes).
        if (!isHeader && HEADER_ONLY_KEYS.has(e.key)) {
          out.error(
            ctx.pos(e.keyNode),
            DiagnosticCode.headerKeyOutsideHeader,
            `'${e.raw}' is a project header key, but this document has no project: it would be ignored`,
            'Move it into the document that has `project: <key>`, or add `project:` to this document if it is the header.',
          );
          continue;
        }
        if (e.key === 'agents') {
          // Empty is none; anything but a list would drop every agent it was meant to hold.
          if (isEmpty(e.value)) continue;
          if (!isSeq(e.value)) {
            agentsRefused = true;
            wrongShape(
              ctx,
              e,
              "lists the project's agents",
              'Write `agents:\\n  - name: Agent_Name`, or give each agent its own `AGENT: Agent_Name` document.',
            );
            continue;
          }
          for (const item of e.value.items as Node[]) {
            if (isMap(item)) agentsRefused = !collectAgent(ctx, item, agentDocs) || agentsRefused;
            else {
              agentsRefused = true;
              out.error(ctx.pos(item), DiagnosticCode.invalidValue, `an agent is a map, not ${shapeOf(ctx, item)}`, 'Write `- name: Agent_Name`.');
            }
          }
        } else if (e.key === 'workflows') {
          // Empty is none; anything but a list would publish the project without its workflows.
          if (isEmpty(e.value)) continue;
          if (!isSeq(e.value)) {
            wrongShape(ctx, e, "lists the project's workflows", WORKFLOW_HINT);
            continue;
          }
          workflows.push(...readWorkflows(ctx, e.value, workflows.length, refused));
        } else if (e.key === 'return_handlers') {
          if (isEmpty(e.value)) continue;
          if (isMap(e.value)) readHandlers(ctx, e.value, projectHandlers);
          else wrongShape(ctx, e, 'maps handler names to their settings', HANDLERS_HINT);
        } else if (!PROJECT_KEYS.has(e.key)) {
          out.warn(
            ctx.pos(e.keyNode),
            DiagnosticCode.unknownKey,
            `unknown key '${e.raw}' is ignored${didYouMean(e.raw, e.key, PROJECT_KEYS)}`,
            'Project keys: project, lead, accepts_handoffs_from, execution, agents, workflows, return_handlers, meshes.',
          );
        }
      }
    }
  }

  if (header === null) {
    const first = files[0]?.path ?? '<input>';
    if (!unreadable)
      out.error({ file: first, line: 1, column: 1 }, DiagnosticCode.missingProject, 'no document names the project', 'Add a document with `project: <key>`.');
    return { project: null, diagnostics: out.diagnostics };
  }
  const headerValues = readHeader(header.file, header.node, refused);

  // Agents: names first (routes check targets against the full set).
  const names = new Map<string, RawAgent>();
  for (const agent of agentDocs) {
    if (names.has(agent.name)) {
      out.error(agent.at, DiagnosticCode.duplicateAgent, `agent '${agent.name}' is defined twice`, 'Give every agent one definition.');
      continue;
    }
    names.set(agent.name, agent);
  }
  // The roster is known when every agent could be read. An agent whose name could not be (`AGENT:
  // [a]`, `agents: 7`, a document that is not YAML) may be the one a TO, a step or a mesh names:
  // the checks that a name is on the roster are skipped until it is fixed, not reported as errors.
  const rosterKnown = !agentsRefused && names.size > 0;

  const compiledAgents: Record<string, unknown>[] = [];
  const routes: PendingRoute[] = [];
  const declared = new Map<string, { memory: Set<string>; readonly: Set<string>; gather: Set<string> }>();
  const authProfiles: { agent: RawAgent; profile: AuthProfile; at: Pos }[] = [];
  for (const agent of names.values()) {
    const compiled = compileAgent(agent, names, projectHandlers, routes, rosterKnown);
    compiledAgents.push(compiled.agent);
    const readonly = new Set(
      ((compiled.agent['memory'] as Record<string, unknown>[] | undefined) ?? []).filter((v) => v['readonly'] === true).map((v) => String(v['name'])),
    );
    declared.set(agent.name, { memory: compiled.memory, readonly, gather: compiled.gather });
    if (compiled.auth) authProfiles.push({ agent, ...compiled.auth });
  }

  // AUTH VARIABLE: a session variable some agent of the project declares in its MEMORY (a typo
  // would keep every route to the agent blocked).
  const sessionMemory = new Set([...declared.values()].flatMap((d) => [...d.memory]));
  for (const { agent, profile, at } of authProfiles) {
    if (!profile.required || sessionMemory.has(profile.variable)) continue;
    agent.file.out.warn(
      at,
      DiagnosticCode.authVariableNotDeclared,
      `AUTH variable '${profile.variable}' of '${agent.name}' is not declared in any agent's MEMORY`,
      `Declare '${profile.variable}' (TYPE: boolean) in the MEMORY of the agent that sets it, or name the variable that says the customer is authenticated; routes to ${agent.name} are blocked (authentication_required) until it is true.`,
    );
  }

  // Cross-agent checks: MAP sources in the child, MAP / SET targets in the parent.
  for (const r of routes) {
    const to = String(r.route['to']);
    const child = declared.get(to);
    const parent = declared.get(r.from)!;
    if (!r.returnsTo) continue;
    for (const m of r.mapNodes) {
      if (child && !child.memory.has(m.child) && !child.gather.has(m.child)) {
        r.file.out.error(
          r.file.pos(m.node),
          DiagnosticCode.unknownHandoffReturnField,
          `MAP source '${m.child}' is not declared by the child '${to}'`,
          `Write child_field: parent_variable, with a field the child declares in GATHER or MEMORY${child.gather.size + child.memory.size > 0 ? ` (${[...child.gather, ...child.memory].join(', ')})` : ''}.`,
        );
      }
      if (!parent.memory.has(m.parent)) {
        r.file.out.warn(
          r.file.pos(m.node),
          DiagnosticCode.mapTargetNotDeclared,
          `MAP target '${m.parent}' is not declared in the MEMORY of '${r.from}'`,
          `Declare '${m.parent}' in ${r.from}'s MEMORY, or the return applies no effects (memory_error).`,
        );
      } else if (parent.readonly.has(m.parent)) readonlyTarget(r, 'MAP', m.parent, m.node);
    }
    for (const s of r.setNodes) {
      if (!parent.memory.has(s.target)) {
        r.file.out.warn(
          r.file.pos(s.node),
          DiagnosticCode.setTargetNotDeclared,
          `SET target '${s.target}' is not declared in the MEMORY of '${r.from}'`,
          `Declare '${s.target}' in ${r.from}'s MEMORY, or the return applies no effects (memory_error).`,
        );
      } else if (parent.readonly.has(s.target)) readonlyTarget(r, 'SET', s.target, s.node);
    }
  }

  // `agents: 7`, or an agent without a name, and no other agent: the schema's "at least one agent" only repeats it.
  if (agentsRefused && compiledAgents.length === 0) refused.add('agents');
  const { project, lead, accepts, execution, meshes } = headerValues;
  const candidate: Record<string, unknown> = {
    ...(project !== undefined ? { project } : {}),
    ...(lead !== undefined ? { lead } : {}),
    ...(accepts !== undefined ? { accepts_handoffs_from: accepts } : {}),
    agents: compiledAgents,
    workflows,
    ...(execution !== undefined ? { execution } : {}),
    ...(meshes !== undefined ? { meshes } : {}),
  };
  const parsed = ProjectDefinitionSchema.safeParse(candidate);
  // The schema's cross-field checks (zod `custom` issues: an unknown TO, a step's agent...) may
  // repeat what the compiler reported already: such an issue is left out when an error stands at
  // the place it points to. Everything else is reported whatever else is wrong — a step naming no
  // agent, a reserved name, a value of the wrong shape or outside its set (a MEMORY TYPE: banana) —
  // so one pass of `baton validate` names them all: the cross-field checks the schema skipped for a
  // value out of shape are run again without it ({@link crossFieldIssues}).
  const issues = parsed.success
    ? []
    : [...parsed.error.issues, ...crossFieldIssues(candidate, parsed.error.issues, rosterKnown)].filter((issue) => rosterKnown || !rosterCheck(issue));
  const reportedAt = new Set(out.diagnostics.filter((d) => d.severity === 'error').map((d) => `${d.file}:${d.line}:${d.column}`));
  if (issues.length > 0) {
    const agentList = [...names.values()];
    for (const issue of issues) {
      const path = issue.path as (string | number)[];
      // A value the compiler refused as INVALID_VALUE (left out, or passed as written), or an unknown key it refused: said already.
      if (path.some((_, i) => refused.has(path.slice(0, i + 1).join('.'))) || strictKeysIssue(issue)) continue;
      // An agent's fields are in the agent's own document, not the header (compiled in this order).
      const agent = path[0] === 'agents' && typeof path[1] === 'number' ? agentList[path[1]] : undefined;
      // An agent's name is the value of its AGENT / SUPERVISOR / name key, where the agent was read.
      const own = issueOwnCode(issue);
      const mesh = own !== undefined && isMeshDiagnosticCode(own) ? own : undefined;
      const at =
        agent !== undefined
          ? path.length === 3 && path[2] === 'name'
            ? agent.at
            : locate(agent.file, agent.node, path.slice(2))
          : locate(header.file, header.node, path, { key: mesh === MeshDiagnosticCode.unknownAgent });

      if (
        issue.code === 'custom' &&
        !issue.message.includes(RESERVED_NAME_MESSAGE) &&
        (reportedAt.has(`${at.file}:${at.line}:${at.column}`) || compilerChecked(path))
      )
        continue;
      // A mesh check's message starts with its own code, which the diagnostic names already.
      const message = mesh !== undefined && issue.message.startsWith(`${mesh}: `) ? issue.message.slice(mesh.length + 2) : issue.message;
      out.error(
        at,
        mesh ?? DiagnosticCode.schemaViolation,
        `${issue.path.join('.') || '(project)'}: ${message}`,
        mesh !== undefined ? MESH_HINTS[mesh] : 'See docs/definitions.md for the shape of this field.',
      );
    }
  }
  if (parsed.success) {
    // Valid, but a run of it never completes by routing: nothing advances into `completed`.
    parsed.data.workflows.forEach((workflow, index) => {
      if (workflow.steps.some((step) => step.terminal === true)) return;
      out.warn(
        locate(header.file, header.node, ['workflows', index]),
        DiagnosticCode.workflowWithoutTerminal,
        `workflow '${workflow.name}' v${workflow.version} has no terminal step: its runs complete only when an agent terminates them`,
        'Mark the step that finishes the work `terminal: true` (it completes the run when its agent advances).',
      );
    });
    // Valid, but an `advance` from such a step has nowhere to go: the no-action default holds the run.
    parsed.data.workflows.forEach((workflow, index) => {
      workflow.steps.forEach((step, stepIndex) => {
        if (step.terminal === true || step.next !== undefined) return;
        out.warn(
          locate(header.file, header.node, ['workflows', index, 'steps', stepIndex]),
          DiagnosticCode.stepWithoutNext,
          `step '${step.id}' of workflow '${workflow.name}' v${workflow.version} has no next and is not terminal: an agent's advance there holds the run for a person`,
          'Give the step `next: <step id>` (the workflow edge an advance follows), or `terminal: true` if it finishes the work; leave it so only when its agent always names where to go (a task, a callback).',
        );
      });
    });
  }
  const diagnostics = out.diagnostics;
  return { project: parsed.success && !hasErrors(diagnostics) ? parsed.data : null, diagnostics };
}

/**
 * Fields whose cross-field check the compiler makes itself, at the value as written (a handoff's
 * `TO`: `UNKNOWN_HANDOFF_TARGET`): the schema's issue on them only repeats it, pointing at the agent.
 */
function compilerChecked(path: readonly PropertyKey[]): boolean {
  return path.length === 5 && path[0] === 'agents' && path[2] === 'handoffs' && path[4] === 'to';
}

/**
 * The schema's `Unrecognized key` issue on a workflow, a step or a mesh: the compiler has reported
 * each such key at the key itself ({@link normalizedMap}), in a scope that holds the contract's keys.
 */
function strictKeysIssue(issue: z.core.$ZodIssue): boolean {
  if (issue.code !== 'unrecognized_keys') return false;
  const path = issue.path;
  return (path.length === 2 && (path[0] === 'workflows' || path[0] === 'meshes')) || (path.length === 4 && path[0] === 'workflows' && path[2] === 'steps');
}

/**
 * The schema's checks that a name is on the project's roster: a step's agent, a mesh's entry,
 * agents, targets and outputs (a TO is the compiler's own, {@link compilerChecked}). Skipped while
 * an agent could not be read (see `rosterKnown` in {@link compileProject}).
 */
function rosterCheck(issue: z.core.$ZodIssue): boolean {
  if (issue.code !== 'custom') return false;
  const path = issue.path;
  if (path.length === 5 && path[0] === 'workflows' && path[2] === 'steps' && path[4] === 'agent') return true;
  const own = issueOwnCode(issue);
  return (
    own === MeshDiagnosticCode.unknownEntry ||
    own === MeshDiagnosticCode.unknownAgent ||
    own === MeshDiagnosticCode.unknownTarget ||
    own === MeshDiagnosticCode.unknownOutput
  );
}

/** A placeholder's name: an agent name's rules, and `__…__` so that no placeholder is the start of another. */
const PLACEHOLDER = /__unreadable_\d+__/g;

/**
 * The schema's cross-field checks (its refinements: a step's agent on the roster, `entry` and every
 * `next` naming a step, unique step ids, workflow versions and mesh names, the mesh build checks)
 * that it did not run on `candidate`. Zod runs an object's refinements only when every field of it
 * parsed: one value out of shape — a `human_gate: yes`, a `version: "1"`, a `TYPE: banana` — and
 * the project's own checks are skipped, every typo beside it unreported until it is fixed.
 *
 * So the checks run again on the candidate's skeleton: only what they read (agent names; each
 * workflow's name, version, entry and steps' id, agent, next and terminal; each mesh's name, entry,
 * handoffs and outputs), each value kept when its own schema takes it, else replaced by a
 * placeholder that the schema takes. A check of a placeholder is the broken value's dependant and
 * is left out: an issue at or under a replaced value's path, and, while a workflow's step ids are
 * not all readable, whether its `entry` and its `next` edges name a step (a placeholder naming a
 * step or a mesh in a message reads as the value was written). `issues` are the schema's issues on
 * `candidate`: an issue among them is not returned again.
 */
function crossFieldIssues(candidate: Record<string, unknown>, issues: readonly z.core.$ZodIssue[], rosterKnown: boolean): z.core.$ZodIssue[] {
  const replaced = new Set<string>();
  const written = new Map<string, unknown>();
  let count = 0;
  const placeholder = (path: string, value: unknown): string => {
    replaced.add(path);
    const name = `__unreadable_${count++}__`;
    written.set(name, value);
    return name;
  };
  const takes = (schema: z.ZodType, value: unknown): boolean => schema.safeParse(value).success;
  const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
  const name = (schema: z.ZodType, value: unknown, path: string): unknown => (takes(schema, value) ? value : placeholder(path, value));

  const agents = (candidate['agents'] as Record<string, unknown>[]).map((agent, index) => ({
    name: name(AgentDefinitionSchema.shape.name, agent['name'], `agents.${index}.name`),
  }));
  // No agent read: one stands in for the roster (whose checks are skipped: `rosterKnown` is false).
  if (agents.length === 0) agents.push({ name: placeholder('agents', undefined) });

  const step = WorkflowStepSchema.shape;
  const workflow = WorkflowDefinitionSchema.shape;
  const workflows = (candidate['workflows'] as unknown[]).map((w, wIndex) => {
    const at = `workflows.${wIndex}`;
    if (!isRecord(w)) return { name: placeholder(at, w), version: 1, entry: 'step', steps: [{ id: 'step', agent: agents[0]!.name }] };
    // A version of its own: no other workflow of the name is a duplicate of it.
    const version = takes(workflow.version, w['version']) ? w['version'] : Number.MAX_SAFE_INTEGER - wIndex;
    let idsKnown = true;
    const steps: Record<string, unknown>[] =
      Array.isArray(w['steps']) && w['steps'].length > 0
        ? w['steps'].map((s: unknown, sIndex) => {
            const sAt = `${at}.steps.${sIndex}`;
            if (!isRecord(s)) {
              idsKnown = false;
              return { id: placeholder(sAt, s), agent: agents[0]!.name };
            }
            if (!takes(step.id, s['id'])) idsKnown = false;
            const next = s['next'] === undefined || takes(step.next, s['next']) ? s['next'] : (replaced.add(`${sAt}.next`), undefined);
            return {
              id: name(step.id, s['id'], `${sAt}.id`),
              agent: name(step.agent, s['agent'], `${sAt}.agent`),
              ...(next !== undefined ? { next } : {}),
              ...(s['terminal'] === true ? { terminal: true } : {}),
            };
          })
        : [{ id: placeholder(`${at}.steps`, w['steps']), agent: agents[0]!.name }];
    if (!Array.isArray(w['steps']) || w['steps'].length === 0) idsKnown = false;
    if (!idsKnown) {
      // Which steps `entry` and `next` may name is not known: they name one, and a terminal step's
      // `next` is still refused (it names the step itself).
      for (const s of steps) {
        if (s['next'] === undefined) continue;
        if (s['terminal'] === true) s['next'] = s['id'];
        else delete s['next'];
      }
    }
    const entry = idsKnown && takes(workflow.entry, w['entry']) ? w['entry'] : (replaced.add(`${at}.entry`), steps[0]!['id']);
    return { name: name(workflow.name, w['name'], `${at}.name`), version, entry, steps };
  });

  const mesh = MeshDefinitionSchema.shape;
  const agentName = AgentDefinitionSchema.shape.name;
  const names = (list: unknown, path: string): unknown[] | undefined => {
    if (list === undefined) return undefined;
    if (!Array.isArray(list)) {
      replaced.add(path);
      return undefined;
    }
    return list.map((item: unknown, index) => name(agentName, item, `${path}.${index}`));
  };
  const meshes = Array.isArray(candidate['meshes'])
    ? (candidate['meshes'] as unknown[]).map((m, mIndex) => {
        const at = `meshes.${mIndex}`;
        if (!isRecord(m)) return { name: placeholder(at, m), entry: agents[0]!.name };
        const handoffs: Record<string, unknown[]> = {};
        if (isRecord(m['handoffs'])) {
          for (const [from, targets] of Object.entries(m['handoffs'])) {
            const fromAt = `${at}.handoffs.${from}`;
            if (!takes(agentName, from)) replaced.add(fromAt);
            else setOwn(handoffs, from, names(targets, fromAt) ?? []);
          }
        } else if (m['handoffs'] !== undefined) replaced.add(`${at}.handoffs`);
        const outputs = names(m['outputs'], `${at}.outputs`);
        return {
          name: name(mesh.name, m['name'], `${at}.name`),
          entry: name(mesh.entry, m['entry'], `${at}.entry`),
          handoffs,
          ...(outputs !== undefined ? { outputs } : {}),
        };
      })
    : undefined;

  const skeleton = ProjectDefinitionSchema.safeParse({
    project: takes(ProjectDefinitionSchema.shape.project, candidate['project']) ? candidate['project'] : 'project',
    agents,
    workflows,
    ...(meshes !== undefined ? { meshes } : {}),
  });
  if (skeleton.success) return [];
  const said = new Set(issues.map((issue) => `${issue.path.join('.')} ${issue.message}`));
  // As written: an empty value is nothing, a list or a map its JSON.
  const shown = (value: unknown): string => (value === null || value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value));
  return skeleton.error.issues.flatMap((issue) => {
    const path = issue.path.map(String);
    if (issue.code !== 'custom' || path.some((_, i) => replaced.has(path.slice(0, i + 1).join('.')))) return [];
    const message = issue.message.replace(PLACEHOLDER, (p) => shown(written.get(p)));
    if (said.has(`${issue.path.join('.')} ${message}`) || (!rosterKnown && rosterCheck(issue))) return [];
    return [{ ...issue, message }];
  });
}

const WORKFLOW_HINT =
  'Write `workflows:\\n  - name: ship-feature\\n    version: 1\\n    entry: code\\n    steps:\\n      - { id: code, agent: coder, terminal: true }`.';
const STEPS_HINT = 'Write `steps:\\n  - { id: code, agent: coder, next: review }\\n  - { id: review, agent: reviewer, terminal: true }`.';
const HANDLERS_HINT = 'Write `RETURN_HANDLERS:\\n  income_done:\\n    RESUME_INTENT: true`.';

/**
 * The header's own keys, each of its shape or INVALID_VALUE (left out of the compiled project;
 * `refused` gets the paths whose schema issues would repeat it): `project` and `lead` are names,
 * `accepts_handoffs_from` and `meshes` lists, `execution` a map.
 */
function readHeader(
  ctx: FileCtx,
  node: YAMLMap,
  refused: Set<string>,
): { project?: string; lead?: string; accepts?: unknown; execution?: Record<string, unknown>; meshes?: unknown } {
  const es = fields(ctx, node);
  const find = (key: string) => es.find((e) => e.key === key);
  const result: ReturnType<typeof readHeader> = {};
  const projectE = find('project');
  if (projectE) {
    result.project = nameOf(ctx, projectE, 'is a project key (lowercase letters, digits, _ and -)', 'billing');
    if (result.project === undefined) refused.add('project');
  }
  const leadE = find('lead');
  if (leadE) result.lead = nameOf(ctx, leadE, "is an agent of the project or a person's handle", 'Billing_Lead');
  const acceptsE = find('accepts_handoffs_from');
  if (acceptsE) {
    if (!isSeq(acceptsE.value)) {
      wrongShape(ctx, acceptsE, 'lists project keys (or "*" for any project)', `Write \`${acceptsE.raw}: [support, sales]\`, or \`${acceptsE.raw}: ["*"]\`.`);
    } else {
      acceptsE.value.items.forEach((item, i) => {
        const value = item as Node;
        if (isScalar(value) && typeof value.value === 'string') return;
        ctx.out.error(
          ctx.pos(value),
          DiagnosticCode.invalidValue,
          `an ${acceptsE.raw} entry is a project key or "*", not ${shapeOf(ctx, value)}`,
          `Write \`${acceptsE.raw}: [support, sales]\` (quote a key YAML reads as a number: "2024").`,
        );
        refused.add(`accepts_handoffs_from.${i}`);
      });
      result.accepts = acceptsE.value.toJSON();
    }
  }
  const executionE = find('execution');
  if (executionE && !isEmpty(executionE.value)) result.execution = readExecution(ctx, executionE);
  const meshesE = find('meshes');
  if (meshesE) {
    if (!isSeq(meshesE.value)) {
      wrongShape(
        ctx,
        meshesE,
        "lists the project's meshes",
        'Write `meshes:\\n  - name: support\\n    entry: triage\\n    handoffs:\\n      triage: [billing]` (docs/meshes.md).',
      );
    } else {
      meshesE.value.items.forEach((item, i) => {
        const value = item as Node;
        if (isMap(value)) return;
        ctx.out.error(
          ctx.pos(value),
          DiagnosticCode.invalidValue,
          `a mesh is a map, not ${shapeOf(ctx, value)}`,
          'Write `- name: support` with its `entry` and `handoffs` below it (docs/meshes.md).',
        );
        refused.add(`meshes.${i}`);
      });
      // A mesh's own fields are read by their normalized keys; its `handoffs` are keyed by agent names, kept as written.
      result.meshes = (meshesE.value.items as Node[]).map((item) => (isMap(item) ? normalizedMap(ctx, item, MESH_KEYS, 'mesh') : item.toJSON()));
    }
  }
  return result;
}

const WORKFLOW_KEYS: ReadonlySet<string> = new Set(['name', 'version', 'entry', 'steps']);
const STEP_KEYS: ReadonlySet<string> = new Set(['id', 'agent', 'next', 'terminal', 'human_gate']);
const MESH_KEYS: ReadonlySet<string> = new Set(['name', 'description', 'entry', 'handoffs', 'outputs', 'max_iterations']);

/**
 * A map of Baton's own keys as the compiled contract spells them: each key the contract knows
 * under its normalized name (`humanGate`, `HUMAN_GATE` → `human_gate`), any other as written. The
 * contract holds a workflow, a step and a mesh to their keys, and so does the compiler: any other
 * key is an error (SCHEMA_VIOLATION, at the key, naming it, its scope and the known key nearest to
 * it — a misspelt `max_iteration` silently ignored would leave the mesh's cap at its default); the
 * schema's own `Unrecognized key` issue on it is left out ({@link strictKeysIssue}). `value` reads
 * each entry's value (its JSON by default).
 */
function normalizedMap(
  ctx: FileCtx,
  map: YAMLMap,
  known: ReadonlySet<string>,
  scope: 'workflow' | 'step' | 'mesh',
  value: (e: Entry, key: string) => unknown = (e) => (e.value === null ? null : e.value.toJSON()),
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const e of fields(ctx, map)) {
    if (!known.has(e.key)) {
      ctx.out.error(
        ctx.pos(e.keyNode),
        DiagnosticCode.schemaViolation,
        `unknown ${scope} key '${e.raw}' is refused${didYouMean(e.raw, e.key, known)}`,
        `A ${scope} holds only ${[...known].join(', ')}: a key it does not have is an error, not ignored (unlike an agent's, a route's or the header's).`,
      );
    }
    const key = known.has(e.key) ? e.key : e.raw;
    setOwn(out, key, value(e, key));
  }
  return out;
}

/**
 * A `workflows:` list's entries, their keys normalized and their shapes checked as written (the
 * schema checks the rest: names, ids, `entry` and `next` naming steps, unknown keys). `first` is
 * the index of the list's first entry in the project's workflows (several documents may each list
 * some).
 */
function readWorkflows(ctx: FileCtx, list: YAMLSeq, first: number, refused: Set<string>): unknown[] {
  return (list.items as Node[]).map((item, index) => {
    const path = `workflows.${first + index}`;
    if (!isMap(item)) {
      ctx.out.error(ctx.pos(item), DiagnosticCode.invalidValue, `a workflow is a map, not ${shapeOf(ctx, item)}`, WORKFLOW_HINT);
      refused.add(path);
      return item.toJSON();
    }
    return normalizedMap(ctx, item, WORKFLOW_KEYS, 'workflow', (e, key) => {
      let ok = true;
      if (key === 'name') ok = nameOf(ctx, e, 'is a workflow name', 'ship-feature') !== undefined;
      else if (key === 'entry') ok = nameOf(ctx, e, 'is the id of the step a run starts at', 'code') !== undefined;
      else if (key === 'version') {
        ok = e.value !== null && isScalar(e.value) && typeof e.value.value === 'number' && Number.isInteger(e.value.value);
        if (!ok) wrongShape(ctx, e, 'is a whole number (1, 2, …)', `Write \`${e.raw}: 1\` (unquoted).`);
      } else if (key === 'steps') {
        if (isSeq(e.value)) return readSteps(ctx, e.value, `${path}.steps`, refused);
        ok = wrongShape(ctx, e, "lists the workflow's steps", STEPS_HINT) !== undefined;
      }
      if (!ok) refused.add(`${path}.${key}`);
      return e.value === null ? null : e.value.toJSON();
    });
  });
}

function readSteps(ctx: FileCtx, list: YAMLSeq, path: string, refused: Set<string>): unknown[] {
  return (list.items as Node[]).map((item, index) => {
    if (!isMap(item)) {
      ctx.out.error(
        ctx.pos(item),
        DiagnosticCode.invalidValue,
        `a step is a map of id, agent, next, terminal and human_gate, not ${shapeOf(ctx, item)}`,
        STEPS_HINT,
      );
      refused.add(`${path}.${index}`);
      return item.toJSON();
    }
    return normalizedMap(ctx, item, STEP_KEYS, 'step', (e, key) => {
      let ok = true;
      if (key === 'id') ok = nameOf(ctx, e, 'is a step id', 'code') !== undefined;
      else if (key === 'agent') ok = nameOf(ctx, e, 'is an agent of the project', 'coder') !== undefined;
      else if (key === 'next') ok = nameOf(ctx, e, 'is the id of a step of the workflow', 'review') !== undefined;
      else if (key === 'terminal' || key === 'human_gate') ok = strictFlag(ctx, e) !== undefined;
      if (!ok) refused.add(`${path}.${index}.${key}`);
      return e.value === null ? null : e.value.toJSON();
    });
  });
}

/** What to do about each mesh build check (docs/errors.md §3.5). */
const MESH_HINTS: Record<MeshDiagnosticCode, string> = {
  MESH_UNKNOWN_ENTRY: 'Name an agent of the project as the entry (or add the agent to `agents`).',
  MESH_UNKNOWN_AGENT: 'List only agents of the project in the mesh (or add the agent to `agents`).',
  MESH_UNKNOWN_TARGET: 'Hand off only to agents of the project (or add the agent to `agents`).',
  MESH_UNKNOWN_OUTPUT_AGENT: 'Name only agents of the project as outputs.',
  MESH_SELF_HANDOFF: 'Remove the agent from its own handoff targets.',
  MESH_DUPLICATE_HANDOFF: 'List each target once per agent.',
  MESH_TOOL_NAME_COLLISION: 'Rename one of the targets: both give the same handoff_to_<name> tool once sanitized.',
  MESH_DUPLICATE_NAME: 'Give each mesh its own name.',
};

const MESH_CODES: ReadonlySet<string> = new Set(Object.values(MeshDiagnosticCode));
const isMeshDiagnosticCode = (code: string): code is MeshDiagnosticCode => MESH_CODES.has(code);

/** Best-effort position of a zod issue path under `node` (a header or an agent document; falls back to `node` itself). */
function locate(file: FileCtx, node: YAMLMap, path: (string | number)[], options: { key?: boolean } = {}): Pos {
  let current: Node = node;
  for (const [index, part] of path.entries()) {
    if (isMap(current)) {
      // A list the source writes as a map keyed by name (MEMORY, GATHER: `income: {TYPE: number}`)
      // compiles in the map's order: item n is the map's n-th entry.
      const all = entries(current);
      // A key that is a name (an agent under a mesh's `handoffs`) is matched as written; a field name
      // also in its normalized form (`maxHops` is `max_hops`).
      const e: Entry | undefined =
        all.find((x) => x.raw === String(part)) ?? all.find((x) => x.key === String(part)) ?? (typeof part === 'number' ? all[part] : undefined);
      // What is wrong is the last key itself (a mesh's `handoffs` naming an unknown agent): its key, not its value.
      if (options.key === true && index === path.length - 1 && e?.keyNode) return file.pos(e.keyNode);
      if (!e?.value) break;
      current = e.value;
    } else if (isSeq(current) && typeof part === 'number') {
      const next = current.items[part] as Node | undefined;
      if (!next) break;
      current = next;
    } else break;
  }
  return file.pos(current);
}

/** Read an agent's name; false (with the error reported) when it has none of a name's shape. */
function collectAgent(ctx: FileCtx, node: YAMLMap, into: RawAgent[]): boolean {
  const es = fields(ctx, node);
  // A header key in an agent's map would be ignored (an agent document has no project of its own).
  for (const e of es) {
    if (!HEADER_KEYS_IN_AGENT.has(e.key)) continue;
    ctx.out.error(
      ctx.pos(e.keyNode),
      DiagnosticCode.headerKeyOutsideHeader,
      `'${e.raw}' is a project header key, not an agent key: in an agent's definition it would be ignored`,
      'Write the project header (`project: <key>` with lead, accepts_handoffs_from, meshes…) as a document of its own, separated by `---`; an agent document (AGENT / SUPERVISOR) or an `agents:` entry holds agent keys only.',
    );
  }
  // SUPERVISOR is the agent's name, or true / false beside AGENT or name; anything else would
  // silently compile the agent as no supervisor.
  const supervisorE = es.find((e) => e.key === 'supervisor');
  const supervisorValue = supervisorE?.value ?? null;
  if (supervisorE && !isEmpty(supervisorValue) && !(isScalar(supervisorValue) && ['string', 'boolean'].includes(typeof supervisorValue.value))) {
    wrongShape(ctx, supervisorE, "is the agent's name (or true beside AGENT or name)", 'Write `SUPERVISOR: Name`, or `AGENT: Name` with `SUPERVISOR: true`.');
    return false;
  }
  const nameEntry =
    es.find((e) => e.key === 'supervisor' && e.value && isScalar(e.value) && typeof e.value.value === 'string') ??
    es.find((e) => e.key === 'agent' || e.key === 'name');
  const supervisor = es.some((e) => e.key === 'supervisor' && e.value && isScalar(e.value) && (e.value.value === true || typeof e.value.value === 'string'));
  if (nameEntry?.value && !isScalar(nameEntry.value)) {
    wrongShape(ctx, nameEntry, "is the agent's name", `Write \`${nameEntry.raw}: Name\` (letters, digits, _ and -).`);
    return false;
  }
  const name = nameEntry?.value && isScalar(nameEntry.value) && nameEntry.value.value !== null ? String(nameEntry.value.value) : '';
  if (name === '') {
    ctx.out.error(ctx.pos(node), DiagnosticCode.invalidValue, 'an agent needs a name', 'Write `AGENT: Name`, `SUPERVISOR: Name` or `name: Name`.');
    return false;
  }
  into.push({ at: ctx.pos(nameEntry?.value ?? node), file: ctx, node, name, supervisor });
  return true;
}

function str(node: Node | null): string | undefined {
  if (node && isScalar(node) && node.value !== null && typeof node.value !== 'object') return String(node.value);
  return undefined;
}

/** What a node is, in a diagnostic's words. */
function shapeOf(ctx: FileCtx, node: Node | null): string {
  if (node === null) return 'empty';
  if (isSeq(node)) return 'a list';
  if (isMap(node)) return 'a map';
  return ctx.raw(node) || 'empty';
}

/** A value written empty (`KEY:` and nothing after it). */
function isEmpty(node: Node | null): boolean {
  return node === null || (isScalar(node) && node.value === null);
}

/**
 * A value of the wrong shape: INVALID_VALUE `<key as written> <what it should be>, not <what was
 * written>` at the value (at its key when there is no value node). Returns undefined, for the
 * caller to leave the value out: nothing of the wrong shape reaches the compiled project.
 */
function wrongShape(ctx: FileCtx, e: Pick<Entry, 'raw' | 'keyNode' | 'value'>, expected: string, hint: string): undefined {
  ctx.out.error(ctx.pos(e.value ?? e.keyNode), DiagnosticCode.invalidValue, `${e.raw} ${expected}, not ${shapeOf(ctx, e.value)}`, hint);
  return undefined;
}

/**
 * A name as written (a project key, a lead, a workflow's name, a step's id or agent): a string.
 * A number, `true` / `false`, an empty value, a list or a map is INVALID_VALUE (a name YAML reads
 * as a number is quoted: `id: "1"`).
 */
function nameOf(ctx: FileCtx, e: Entry, expected: string, example: string): string | undefined {
  const value = e.value;
  if (value !== null && isScalar(value) && typeof value.value === 'string') return value.value;
  const unquoted = value !== null && isScalar(value) && value.value !== null && typeof value.value !== 'object';
  return wrongShape(
    ctx,
    e,
    expected,
    `Write \`${e.raw}: ${example}\`${unquoted ? ` (quote a name YAML reads as a number or true/false: \`${e.raw}: "${ctx.raw(value)}"\`)` : ''}.`,
  );
}

/** A boolean that must be written (a step's `terminal`, `human_gate`): `true` or `false`; anything else, empty included, is INVALID_VALUE. */
function strictFlag(ctx: FileCtx, e: Entry): boolean | undefined {
  if (e.value !== null && isScalar(e.value) && typeof e.value.value === 'boolean') return e.value.value;
  return wrongShape(ctx, e, 'is true or false', `Write \`${e.raw}: true\` or \`${e.raw}: false\` (unquoted).`);
}

/**
 * A text value (`ROLE`, `GOAL`, `SUMMARY`, `PROMPT`…): a scalar, as YAML reads it (`ROLE: 42` is
 * the text `42`). A list or a map is INVALID_VALUE, never dropped without a word; an empty value
 * is no value.
 */
function text(ctx: FileCtx, node: Node | null, key: string): string | undefined {
  if (node === null || (isScalar(node) && node.value === null)) return undefined;
  const value = str(node);
  if (value === undefined) {
    ctx.out.error(
      ctx.pos(node),
      DiagnosticCode.invalidValue,
      `${key} is a text, not ${shapeOf(ctx, node)}`,
      `Write \`${key}: some text\` (quote it if it holds a colon).`,
    );
  }
  return value;
}

/** A boolean (`REQUIRED`, `READONLY`, `RESUME_INTENT`…): `true` or `false`; anything else is INVALID_VALUE. */
function flag(ctx: FileCtx, node: Node | null, key: string): boolean | undefined {
  if (node === null || (isScalar(node) && node.value === null)) return undefined;
  if (isScalar(node) && typeof node.value === 'boolean') return node.value;
  ctx.out.error(
    ctx.pos(node),
    DiagnosticCode.invalidValue,
    `${key} is true or false, not ${shapeOf(ctx, node)}`,
    `Write \`${key}: true\` or \`${key}: false\` (unquoted).`,
  );
  return undefined;
}

/** PASS: a list of variable names; anything else is INVALID_VALUE (nothing is passed). */
function readPass(ctx: FileCtx, node: Node | null, key: string): string[] {
  if (node === null || (isScalar(node) && node.value === null)) return [];
  if (!isSeq(node)) {
    ctx.out.error(ctx.pos(node), DiagnosticCode.invalidValue, `${key} lists variable names, not ${shapeOf(ctx, node)}`, `Write \`${key}: [annual_income]\`.`);
    return [];
  }
  const names: string[] = [];
  for (const item of node.items as Node[]) {
    const name = str(item);
    if (name === undefined)
      ctx.out.error(
        ctx.pos(item),
        DiagnosticCode.invalidValue,
        `a ${key} entry is a variable name, not ${shapeOf(ctx, item)}`,
        `Write \`${key}: [annual_income]\`.`,
      );
    else names.push(name);
  }
  return names;
}

/** A condition: a valid expression, or quoted natural language (judged by the agent's model). */
function readCondition(ctx: FileCtx, node: Node | null, what: string, at?: Node): CompiledCondition | undefined {
  if (node === null || !isScalar(node)) {
    ctx.out.error(
      ctx.pos(node ?? at),
      DiagnosticCode.invalidCondition,
      `${what} must be a condition string, not ${shapeOf(ctx, node)}`,
      'Write e.g. `annual_income IS NOT SET`.',
    );
    return undefined;
  }
  const source = String(node.value ?? '');
  const parsed = parseCondition(source);
  if (parsed.ok) return { kind: 'expression', source };
  const quoted = (node as Scalar).type === 'QUOTE_DOUBLE' || (node as Scalar).type === 'QUOTE_SINGLE';
  if (quoted) return { kind: 'intent', text: source };
  ctx.out.error(
    ctx.pos(node),
    DiagnosticCode.invalidCondition,
    `${what} '${source}' is not a condition: ${parsed.message}`,
    'Use IS SET, IS NOT SET, =, !=, <, >, <=, >=, AND, OR; quote natural language ("the customer asks ...") to let the model judge it.',
  );
  return undefined;
}

const MEMORY_HINT = 'Write `MEMORY:\\n  session:\\n    - name: my_var\\n      TYPE: string`.';

function readMemory(ctx: FileCtx, node: Node | null): { items: Record<string, unknown>[]; names: Set<string> } {
  const items: Record<string, unknown>[] = [];
  const names = new Set<string>();
  /** One setting of a variable (TYPE, DESCRIPTION, READONLY), in either way of writing it. */
  const setting = (variable: Record<string, unknown>, e: Entry) => {
    if (e.key === 'type') variable['type'] = text(ctx, e.value, e.raw)?.toLowerCase();
    else if (e.key === 'description') variable['description'] = text(ctx, e.value, e.raw);
    else if (e.key === 'readonly' || e.key === 'read_only') variable['readonly'] = flag(ctx, e.value, e.raw) === true;
    else if (e.key === 'writable') variable['readonly'] = flag(ctx, e.value, e.raw) !== true;
    else
      ctx.out.warn(
        ctx.pos(e.keyNode),
        DiagnosticCode.unknownKey,
        `unknown memory key '${e.raw}' is ignored${didYouMean(e.raw, e.key, ['name', 'type', 'description', 'readonly'])}`,
        'Memory keys: NAME, TYPE, DESCRIPTION, READONLY.',
      );
  };
  const visit = (list: Node | null, scope: string) => {
    if (list === null) return;
    if (!isSeq(list)) {
      ctx.out.error(ctx.pos(list), DiagnosticCode.invalidValue, `MEMORY lists variables, not ${shapeOf(ctx, list)}`, MEMORY_HINT);
      return;
    }
    for (const item of list.items as Node[]) {
      let variable: Record<string, unknown> | null = null;
      if (isScalar(item) && item.value !== null) variable = { name: String(item.value) };
      else if (isMap(item)) {
        const es = fields(ctx, item);
        const nameE = es.find((e) => e.key === 'name');
        if (nameE) {
          if (nameE.value !== null && !isScalar(nameE.value)) {
            wrongShape(ctx, nameE, 'is a variable name', 'Write `- name: my_var`.');
            continue;
          }
          variable = { name: str(nameE.value) };
          for (const e of es) if (e.key !== 'name') setting(variable, e);
        } else if (es.length === 1 && es[0]) {
          // `- annual_income: { TYPE: number }`
          const only = es[0];
          variable = { name: only.raw };
          if (only.value && isMap(only.value)) {
            for (const e of fields(ctx, only.value)) setting(variable, e);
          } else if (!isEmpty(only.value)) {
            wrongShape(
              ctx,
              { ...only, raw: `memory variable '${only.raw}'` },
              'is a map of TYPE, DESCRIPTION and READONLY',
              `Write \`- ${only.raw}: { TYPE: string }\`, or \`- name: ${only.raw}\` with TYPE below it.`,
            );
            names.add(only.raw); // declared all the same: a MAP or SET into it is not a second mistake
            continue;
          }
        }
      }
      if (variable === null || typeof variable['name'] !== 'string') {
        ctx.out.error(
          ctx.pos(item),
          DiagnosticCode.invalidValue,
          isSeq(item) ? 'a memory variable is a name or a map, not a list' : 'a memory variable needs a name',
          'Write `- name: my_var`.',
        );
        continue;
      }
      variable['scope'] = scope;
      items.push(variable);
      names.add(variable['name']);
    }
  };
  if (node && isMap(node)) {
    for (const e of fields(ctx, node)) {
      if (e.key === 'session') visit(e.value, 'session');
      else
        ctx.out.warn(
          ctx.pos(e.keyNode),
          DiagnosticCode.unknownKey,
          `unknown memory scope '${e.raw}' is ignored${didYouMean(e.raw, e.key, ['session'])}`,
          'Baton has one memory scope: session.',
        );
    }
  } else visit(node, 'session');
  return { items, names };
}

function readGather(ctx: FileCtx, node: Node | null): { items: Record<string, unknown>[]; names: Set<string> } {
  const items: Record<string, unknown>[] = [];
  const names = new Set<string>();
  if (node && isMap(node)) {
    for (const e of entries(node)) {
      const field: Record<string, unknown> = { name: e.raw };
      if (e.value && isMap(e.value)) {
        for (const f of fields(ctx, e.value)) {
          if (f.key === 'prompt') field['prompt'] = text(ctx, f.value, f.raw);
          else if (f.key === 'type') field['type'] = text(ctx, f.value, f.raw)?.toLowerCase();
          else if (f.key === 'required') field['required'] = flag(ctx, f.value, f.raw) === true;
          else
            ctx.out.warn(
              ctx.pos(f.keyNode),
              DiagnosticCode.unknownKey,
              `unknown gather key '${f.raw}' is ignored${didYouMean(f.raw, f.key, ['prompt', 'type', 'required'])}`,
              'Gather keys: PROMPT, TYPE, REQUIRED.',
            );
        }
      } else if (!isEmpty(e.value)) {
        // An empty field takes the defaults; `f: 5` would silently be a field of no settings.
        wrongShape(
          ctx,
          { ...e, raw: `GATHER field '${e.raw}'` },
          'is a map of PROMPT, TYPE and REQUIRED',
          `Write \`${e.raw}:\` with \`PROMPT\`, \`TYPE\` and \`REQUIRED\` below it.`,
        );
        names.add(e.raw); // declared all the same: a MAP reading it is not a second mistake
        continue;
      }
      items.push(field);
      names.add(e.raw);
    }
  } else if (node !== null) {
    ctx.out.error(
      ctx.pos(node),
      DiagnosticCode.invalidValue,
      `GATHER maps field names to their settings, not ${shapeOf(ctx, node)}`,
      'Write `GATHER:\\n  my_field:\\n    TYPE: string`.',
    );
  }
  return { items, names };
}

/** W803: a MAP or SET target the parent declares READONLY — the parent may not write it, so every return applies no effects. */
function readonlyTarget(r: PendingRoute, kind: 'MAP' | 'SET', target: string, node: Node | null): void {
  r.file.out.warn(
    r.file.pos(node),
    DiagnosticCode.returnTargetReadonly,
    `${kind} target '${target}' is READONLY in the MEMORY of '${r.from}'`,
    `The parent must be allowed to write each MAP and SET target: make '${target}' writable or map into another variable, or every return of this route applies no effects (memory_error).`,
  );
}

/** The agents whose own documents define a return handler named `name` (in document order). */
function handlerOwners(names: ReadonlyMap<string, RawAgent>, name: string): string[] {
  const owners: string[] = [];
  for (const agent of names.values()) {
    const own = entries(agent.node).find((e) => e.key === 'return_handlers')?.value;
    if (own && isMap(own) && entries(own).some((h) => h.raw === name)) owners.push(agent.name);
  }
  return owners;
}

/**
 * A MAP (of a route's ON_RETURN or a return handler): `child_field: parent_variable` pairs. A MAP
 * that is not a map, or a target that is not a name (a list, a map, empty), is INVALID_VALUE and
 * left out.
 */
function readMapPairs(ctx: FileCtx, e: Entry): { child: string; parent: string; node: Node }[] {
  if (e.value === null || !isMap(e.value)) {
    wrongShape(ctx, { ...e, raw: 'MAP' }, 'is child_field: parent_variable pairs', 'Write `MAP:\\n  child_field: parent_variable`.');
    return [];
  }
  const pairs: { child: string; parent: string; node: Node }[] = [];
  for (const m of entries(e.value)) {
    const parent = str(m.value);
    if (parent === undefined) wrongShape(ctx, { ...m, raw: `MAP target of '${m.raw}'` }, 'is a variable name', `Write \`${m.raw}: parent_variable\`.`);
    else pairs.push({ child: m.raw, parent, node: m.keyNode });
  }
  return pairs;
}

/**
 * A SET (of a route's ON_RETURN or a return handler): `parent_variable: value` pairs, each value
 * a text, a number, true, false or null (empty). A SET that is not a map, or a list or a map as
 * a value, is INVALID_VALUE and left out.
 */
function readSetPairs(ctx: FileCtx, e: Entry): { target: string; value: unknown; node: Node }[] {
  if (e.value === null || !isMap(e.value)) {
    wrongShape(ctx, { ...e, raw: 'SET' }, 'is parent_variable: value pairs', 'Write `SET:\\n  my_var: "value"`.');
    return [];
  }
  const pairs: { target: string; value: unknown; node: Node }[] = [];
  for (const s of entries(e.value)) {
    if (s.value === null || isScalar(s.value)) pairs.push({ target: s.raw, value: s.value?.value ?? null, node: s.keyNode });
    else wrongShape(ctx, { ...s, raw: `SET value of '${s.raw}'` }, 'is a text, a number, true, false or null', `Write \`${s.raw}: "value"\`.`);
  }
  return pairs;
}

function readHandlers(ctx: FileCtx, node: YAMLMap, into: Map<string, RawHandler>): void {
  for (const e of entries(node)) {
    const handler: RawHandler = { at: ctx.pos(e.keyNode), resumeIntent: false, map: {}, set: {} };
    if (e.value && isMap(e.value)) {
      for (const h of fields(ctx, e.value)) {
        if (h.key === 'resume_intent') handler.resumeIntent = flag(ctx, h.value, h.raw) === true;
        else if (h.key === 'respond') handler.respond = text(ctx, h.value, h.raw);
        else if (h.key === 'resume_with') handler.resumeWith = text(ctx, h.value, h.raw);
        else if (h.key === 'map') for (const m of readMapPairs(ctx, h)) setOwn(handler.map, m.child, m.parent);
        else if (h.key === 'set') for (const m of readSetPairs(ctx, h)) setOwn(handler.set, m.target, m.value);
        else
          ctx.out.warn(
            ctx.pos(h.keyNode),
            DiagnosticCode.unknownKey,
            `unknown handler key '${h.raw}' is ignored${didYouMean(h.raw, h.key, ['resume_intent', 'resume_with', 'respond', 'map', 'set'])}`,
            'Handler keys: RESUME_INTENT, RESUME_WITH, RESPOND, MAP, SET.',
          );
      }
    } else if (!isEmpty(e.value)) {
      // An empty handler takes the defaults (continue); `income_done: 5` would silently be one too.
      wrongShape(
        ctx,
        { ...e, raw: `return handler '${e.raw}'` },
        'is a map of RESUME_INTENT, RESUME_WITH, RESPOND, MAP and SET',
        `Write \`${e.raw}:\` with \`RESUME_INTENT: true\` (or RESPOND, MAP, SET) below it.`,
      );
    }
    if (handler.respond !== undefined && handler.resumeIntent) {
      ctx.out.error(
        handler.at,
        DiagnosticCode.onReturnActionAndHandler,
        `return handler '${e.raw}' combines RESPOND with RESUME_INTENT`,
        'Pick one: RESPOND answers the customer, RESUME_INTENT replays a message.',
      );
    }
    into.set(e.raw, handler);
  }
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A DEADLINE: a duration such as `30m`, `1.5s`, `500ms`, `2h`, `1d`, or a whole number of
 * milliseconds (always milliseconds for a `*_ms` key). Reports INVALID_VALUE and returns
 * undefined for anything else, or a value outside 1 ms … 30 days.
 */
function readDuration(ctx: FileCtx, node: Node | null, key: string, msOnly: boolean): number | undefined {
  const value = node !== null && isScalar(node) ? node.value : undefined;
  let ms: number | undefined;
  if (typeof value === 'number') ms = value;
  else if (typeof value === 'string') {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/i.exec(value);
    if (match && (!msOnly || match[2] === undefined)) ms = Number(match[1]) * DURATION_UNITS_MS[(match[2] ?? 'ms').toLowerCase()]!;
  }
  if (ms === undefined || !Number.isFinite(ms) || ms < 1 || ms > MAX_RETURN_DEADLINE_MS) {
    ctx.out.error(
      ctx.pos(node),
      DiagnosticCode.invalidValue,
      `${key} is a duration between 1ms and 30d`,
      msOnly ? `Write ${key}: 1800000 (milliseconds).` : `Write e.g. ${key}: 30m (ms, s, m, h or d).`,
    );
    return undefined;
  }
  return Math.round(ms);
}

const EXECUTION_HINT = (key: string) => `Write \`${key}:\\n  return_deadline: 30m\\n  pipeline:\\n    parentReturn:\\n      minConfidence: 0.8\`.`;

/**
 * EXECUTION (the project's or a supervisor's): a map of `return_deadline` (or
 * `return_deadline_ms`) and `pipeline: parentReturn: { minConfidence, ignoreAmbiguous }`. A value
 * of another shape at any level is INVALID_VALUE (the settings are left out); an empty
 * `pipeline` or `parentReturn` is none; unknown keys are UNKNOWN_KEY.
 */
function readExecution(ctx: FileCtx, e: Entry): Record<string, unknown> | undefined {
  const node = e.value;
  const hint = EXECUTION_HINT(e.raw);
  if (node === null || !isMap(node)) return wrongShape(ctx, e, 'is a map of return_deadline and pipeline', hint);
  let ok = true;
  let deadline: number | undefined;
  let pipeline: Record<string, unknown> | undefined;
  for (const x of fields(ctx, node)) {
    if (x.key === 'return_deadline' || x.key === 'return_deadline_ms') {
      deadline = readDuration(ctx, x.value, x.raw, x.key === 'return_deadline_ms');
      ok &&= deadline !== undefined;
    } else if (x.key === 'pipeline') {
      if (isEmpty(x.value)) continue;
      pipeline = readPipeline(ctx, x, hint);
      ok &&= pipeline !== undefined;
    } else
      ctx.out.warn(
        ctx.pos(x.keyNode),
        DiagnosticCode.unknownKey,
        `unknown ${e.raw} key '${x.raw}' is ignored${didYouMean(x.raw, x.key, ['return_deadline', 'return_deadline_ms', 'pipeline'])}`,
        `${e.raw} keys: return_deadline (or return_deadline_ms), pipeline.`,
      );
  }
  if (!ok) return undefined;
  return { ...(pipeline !== undefined ? { pipeline } : {}), ...(deadline !== undefined ? { return_deadline_ms: deadline } : {}) };
}

/** EXECUTION's `pipeline`: a map holding `parentReturn` (see {@link readExecution}). */
function readPipeline(ctx: FileCtx, e: Entry, hint: string): Record<string, unknown> | undefined {
  if (e.value === null || !isMap(e.value)) return wrongShape(ctx, e, 'is a map holding parentReturn', hint);
  const pipeline: Record<string, unknown> = {};
  for (const x of fields(ctx, e.value)) {
    if (x.key !== 'parent_return') {
      ctx.out.warn(
        ctx.pos(x.keyNode),
        DiagnosticCode.unknownKey,
        `unknown pipeline key '${x.raw}' is ignored${didYouMean(x.raw, x.key, ['parent_return'])}`,
        'pipeline keys: parentReturn.',
      );
      continue;
    }
    if (isEmpty(x.value)) continue;
    if (x.value === null || !isMap(x.value)) return wrongShape(ctx, x, 'is a map of minConfidence and ignoreAmbiguous', hint);
    const settings: Record<string, unknown> = {};
    let ok = true;
    for (const s of fields(ctx, x.value)) {
      if (s.key === 'min_confidence') {
        if (s.value !== null && isScalar(s.value) && typeof s.value.value === 'number') settings['min_confidence'] = s.value.value;
        else ok = wrongShape(ctx, s, 'is a number between 0 and 1', `Write \`${s.raw}: 0.8\`.`) !== undefined;
      } else if (s.key === 'ignore_ambiguous') {
        const value = flag(ctx, s.value, s.raw);
        if (value !== undefined) settings['ignore_ambiguous'] = value;
        else ok &&= isEmpty(s.value);
      } else
        ctx.out.warn(
          ctx.pos(s.keyNode),
          DiagnosticCode.unknownKey,
          `unknown parentReturn key '${s.raw}' is ignored${didYouMean(s.raw, s.key, ['min_confidence', 'ignore_ambiguous'])}`,
          'parentReturn keys: minConfidence, ignoreAmbiguous.',
        );
    }
    if (!ok) return undefined;
    pipeline['parent_return'] = settings;
  }
  return pipeline;
}

const COMPLETE_HINT = 'Write `COMPLETE:\\n  - WHEN: annual_income IS SET\\n    RESPOND: "Thanks."`.';

/**
 * COMPLETE: a list of `{ WHEN, RESPOND }` (one such map alone is read as a list of it; empty is
 * none). A scalar, or an entry that is not a map, is INVALID_VALUE: dropped without a word, the
 * child would never return.
 */
function readComplete(ctx: FileCtx, e: Entry): Record<string, unknown>[] | undefined {
  if (isEmpty(e.value)) return [];
  const list = isSeq(e.value) ? (e.value.items as Node[]) : isMap(e.value) ? [e.value] : undefined;
  if (list === undefined) return wrongShape(ctx, e, 'lists conditions (WHEN, RESPOND)', COMPLETE_HINT);
  const conditions: Record<string, unknown>[] = [];
  let ok = true;
  for (const item of list) {
    if (!isMap(item)) {
      ctx.out.error(ctx.pos(item), DiagnosticCode.invalidValue, `a ${e.raw} entry is a map of WHEN and RESPOND, not ${shapeOf(ctx, item)}`, COMPLETE_HINT);
      ok = false;
      continue;
    }
    let when: CompiledCondition | undefined;
    let respond: string | undefined;
    const c = fields(ctx, item);
    for (const x of c) {
      if (x.key === 'when') when = readCondition(ctx, x.value, 'COMPLETE WHEN', x.keyNode);
      else if (x.key === 'respond') respond = text(ctx, x.value, x.raw);
      else
        ctx.out.warn(
          ctx.pos(x.keyNode),
          DiagnosticCode.unknownKey,
          `unknown COMPLETE key '${x.raw}' is ignored${didYouMean(x.raw, x.key, ['when', 'respond'])}`,
          'COMPLETE keys: WHEN, RESPOND.',
        );
    }
    if (!c.some((x) => x.key === 'when')) readCondition(ctx, null, 'COMPLETE WHEN', item);
    if (when) conditions.push({ when, ...(respond !== undefined ? { respond } : {}) });
  }
  return ok ? conditions : undefined;
}

function compileAgent(
  agent: RawAgent,
  names: ReadonlyMap<string, RawAgent>,
  projectHandlers: ReadonlyMap<string, RawHandler>,
  routes: PendingRoute[],
  rosterKnown: boolean,
): { agent: Record<string, unknown>; memory: Set<string>; gather: Set<string>; auth?: { profile: AuthProfile; at: Pos } } {
  const ctx = agent.file;
  let auth: { profile: AuthProfile; at: Pos } | undefined;
  const out: Record<string, unknown> = { name: agent.name };
  if (agent.supervisor) out['supervisor'] = true;
  let memory = new Set<string>();
  let gather = new Set<string>();
  const handlers = new Map(projectHandlers);
  const es = fields(ctx, agent.node);
  const handlersEntry = es.find((e) => e.key === 'return_handlers');
  if (handlersEntry && !isEmpty(handlersEntry.value)) {
    if (handlersEntry.value && isMap(handlersEntry.value)) readHandlers(ctx, handlersEntry.value, handlers);
    else wrongShape(ctx, handlersEntry, 'maps handler names to their settings', HANDLERS_HINT);
  }
  for (const e of es) {
    if (HEADER_KEYS_IN_AGENT.has(e.key)) continue; // HEADER_KEY_OUTSIDE_HEADER (collectAgent)
    if (!AGENT_KEYS.has(e.key)) {
      ctx.out.warn(
        ctx.pos(e.keyNode),
        DiagnosticCode.unknownKey,
        `unknown agent key '${e.raw}' is ignored${didYouMean(e.raw, e.key, AGENT_KEYS)}`,
        `Agent keys: ${[...AGENT_KEYS].join(', ')}.`,
      );
      continue;
    }
    switch (e.key) {
      case 'role':
      case 'goal':
        out[e.key] = text(ctx, e.value, e.raw);
        break;
      case 'memory': {
        const m = readMemory(ctx, e.value);
        out['memory'] = m.items;
        memory = m.names;
        break;
      }
      case 'gather': {
        const g = readGather(ctx, e.value);
        out['gather'] = g.items;
        gather = g.names;
        break;
      }
      case 'complete': {
        const complete = readComplete(ctx, e);
        if (complete) out['complete'] = complete;
        break;
      }
      case 'enabled_when': {
        const when = readCondition(ctx, e.value, 'ENABLED_WHEN', e.keyNode);
        if (when) out['enabled_when'] = when;
        break;
      }
      case 'auth': {
        auth = readAuth(ctx, e);
        if (auth) out['auth'] = auth.profile;
        break;
      }
      case 'execution': {
        const execution = isEmpty(e.value) ? undefined : readExecution(ctx, e);
        if (execution) out['execution'] = execution;
        break;
      }
      default:
        break;
    }
  }
  const handoffEntry = es.find((e) => e.key === 'handoff' || e.key === 'handoffs');
  if (handoffEntry?.value) {
    if (!isSeq(handoffEntry.value)) {
      wrongShape(ctx, handoffEntry, 'lists routes', 'Write `HANDOFF:\\n  - TO: Agent`.');
    } else {
      const compiled: Record<string, unknown>[] = [];
      for (const item of handoffEntry.value.items as Node[]) {
        const route = compileRoute(ctx, agent.name, item, names, handlers, routes, rosterKnown);
        if (route) compiled.push(route);
      }
      out['handoffs'] = compiled;
    }
  }
  return { agent: out, memory, gather, ...(auth ? { auth } : {}) };
}

const AUTH_HINT =
  'Write `AUTH: required`, or a block: `AUTH:` then `REQUIRED: true` and `VARIABLE: customer_verified` (the session variable that is true once the customer is authenticated).';

/**
 * AUTH: the agent's authentication profile. `AUTH: required` (the session variable
 * `authenticated`), or a map of REQUIRED (a boolean; default true) and VARIABLE (a variable name;
 * default `authenticated`). Anything else is INVALID_AUTH_PROFILE (an error: a profile Baton
 * cannot read must not compile into an agent that is open to everyone). `at` is where the
 * variable is named (the AUTH key when it is the default).
 */
function readAuth(ctx: FileCtx, e: Entry): { profile: AuthProfile; at: Pos } | undefined {
  /** A value written empty (`KEY:`) is reported at its key. */
  const written = (value: Node | null): Node | null => (value !== null && isScalar(value) && value.value === null ? null : value);
  const node = written(e.value);
  const invalid = (at: Node, message: string): undefined => {
    ctx.out.error(ctx.pos(at), DiagnosticCode.invalidAuthProfile, message, AUTH_HINT);
    return undefined;
  };
  if (node !== null && isScalar(node) && typeof node.value === 'string' && node.value.trim().toLowerCase() === 'required') {
    return { profile: { required: true, variable: DEFAULT_AUTH_VARIABLE }, at: ctx.pos(e.keyNode) };
  }
  if (node === null || !isMap(node)) {
    const what = node === null ? 'empty' : isScalar(node) ? `'${ctx.raw(node).trim()}'` : 'a list';
    return invalid(node ?? e.keyNode, `${e.raw} is ${what}: it is \`required\` or a block of REQUIRED and VARIABLE`);
  }
  const profile: AuthProfile = { required: true, variable: DEFAULT_AUTH_VARIABLE };
  let at = ctx.pos(e.keyNode);
  let ok = true;
  for (const a of fields(ctx, node)) {
    const value = written(a.value);
    if (a.key === 'required') {
      if (value !== null && isScalar(value) && typeof value.value === 'boolean') profile.required = value.value;
      else {
        invalid(value ?? a.keyNode, `AUTH ${a.raw} is ${value !== null ? `'${ctx.raw(value)}'` : 'empty'}, not true or false`);
        ok = false;
      }
    } else if (a.key === 'variable') {
      const name = value !== null && isScalar(value) && typeof value.value === 'string' ? value.value : undefined;
      if (value !== null && name !== undefined && VariableNameSchema.safeParse(name).success) {
        profile.variable = name;
        at = ctx.pos(value);
      } else {
        invalid(
          value ?? a.keyNode,
          `AUTH ${a.raw} ${value !== null ? `'${ctx.raw(value)}'` : '(empty)'} is not a variable name (letters, digits and _, not starting with a digit)`,
        );
        ok = false;
      }
    } else {
      ctx.out.warn(
        ctx.pos(a.keyNode),
        DiagnosticCode.unknownKey,
        `unknown AUTH key '${a.raw}' is ignored${didYouMean(a.raw, a.key, ['required', 'variable'])}`,
        'AUTH keys: REQUIRED, VARIABLE.',
      );
    }
  }
  return ok ? { profile, at } : undefined;
}

const TRUTHY_LOOKALIKES = /^(true|yes|on|1)$/i;

function compileRoute(
  ctx: FileCtx,
  from: string,
  item: Node,
  names: ReadonlyMap<string, RawAgent>,
  handlers: ReadonlyMap<string, RawHandler>,
  routes: PendingRoute[],
  /** False when an agent could not be read: a TO naming no agent read is not refused (it may be that one). */
  rosterKnown: boolean,
): Record<string, unknown> | null {
  if (!isMap(item)) {
    ctx.out.error(ctx.pos(item), DiagnosticCode.invalidValue, 'a HANDOFF route is a map', 'Write `- TO: Agent`.');
    return null;
  }
  const es = fields(ctx, item);
  const route: Record<string, unknown> = {};
  const toE = es.find((e) => e.key === 'to');
  if (toE?.value && !isScalar(toE.value)) {
    wrongShape(ctx, toE, 'is an agent name', `Write \`${toE.raw}: Agent_Name\`.`);
    return null;
  }
  const to = str(toE?.value ?? null);
  if (to === undefined || toE?.value == null) {
    ctx.out.error(ctx.pos(item), DiagnosticCode.unknownHandoffTarget, 'a HANDOFF route has no TO', 'Add `TO: <agent name>`.');
    return null;
  }
  route['to'] = to;
  if (!names.has(to)) {
    const known = [...names.keys()].join(', ');
    if (rosterKnown)
      ctx.out.error(
        ctx.pos(toE.value),
        DiagnosticCode.unknownHandoffTarget,
        `TO target '${to}' is not an agent of the project`,
        `Every TO target must exist. Agents: ${known}.`,
      );
  } else if (to === from) {
    ctx.out.warn(
      ctx.pos(toE.value),
      DiagnosticCode.selfHandoff,
      `'${from}' hands off to itself`,
      'The runtime refuses a route to the already-active agent: recursion while it works, target_waiting_for_input when it waits for the customer.',
    );
  }
  let returns = false;
  let returnSeen: Node | null = null;
  let returnRefused = false;
  const mapNodes: PendingRoute['mapNodes'] = [];
  const setNodes: PendingRoute['setNodes'] = [];
  let onReturnNode: Entry | undefined;
  let history: HistoryPolicy | undefined;
  for (const e of es) {
    if (!ROUTE_KEYS.has(e.key)) {
      ctx.out.warn(
        ctx.pos(e.keyNode),
        DiagnosticCode.unknownKey,
        `unknown HANDOFF key '${e.raw}' is ignored${didYouMean(e.raw, e.key, ROUTE_KEYS)}`,
        `Route keys: ${[...ROUTE_KEYS].map((k) => k.toUpperCase()).join(', ')}.`,
      );
      continue;
    }
    switch (e.key) {
      case 'when': {
        const when = readCondition(ctx, e.value, 'WHEN', e.keyNode);
        if (when) route['when'] = when;
        break;
      }
      case 'summary':
        route['summary'] = text(ctx, e.value, e.raw);
        break;
      case 'pass':
        route['pass'] = readPass(ctx, e.value, e.raw);
        break;
      case 'history':
        history = readHistory(ctx, e.value) ?? history;
        break;
      case 'return':
      case 'expect_return': {
        returnSeen = e.value;
        const value = e.value;
        if (value !== null && !isScalar(value)) {
          returnRefused = true;
          wrongShape(ctx, e, 'is true or false', `Write \`${e.raw}: true\` (lowercase, unquoted) or \`${e.raw}: false\`.`);
          break;
        }
        const lowercaseTrue = value !== null && isScalar(value) && value.type === 'PLAIN' && ctx.raw(value) === 'true';
        const jsonTrue = value !== null && isScalar(value) && value.value === true && ctx.raw(value) === 'true';
        returns = lowercaseTrue || jsonTrue;
        if (!returns && value !== null && isScalar(value) && TRUTHY_LOOKALIKES.test(String(value.value))) {
          ctx.out.warn(
            ctx.pos(value),
            DiagnosticCode.returnNotLowercaseTrue,
            `${e.raw}: ${ctx.raw(value)} reads as false: the handoff is permanent`,
            'Write RETURN: true (lowercase, unquoted).',
          );
        }
        break;
      }
      case 'context':
        history = readContext(ctx, e.value, route) ?? history;
        break;
      case 'on_return':
        onReturnNode = e;
        break;
      case 'on_failure': {
        const failure = readOnFailure(ctx, e.value);
        if (failure) route['on_failure'] = failure;
        break;
      }
      case 'deadline':
      case 'deadline_ms': {
        const ms = readDuration(ctx, e.value, e.raw, e.key === 'deadline_ms');
        if (ms !== undefined) route['deadline_ms'] = ms;
        break;
      }
      default:
        break;
    }
  }
  if (history) route['history'] = history;
  route['return'] = returns;
  let onReturnAt: Pos | null = null;
  if (onReturnNode) {
    onReturnAt = ctx.pos(onReturnNode.keyNode);
    if (!returns && !returnRefused) {
      ctx.out.warn(
        onReturnAt,
        DiagnosticCode.onReturnWithoutReturn,
        `ON_RETURN on a route to '${to}' that does not return: it never runs`,
        returnSeen !== null ? 'Write RETURN: true (lowercase) to make the handoff returnable, or remove ON_RETURN.' : 'Add RETURN: true, or remove ON_RETURN.',
      );
    }
    const onReturn = readOnReturn(ctx, onReturnNode.value, handlers, mapNodes, setNodes, (name) => handlerOwners(names, name));
    if (onReturn && returns) route['on_return'] = onReturn;
  }
  routes.push({ file: ctx, from, toNode: toE.value, route, mapNodes, setNodes, onReturnAt, returnsTo: returns });
  return route;
}

function readHistory(ctx: FileCtx, node: Node | null): HistoryPolicy | undefined {
  if (node === null) return undefined;
  if (isScalar(node)) {
    const mode = String(node.value).toLowerCase();
    if (mode === 'full' || mode === 'auto' || mode === 'none' || mode === 'summary_only') return { mode };
    if (mode === 'last_n') {
      ctx.out.warn(
        ctx.pos(node),
        DiagnosticCode.inlineLastNHistory,
        'a last_n history without a count falls back to full',
        'Write HISTORY as an indented block: `mode: last_n` and `count: 4`.',
      );
      return { mode: 'full' };
    }
    ctx.out.error(
      ctx.pos(node),
      DiagnosticCode.invalidValue,
      `unknown HISTORY '${String(node.value)}'`,
      'Use full, auto, none, summary_only or a last_n block.',
    );
    return undefined;
  }
  if (isMap(node)) {
    if (node.flow === true) {
      ctx.out.warn(
        ctx.pos(node),
        DiagnosticCode.inlineLastNHistory,
        'a one-line history map is ignored and falls back to full',
        'Write the history as an indented block:\n  history:\n    mode: last_n\n    count: 4',
      );
      return { mode: 'full' };
    }
    const es = fields(ctx, node);
    for (const e of es) {
      if (e.key === 'mode' || e.key === 'count') continue;
      ctx.out.warn(
        ctx.pos(e.keyNode),
        DiagnosticCode.unknownKey,
        `unknown HISTORY key '${e.raw}' is ignored${didYouMean(e.raw, e.key, ['mode', 'count'])}`,
        'HISTORY keys: mode, count.',
      );
    }
    const mode = str(es.find((e) => e.key === 'mode')?.value ?? null)?.toLowerCase();
    const count = es.find((e) => e.key === 'count')?.value;
    if (mode === 'last_n') {
      const n = count && isScalar(count) ? Number(count.value) : NaN;
      if (!Number.isInteger(n) || n < 1) {
        ctx.out.warn(
          ctx.pos(node),
          DiagnosticCode.inlineLastNHistory,
          'a last_n history without a positive count falls back to full',
          'Add `count: <n>` under `mode: last_n`.',
        );
        return { mode: 'full' };
      }
      return { mode: 'last_n', count: n };
    }
    return readHistory(ctx, es.find((e) => e.key === 'mode')?.value ?? null);
  }
  ctx.out.error(
    ctx.pos(node),
    DiagnosticCode.invalidValue,
    `HISTORY is a mode or a last_n block, not ${shapeOf(ctx, node)}`,
    'Use full, auto, none, summary_only or a last_n block.',
  );
  return undefined;
}

/** CONTEXT groups pass, summary and history; its keys must be lowercase. */
function readContext(ctx: FileCtx, node: Node | null, route: Record<string, unknown>): HistoryPolicy | undefined {
  if (node === null || !isMap(node)) {
    ctx.out.error(
      ctx.pos(node),
      DiagnosticCode.invalidValue,
      `CONTEXT is a map of pass, summary and history, not ${shapeOf(ctx, node)}`,
      'Write `CONTEXT:\\n  summary: "..."`.',
    );
    return undefined;
  }
  let history: HistoryPolicy | undefined;
  for (const e of entries(node)) {
    if (e.raw !== e.raw.toLowerCase()) {
      ctx.out.warn(
        ctx.pos(e.keyNode),
        DiagnosticCode.contextKeyNotLowercase,
        `CONTEXT key '${e.raw}' is uppercase and is ignored`,
        `Keys inside CONTEXT must be lowercase: write '${e.raw.toLowerCase()}'.`,
      );
      continue;
    }
    if (e.raw === 'pass') route['pass'] = readPass(ctx, e.value, 'pass');
    else if (e.raw === 'summary') route['summary'] = text(ctx, e.value, 'summary');
    else if (e.raw === 'history') history = readHistory(ctx, e.value);
    else
      ctx.out.warn(
        ctx.pos(e.keyNode),
        DiagnosticCode.unknownKey,
        `unknown CONTEXT key '${e.raw}' is ignored${didYouMean(e.raw, e.raw, ['pass', 'summary', 'history'])}`,
        'CONTEXT keys: pass, summary, history.',
      );
  }
  return history;
}

function readOnFailure(ctx: FileCtx, node: Node | null): OnFailure | undefined {
  const text = str(node)?.trim();
  if (text === undefined) {
    ctx.out.error(
      ctx.pos(node),
      DiagnosticCode.invalidValue,
      `ON_FAILURE is continue, ESCALATE or RESPOND "message", not ${shapeOf(ctx, node)}`,
      'Write e.g. ON_FAILURE: RESPOND "Please try again later."',
    );
    return undefined;
  }
  if (/^continue$/i.test(text)) return { action: 'continue' };
  if (/^escalate$/i.test(text)) return { action: 'escalate' };
  const respond = /^respond\s+(["'])([\s\S]*)\1$/i.exec(text);
  if (respond) return { action: 'respond', message: respond[2]! };
  ctx.out.error(ctx.pos(node), DiagnosticCode.invalidValue, `unknown ON_FAILURE '${text}'`, 'Use continue, ESCALATE or RESPOND "message".');
  return undefined;
}

function readOnReturn(
  ctx: FileCtx,
  node: Node | null,
  handlers: ReadonlyMap<string, RawHandler>,
  mapNodes: PendingRoute['mapNodes'],
  setNodes: PendingRoute['setNodes'],
  /** The agents whose own documents define a handler of this name (which this route cannot use). */
  ownersOf: (name: string) => string[] = () => [],
): Record<string, unknown> | null {
  if (node === null || !isMap(node)) {
    ctx.out.error(ctx.pos(node), DiagnosticCode.invalidValue, `ON_RETURN is a map, not ${shapeOf(ctx, node)}`, 'Write `ON_RETURN:\\n  action: continue`.');
    return null;
  }
  const es = fields(ctx, node);
  const result: Record<string, unknown> = { action: 'continue', map: {}, set: {} };
  const actionE = es.find((e) => e.key === 'action');
  const handlerE = es.find((e) => e.key === 'handler');
  if (actionE && handlerE) {
    ctx.out.error(
      ctx.pos(handlerE.keyNode),
      DiagnosticCode.onReturnActionAndHandler,
      'ON_RETURN names both an action and a handler',
      'Use the handler alone (its RESUME_INTENT / RESPOND decide), or the action alone.',
    );
  }
  if (handlerE?.value && !isScalar(handlerE.value)) {
    wrongShape(ctx, handlerE, 'is the name of a RETURN_HANDLERS entry', `Write \`${handlerE.raw}: income_done\`.`);
  } else if (handlerE) {
    const name = str(handlerE.value) ?? '';
    const handler = handlers.get(name);
    if (!handler) {
      const owners = ownersOf(name);
      ctx.out.error(
        ctx.pos(handlerE.value),
        DiagnosticCode.unknownReturnHandler,
        owners.length > 0
          ? `return handler '${name}' is defined only in the document of ${owners.map((o) => `'${o}'`).join(', ')}, which this route cannot use`
          : `return handler '${name}' is not defined`,
        owners.length > 0
          ? "A route uses the handlers of its own agent's document and of the project header: move it to RETURN_HANDLERS there."
          : `Define it under RETURN_HANDLERS${handlers.size > 0 ? ` (defined: ${[...handlers.keys()].join(', ')})` : ''}.`,
      );
    } else {
      result['handler'] = name;
      result['action'] = handler.resumeIntent ? 'resume_intent' : 'continue';
      if (handler.resumeWith) result['resume_with'] = handler.resumeWith;
      if (handler.respond !== undefined) result['respond'] = handler.respond;
      result['map'] = { ...handler.map };
      result['set'] = { ...handler.set };
      for (const [child, parent] of Object.entries(handler.map)) mapNodes.push({ child, parent: String(parent), node: handlerE.value ?? node });
      for (const target of Object.keys(handler.set)) setNodes.push({ target, node: handlerE.value ?? node });
    }
  }
  for (const e of es) {
    switch (e.key) {
      case 'action': {
        if (e.value !== null && !isScalar(e.value)) {
          wrongShape(ctx, e, 'is continue or resume_intent', `Write \`${e.raw}: continue\` or \`${e.raw}: resume_intent\`.`);
          break;
        }
        const action = str(e.value)?.toLowerCase() ?? '';
        if (action === 'continue' || action === 'resume_intent') result['action'] = action;
        else {
          ctx.out.warn(
            ctx.pos(e.value),
            DiagnosticCode.unsupportedOnReturnAction,
            `unsupported ON_RETURN action '${action}': the parent runs continue`,
            'Use continue or resume_intent.',
          );
          result['action'] = 'continue';
        }
        break;
      }
      case 'resume_with':
        result['resume_with'] = text(ctx, e.value, e.raw);
        break;
      case 'map': {
        const map = result['map'] as Record<string, string>;
        for (const m of readMapPairs(ctx, e)) {
          setOwn(map, m.child, m.parent);
          mapNodes.push(m);
        }
        break;
      }
      case 'set': {
        const set = result['set'] as Record<string, unknown>;
        for (const s of readSetPairs(ctx, e)) {
          setOwn(set, s.target, s.value);
          setNodes.push(s);
        }
        break;
      }
      case 'handler':
        break;
      default:
        ctx.out.warn(
          ctx.pos(e.keyNode),
          DiagnosticCode.unknownKey,
          `unknown ON_RETURN key '${e.raw}' is ignored${didYouMean(e.raw, e.key, ['action', 'resume_with', 'map', 'set', 'handler'])}`,
          'ON_RETURN keys: action, resume_with, MAP, SET, handler.',
        );
    }
  }
  const resumeWith = result['resume_with'];
  if (
    resumeWith !== undefined &&
    !['original_handoff_utterance', 'latest_child_user_utterance', 'latest_session_user_utterance', 'forwarded_return_message'].includes(String(resumeWith))
  ) {
    ctx.out.error(
      ctx.pos(node),
      DiagnosticCode.invalidValue,
      `unknown RESUME_WITH '${String(resumeWith)}'`,
      'Use original_handoff_utterance, latest_child_user_utterance, latest_session_user_utterance or forwarded_return_message.',
    );
    delete result['resume_with'];
  }
  return result;
}
