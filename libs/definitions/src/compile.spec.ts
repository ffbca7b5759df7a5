import { compileProject } from './compile';
import { formatDiagnostic, type Diagnostic } from './diagnostics';
import { LOAN_EXAMPLE_YAML } from './examples';

const HEADER = `project: loans
---
`;
const CHILD = `---
AGENT: Income_Capture_Agent
GATHER:
  annual_income:
    TYPE: number
COMPLETE:
  - WHEN: annual_income IS SET
`;
const compile = (text: string) => compileProject([{ path: 'loans.yaml', text }]);
const codes = (ds: Diagnostic[]) => ds.map((d) => `${d.severity}:${d.code}`);
const supervisor = (routeLines: string, extra = '') => `${HEADER}SUPERVISOR: Loan_Supervisor
MEMORY:
  session:
    - annual_income
      TYPE: number
${extra}HANDOFF:
  - TO: Income_Capture_Agent
${routeLines}
${CHILD}`;

describe('definition compiler (seed 001)', () => {
  it("compiles seed 001's loan example, written with the seed's uppercase keys, without diagnostics", () => {
    const result = compile(LOAN_EXAMPLE_YAML);
    expect(result.diagnostics).toEqual([]);
    const sup = result.project!.agents.find((a) => a.name === 'Loan_Supervisor')!;
    expect(sup.supervisor).toBe(true);
    expect(sup.memory).toEqual([expect.objectContaining({ name: 'annual_income', type: 'number', scope: 'session' })]);
    const [gate, offer] = sup.handoffs!;
    expect(gate).toMatchObject({
      to: 'Income_Capture_Agent',
      when: { kind: 'expression', source: 'annual_income IS NOT SET' },
      history: { mode: 'summary_only' },
      return: true,
      on_return: { action: 'resume_intent', resume_with: 'original_handoff_utterance', map: { annual_income: 'annual_income' } },
      on_failure: { action: 'respond', message: 'I cannot collect your income details right now. Please try again later.' },
    });
    expect(offer).toMatchObject({ to: 'Offer_Agent', pass: ['annual_income'], return: false, history: { mode: 'full' } });
    const child = result.project!.agents.find((a) => a.name === 'Income_Capture_Agent')!;
    expect(child.handoffs![0]!.when).toEqual({ kind: 'intent', text: 'the customer asks about something other than income' });
    expect(child.complete).toEqual([{ when: { kind: 'expression', source: 'annual_income IS SET' }, respond: 'Thanks. I have your income.' }]);
  });

  it('every TO target must exist (UNKNOWN_HANDOFF_TARGET with file, line and column)', () => {
    const result = compile(`${HEADER}AGENT: A\nHANDOFF:\n  - TO: Nobody\n`);
    expect(result.project).toBeNull();
    expect(result.diagnostics).toEqual([
      expect.objectContaining({ file: 'loans.yaml', line: 5, column: 9, severity: 'error', code: 'UNKNOWN_HANDOFF_TARGET' }),
    ]);
    expect(formatDiagnostic(result.diagnostics[0]!)).toMatch(
      /^loans\.yaml:5:9 error UNKNOWN_HANDOFF_TARGET TO target 'Nobody' .* — Every TO target must exist/,
    );
  });

  it('one pass names every error: a step naming no agent is reported beside an unknown TO, which is reported once', () => {
    const text = `project: loans\nworkflows:\n  - name: flow\n    version: 1\n    entry: work\n    steps:\n      - id: work\n        agent: ghost\n---\nAGENT: worker\nHANDOFF:\n  - TO: nobody\n`;
    const result = compile(text);
    expect(result.diagnostics.map((d) => `${d.line}:${d.column} ${d.code} ${d.message}`)).toEqual([
      "12:9 UNKNOWN_HANDOFF_TARGET TO target 'nobody' is not an agent of the project",
      "8:16 SCHEMA_VIOLATION workflows.0.steps.0.agent: agent 'ghost' of step 'work' is not listed in the project's agents",
    ]);
  });

  it('a MAP source that the child does not declare gives UNKNOWN_HANDOFF_RETURN_FIELD', () => {
    const result = compile(supervisor('    RETURN: true\n    ON_RETURN:\n      action: continue\n      MAP:\n        income: annual_income'));
    expect(codes(result.diagnostics)).toEqual(['error:UNKNOWN_HANDOFF_RETURN_FIELD']);
    expect(result.diagnostics[0]!.line).toBe(14);
  });

  it('writing child: parent in the wrong order is caught: the parent name is not a child field', () => {
    const result = compile(
      supervisor('    RETURN: true\n    ON_RETURN:\n      MAP:\n        annual_income: income_total', '').replace(
        '    - annual_income\n      TYPE: number',
        '    - income_total\n      TYPE: number',
      ),
    );
    expect(codes(result.diagnostics)).toEqual([]);
    const swapped = compile(
      supervisor('    RETURN: true\n    ON_RETURN:\n      MAP:\n        income_total: annual_income', '').replace(
        '    - annual_income\n      TYPE: number',
        '    - income_total\n      TYPE: number',
      ),
    );
    expect(codes(swapped.diagnostics)).toEqual(['error:UNKNOWN_HANDOFF_RETURN_FIELD', 'warning:W802']);
  });

  it('ON_RETURN on a RETURN: false route warns HANDOFF_ON_RETURN_WITHOUT_RETURN (it never runs)', () => {
    const result = compile(supervisor('    RETURN: false\n    ON_RETURN:\n      action: continue'));
    expect(codes(result.diagnostics)).toEqual(['warning:HANDOFF_ON_RETURN_WITHOUT_RETURN']);
    expect(result.project!.agents[0]!.handoffs![0]!.on_return).toBeUndefined();
  });

  it.each([['True'], ['"true"'], ['TRUE']])('RETURN: %s reads as false, with a warning', (written) => {
    const result = compile(supervisor(`    RETURN: ${written}\n    ON_RETURN:\n      action: continue`));
    expect(codes(result.diagnostics)).toEqual(['warning:HANDOFF_RETURN_NOT_LOWERCASE_TRUE', 'warning:HANDOFF_ON_RETURN_WITHOUT_RETURN']);
    expect(result.project!.agents[0]!.handoffs![0]!.return).toBe(false);
  });

  it('a route with no RETURN line is permanent', () => {
    const result = compile(supervisor('    WHEN: annual_income IS NOT SET'));
    expect(result.project!.agents[0]!.handoffs![0]!.return).toBe(false);
  });

  it('EXPECT_RETURN is an alias for RETURN', () => {
    const result = compile(supervisor('    EXPECT_RETURN: true\n    ON_RETURN:\n      action: continue\n      MAP:\n        annual_income: annual_income'));
    expect(result.diagnostics).toEqual([]);
    expect(result.project!.agents[0]!.handoffs![0]!.return).toBe(true);
  });

  it('an unknown action gives UNSUPPORTED_HANDOFF_ON_RETURN_ACTION and runs continue', () => {
    const result = compile(supervisor('    RETURN: true\n    ON_RETURN:\n      action: restart'));
    expect(codes(result.diagnostics)).toEqual(['warning:UNSUPPORTED_HANDOFF_ON_RETURN_ACTION']);
    expect(result.project!.agents[0]!.handoffs![0]!.on_return!.action).toBe('continue');
  });

  it('a handler combining RESPOND with RESUME_INTENT is an error (HANDOFF_ON_RETURN_ACTION_AND_HANDLER)', () => {
    const result = compile(
      supervisor(
        '    RETURN: true\n    ON_RETURN:\n      handler: income_done',
        'RETURN_HANDLERS:\n  income_done:\n    RESUME_INTENT: true\n    RESPOND: "Got it."\n',
      ),
    );
    expect(codes(result.diagnostics)).toEqual(['error:HANDOFF_ON_RETURN_ACTION_AND_HANDLER']);
    expect(result.project).toBeNull();
  });

  it('a named return handler is merged into the route, with the route MAP', () => {
    const result = compile(
      supervisor(
        '    RETURN: true\n    ON_RETURN:\n      handler: income_done\n      MAP:\n        annual_income: annual_income',
        'RETURN_HANDLERS:\n  income_done:\n    RESUME_INTENT: true\n',
      ),
    );
    expect(result.diagnostics).toEqual([]);
    expect(result.project!.agents[0]!.handoffs![0]!.on_return).toEqual({
      action: 'resume_intent',
      handler: 'income_done',
      resume_with: 'original_handoff_utterance',
      map: { annual_income: 'annual_income' },
      set: {},
    });
  });

  it("a handler defined in another agent's document is named there: UNKNOWN_RETURN_HANDLER says where it is and why this route cannot use it", () => {
    const childWithHandler = CHILD + 'RETURN_HANDLERS:\n  income_done:\n    RESUME_INTENT: true\n';
    const text = `${HEADER}SUPERVISOR: Loan_Supervisor
MEMORY:
  session:
    - annual_income
      TYPE: number
HANDOFF:
  - TO: Income_Capture_Agent
    RETURN: true
    ON_RETURN:
      handler: income_done
${childWithHandler}`;
    const result = compile(text);
    expect(codes(result.diagnostics)).toEqual(['error:UNKNOWN_RETURN_HANDLER']);
    expect(result.diagnostics[0]!.message).toBe(
      "return handler 'income_done' is defined only in the document of 'Income_Capture_Agent', which this route cannot use",
    );
    expect(result.diagnostics[0]!.hint).toMatch(/its own agent's document and of the project header/);
    // Defined nowhere: the message says so, as before.
    const nowhere = compile(supervisor('    RETURN: true\n    ON_RETURN:\n      handler: missing'));
    expect(nowhere.diagnostics.map((d) => d.message)).toEqual(["return handler 'missing' is not defined"]);
  });

  it('a MAP or SET target the parent declares READONLY gives W803 (the parent may not write it: every return would fail memory_error)', () => {
    const text = `${HEADER}SUPERVISOR: Loan_Supervisor
MEMORY:
  session:
    - name: annual_income
      TYPE: number
      READONLY: true
    - name: income_note
      TYPE: string
      READONLY: true
    - name: free_note
      TYPE: string
HANDOFF:
  - TO: Income_Capture_Agent
    RETURN: true
    ON_RETURN:
      action: continue
      MAP:
        annual_income: annual_income
      SET:
        income_note: "collected"
        free_note: "collected"
${CHILD}`;
    const result = compile(text);
    expect(codes(result.diagnostics)).toEqual(['warning:W803', 'warning:W803']);
    expect(result.diagnostics.map((d) => d.message)).toEqual([
      "MAP target 'annual_income' is READONLY in the MEMORY of 'Loan_Supervisor'",
      "SET target 'income_note' is READONLY in the MEMORY of 'Loan_Supervisor'",
    ]);
    expect(result.project).not.toBeNull(); // a warning: the definition still compiles
  });

  it('a SET target not declared in the parent MEMORY gives W801', () => {
    const result = compile(
      supervisor('    RETURN: true\n    ON_RETURN:\n      action: continue\n      SET:\n        income_note: "Income collected by the income agent."'),
    );
    expect(codes(result.diagnostics)).toEqual(['warning:W801']);
    const declared = compile(
      supervisor('    RETURN: true\n    ON_RETURN:\n      action: continue\n      SET:\n        income_note: "Income collected by the income agent."').replace(
        '      TYPE: number\n',
        '      TYPE: number\n    - income_note\n      TYPE: string\n',
      ),
    );
    expect(declared.diagnostics).toEqual([]);
  });

  it('uppercase keys inside CONTEXT are ignored, with a warning; lowercase ones apply', () => {
    const result = compile(
      supervisor('    RETURN: true\n    CONTEXT:\n      pass: []\n      SUMMARY: "ignored"\n      history:\n        mode: last_n\n        count: 4'),
    );
    expect(codes(result.diagnostics)).toEqual(['warning:HANDOFF_CONTEXT_KEY_NOT_LOWERCASE']);
    const route = result.project!.agents[0]!.handoffs![0]!;
    expect(route.summary).toBeUndefined();
    expect(route.pass).toEqual([]);
    expect(route.history).toEqual({ mode: 'last_n', count: 4 });
  });

  it('a one-line { mode: last_n } falls back to full, with a warning', () => {
    const result = compile(supervisor('    RETURN: true\n    CONTEXT:\n      history: { mode: last_n, count: 4 }'));
    expect(codes(result.diagnostics)).toEqual(['warning:HANDOFF_HISTORY_INLINE_LAST_N']);
    expect(result.project!.agents[0]!.handoffs![0]!.history).toEqual({ mode: 'full' });
  });

  it('an unquoted WHEN that is not a condition is an error; quoted natural language is an intent', () => {
    const result = compile(supervisor('    WHEN: annual_income IS MISSING'));
    expect(codes(result.diagnostics)).toEqual(['error:INVALID_CONDITION']);
  });

  it('accepts JSON: "true" reads as false with a warning, true as true', () => {
    const json = JSON.stringify({
      project: 'loans',
      agents: [
        {
          name: 'A',
          handoff: [
            { to: 'B', return: 'true' },
            { to: 'B', return: true },
          ],
        },
        { name: 'B' },
      ],
    });
    const result = compileProject([{ path: 'p.json', text: json }]);
    expect(codes(result.diagnostics)).toEqual(['warning:HANDOFF_RETURN_NOT_LOWERCASE_TRUE']);
    expect(result.project!.agents[0]!.handoffs!.map((r) => r.return)).toEqual([false, true]);
  });

  it("a mesh that does not build is reported under the failing check's own code (MESH_SELF_HANDOFF), the code the router refuses it with", () => {
    const text = `project: loans
meshes:
  - name: intake
    entry: Income_Capture_Agent
    handoffs:
      Income_Capture_Agent: [Income_Capture_Agent]
${CHILD}`;
    const result = compile(text);
    expect(result.project).toBeNull();
    expect(codes(result.diagnostics)).toEqual(['error:MESH_SELF_HANDOFF']);
    expect(result.diagnostics[0]!.message).toContain('meshes.0.handoffs.Income_Capture_Agent');
  });

  it('a workflow with no terminal step compiles with a warning, WORKFLOW_WITHOUT_TERMINAL at the workflow (its runs never complete by routing)', () => {
    const text = `project: loans
workflows:
  - name: loop
    version: 1
    entry: a
    steps:
      - { id: a, agent: Income_Capture_Agent, next: b }
      - { id: b, agent: Income_Capture_Agent, next: a }
  - name: done
    version: 1
    entry: a
    steps:
      - { id: a, agent: Income_Capture_Agent, terminal: true }
${CHILD}`;
    const result = compile(text);
    expect(result.project).not.toBeNull();
    expect(codes(result.diagnostics)).toEqual(['warning:WORKFLOW_WITHOUT_TERMINAL']);
    expect(result.diagnostics[0]).toMatchObject({ line: 3, message: expect.stringContaining("workflow 'loop' v1 has no terminal step") });
  });

  it('a step with no next that is not terminal compiles with a warning, STEP_WITHOUT_NEXT at the step (an advance there holds the run)', () => {
    const text = `project: loans
workflows:
  - name: two-step
    version: 1
    entry: r1
    steps:
      - { id: r1, agent: Income_Capture_Agent }
      - { id: r2, agent: Income_Capture_Agent, terminal: true }
${CHILD}`;
    const result = compile(text);
    expect(result.project).not.toBeNull();
    expect(codes(result.diagnostics)).toEqual(['warning:STEP_WITHOUT_NEXT']);
    expect(result.diagnostics[0]).toMatchObject({ line: 7, message: expect.stringContaining("step 'r1' of workflow 'two-step' v1 has no next") });
  });

  it('YAML syntax errors carry a position', () => {
    const result = compile('project: loans\nagents:\n  - name: A\n   bad: [\n');
    expect(result.project).toBeNull();
    expect(result.diagnostics[0]).toEqual(expect.objectContaining({ code: 'YAML_SYNTAX', severity: 'error', line: expect.any(Number) }));
    // The document that did not parse names the project: no MISSING_PROJECT beside the syntax error.
    const unclosed = compile('project: loans\nagents: [ { name: a\n');
    expect(new Set(codes(unclosed.diagnostics))).toEqual(new Set(['error:YAML_SYNTAX']));
  });

  it('parentReturn settings compile on the supervisor and the project', () => {
    const result = compile(
      `project: loans\nexecution:\n  pipeline:\n    parentReturn:\n      minConfidence: 0.5\n---\nSUPERVISOR: S\nEXECUTION:\n  pipeline:\n    parentReturn:\n      minConfidence: 0.8\n      ignoreAmbiguous: true\n`,
    );
    expect(result.diagnostics).toEqual([]);
    expect(result.project!.execution).toEqual({ pipeline: { parent_return: { min_confidence: 0.5 } } });
    expect(result.project!.agents[0]!.execution).toEqual({ pipeline: { parent_return: { min_confidence: 0.8, ignore_ambiguous: true } } });
  });

  it.each([
    ['DEADLINE: 30m', 1_800_000],
    ['DEADLINE: 1.5s', 1500],
    ['DEADLINE: 2h', 7_200_000],
    ['DEADLINE_MS: 1500', 1500],
  ])('a returnable route may declare a deadline (%s → %i ms)', (line, ms) => {
    const result = compile(supervisor(`    RETURN: true\n    ${line}`));
    expect(result.diagnostics.filter((d) => d.severity === 'error')).toEqual([]);
    expect(result.project!.agents[0]!.handoffs![0]).toMatchObject({ return: true, deadline_ms: ms });
  });

  it.each(['DEADLINE: soon', 'DEADLINE: 0s', 'DEADLINE: 90d', 'DEADLINE_MS: 30m'])('%s is not a deadline: INVALID_VALUE with a hint', (line) => {
    const result = compile(supervisor(`    RETURN: true\n    ${line}`));
    expect(codes(result.diagnostics)).toContain('error:INVALID_VALUE');
    expect(result.diagnostics.find((d) => d.code === 'INVALID_VALUE')!.hint).toMatch(/30m|milliseconds/);
  });

  it.each([
    ['ROLE: [1, 2]', 'ROLE is a text, not a list', 'ROLE: [1, 2]'],
    ['GOAL: {a: 1}', 'GOAL is a text, not a map', 'GOAL: {a: 1}'],
    ['GATHER:\n  f:\n    REQUIRED: maybe', 'REQUIRED is true or false, not maybe', 'REQUIRED: maybe'],
    ['GATHER:\n  f:\n    PROMPT: [a]', 'PROMPT is a text, not a list', 'PROMPT: [a]'],
  ])('a value of the wrong shape is INVALID_VALUE at its own line, never dropped without a word (%s)', (lines, message, marker) => {
    const text = `${HEADER}AGENT: Worker\n${lines}\n`;
    const result = compile(text);
    const invalid = result.diagnostics.filter((d) => d.code === 'INVALID_VALUE');
    expect(invalid).toEqual([expect.objectContaining({ severity: 'error', message })]);
    const line = text.split('\n').findIndex((l) => l.includes(marker)) + 1;
    expect(invalid[0]!.line).toBe(line);
    expect(result.project).toBeNull();
  });

  it('one pass names every mistake: a value outside its set (a GATHER TYPE) beside an INVALID_VALUE elsewhere, not only once that is fixed', () => {
    const text = `${HEADER}AGENT: Worker\nGATHER:\n  f:\n    TYPE: widget\n    REQUIRED: maybe\n`;
    const result = compile(text);
    expect(codes(result.diagnostics).sort()).toEqual(['error:INVALID_VALUE', 'error:SCHEMA_VIOLATION']);
    const schema = result.diagnostics.find((d) => d.code === 'SCHEMA_VIOLATION')!;
    expect(schema.message).toMatch(/gather\.0\.type/);
    // At the TYPE line itself: GATHER's item 0 is the map's first entry (`f:`).
    expect(schema.line).toBe(text.split('\n').findIndex((l) => l.includes('TYPE: widget')) + 1);
  });

  it('a mesh check names its code once, with a hint of its own', () => {
    const result = compile(`project: loans\nagents:\n  - name: A\n  - name: B\nmeshes:\n  - name: m1\n    entry: ghost\n    handoffs:\n      A: [B]\n`);
    const entry = result.diagnostics.find((d) => d.code === 'MESH_UNKNOWN_ENTRY')!;
    expect(entry.message).not.toContain('MESH_UNKNOWN_ENTRY');
    expect(entry.message).toMatch(/^meshes\.0\.entry: /);
    expect(entry.hint).toMatch(/entry/);
  });

  it('a mesh target that is no agent name is refused for that, not also as a tool-name collision with the name it resembles', () => {
    const result = compile(
      `project: loans\nagents:\n  - name: A\n  - name: tech-support\nmeshes:\n  - name: m1\n    entry: A\n    handoffs:\n      A: [Tech.Support, tech-support]\n`,
    );
    expect(result.project).toBeNull();
    expect(result.diagnostics.map((d) => d.code)).not.toContain('MESH_TOOL_NAME_COLLISION');
    expect(result.diagnostics.some((d) => d.message.includes('Tech.Support'))).toBe(true);
  });

  it("a mesh's handoffs naming an unknown agent point at that agent's key; an unknown target at the target itself", () => {
    const text = `project: loans\nagents:\n  - name: A\n  - name: B\nmeshes:\n  - name: m1\n    entry: A\n    handoffs:\n      A: [B]\n      Ghost: [A]\n      B:\n        - A\n        - Phantom\n`;
    const lines = text.split('\n');
    const result = compile(text);
    const agent = result.diagnostics.find((d) => d.code === 'MESH_UNKNOWN_AGENT')!;
    expect(agent).toMatchObject({ line: lines.findIndex((l) => l.includes('Ghost:')) + 1, column: 7 });
    const target = result.diagnostics.find((d) => d.code === 'MESH_UNKNOWN_TARGET')!;
    expect(target).toMatchObject({ line: lines.findIndex((l) => l.includes('- Phantom')) + 1, column: 11 });
  });

  it.each([
    ['    SUMMARY: [1]', 'SUMMARY is a text, not a list'],
    ['    PASS: 5', 'PASS lists variable names, not 5'],
    ['    PASS: [income, {a: 1}]', 'a PASS entry is a variable name, not a map'],
    ['    CONTEXT:\n      pass: income', 'pass lists variable names, not income'],
  ])('a route value of the wrong shape is INVALID_VALUE (%s)', (line, message) => {
    const result = compile(supervisor(line));
    expect(result.diagnostics.filter((d) => d.code === 'INVALID_VALUE')).toEqual([expect.objectContaining({ severity: 'error', message })]);
    expect(result.project).toBeNull();
  });

  it("a schema violation inside an agent's document is located in that document, not at the header", () => {
    const text = `${HEADER}AGENT: Worker\nMEMORY:\n  session:\n    - name: note\n      TYPE: banana\n`;
    const result = compile(text);
    const violation = result.diagnostics.find((d) => d.code === 'SCHEMA_VIOLATION')!;
    expect(violation.message).toContain('agents.0.memory.0.type');
    expect(violation.line).toBeGreaterThan(2); // the header is lines 1-2
  });

  /** Loan_Supervisor (MEMORY: customer_verified) routes to Offer_Agent, whose document ends with `authLines`. */
  const withAuth = (authLines: string) =>
    `${HEADER}SUPERVISOR: Loan_Supervisor\nMEMORY:\n  session:\n    - customer_verified\n      TYPE: boolean\nHANDOFF:\n  - TO: Offer_Agent\n---\nAGENT: Offer_Agent\n${authLines}\n`;
  const offerAuth = (text: string) => compile(text).project?.agents.find((a) => a.name === 'Offer_Agent')?.auth;

  it.each([
    ['AUTH:\n  REQUIRED: true\n  VARIABLE: customer_verified', { required: true, variable: 'customer_verified' }],
    ['auth:\n  required: true\n  variable: customer_verified', { required: true, variable: 'customer_verified' }],
    ['AUTH: { REQUIRED: true, VARIABLE: customer_verified }', { required: true, variable: 'customer_verified' }],
    ['AUTH:\n  VARIABLE: customer_verified', { required: true, variable: 'customer_verified' }],
    ['AUTH:\n  REQUIRED: false\n  VARIABLE: customer_verified', { required: false, variable: 'customer_verified' }],
  ])("an AUTH block compiles into the agent's auth profile (%s)", (lines, auth) => {
    const text = withAuth(lines);
    expect(compile(text).diagnostics).toEqual([]);
    expect(offerAuth(text)).toEqual(auth);
  });

  it('AUTH: required is the shorthand for REQUIRED true with the session variable authenticated', () => {
    const text = withAuth('AUTH: required').replace('customer_verified', 'authenticated');
    expect(compile(text).diagnostics).toEqual([]);
    expect(offerAuth(text)).toEqual({ required: true, variable: 'authenticated' });
    expect(compile(withAuth('')).project!.agents.find((a) => a.name === 'Offer_Agent')!.auth).toBeUndefined();
  });

  it.each([
    ['AUTH: true', 12, 7],
    ['AUTH: optional', 12, 7],
    ['AUTH:', 12, 1],
    ['AUTH:\n  - customer_verified', 13, 3],
    ['AUTH:\n  REQUIRED: "true"\n  VARIABLE: customer_verified', 13, 13],
    ['AUTH:\n  REQUIRED: sometimes', 13, 13],
    ['AUTH:\n  REQUIRED: true\n  VARIABLE: customer verified', 14, 13],
    ['AUTH:\n  REQUIRED: true\n  VARIABLE: 2fa_done', 14, 13],
    ['AUTH:\n  REQUIRED: true\n  VARIABLE: 42', 14, 13],
  ])('a malformed AUTH block is INVALID_AUTH_PROFILE with file, line, column and a hint, and the project does not compile (%s)', (lines, line, column) => {
    const result = compile(withAuth(lines));
    expect(result.project).toBeNull();
    expect(result.diagnostics).toEqual([expect.objectContaining({ file: 'loans.yaml', line, column, severity: 'error', code: 'INVALID_AUTH_PROFILE' })]);
    expect(formatDiagnostic(result.diagnostics[0]!)).toMatch(
      new RegExp(`^loans\\.yaml:${line}:${column} error INVALID_AUTH_PROFILE .* — Write \`AUTH: required\``),
    );
  });

  it('an AUTH VARIABLE no agent declares in its MEMORY warns AUTH_VARIABLE_NOT_DECLARED (a typo keeps every route blocked); declared by any agent it does not', () => {
    const typo = compile(withAuth('AUTH:\n  REQUIRED: true\n  VARIABLE: customer_verifed'));
    expect(typo.diagnostics).toEqual([expect.objectContaining({ line: 14, column: 13, severity: 'warning', code: 'AUTH_VARIABLE_NOT_DECLARED' })]);
    expect(typo.diagnostics[0]!.message).toContain("'customer_verifed' of 'Offer_Agent'");
    expect(typo.project!.agents.find((a) => a.name === 'Offer_Agent')!.auth).toEqual({ required: true, variable: 'customer_verifed' });
    const shorthand = compile(withAuth('AUTH: required'));
    expect(shorthand.diagnostics).toEqual([expect.objectContaining({ line: 12, column: 1, code: 'AUTH_VARIABLE_NOT_DECLARED' })]);
    // REQUIRED false reads no variable: nothing to declare.
    expect(compile(withAuth('AUTH:\n  REQUIRED: false')).diagnostics).toEqual([]);
  });

  it('an unknown key inside AUTH is ignored with UNKNOWN_KEY', () => {
    const result = compile(withAuth('AUTH:\n  REQUIRED: true\n  VARIABLE: customer_verified\n  MFA: true'));
    expect(codes(result.diagnostics)).toEqual(['warning:UNKNOWN_KEY']);
    expect(offerAuth(withAuth('AUTH:\n  REQUIRED: true\n  VARIABLE: customer_verified\n  MFA: true'))).toEqual({
      required: true,
      variable: 'customer_verified',
    });
  });

  it('accepts AUTH in JSON definitions', () => {
    const json = JSON.stringify({
      project: 'loans',
      agents: [
        { name: 'A', memory: [{ name: 'customer_verified', type: 'boolean' }], handoff: [{ to: 'B' }] },
        { name: 'B', auth: { required: true, variable: 'customer_verified' } },
      ],
    });
    const result = compileProject([{ path: 'p.json', text: json }]);
    expect(result.diagnostics).toEqual([]);
    expect(result.project!.agents[1]!.auth).toEqual({ required: true, variable: 'customer_verified' });
  });

  it('a project-level return deadline compiles into execution.return_deadline_ms (with or without parentReturn)', () => {
    expect(compile('project: loans\nexecution:\n  returnDeadline: 45m\n---\nSUPERVISOR: S\n').project!.execution).toEqual({ return_deadline_ms: 2_700_000 });
    const both = compile(
      'project: loans\nexecution:\n  return_deadline_ms: 60000\n  pipeline:\n    parentReturn:\n      minConfidence: 0.5\n---\nSUPERVISOR: S\n',
    );
    expect(both.diagnostics).toEqual([]);
    expect(both.project!.execution).toEqual({ pipeline: { parent_return: { min_confidence: 0.5 } }, return_deadline_ms: 60_000 });
  });
});

describe('accepts_handoffs_from: the projects that may hand work to this one', () => {
  it('compiles to the definition (a project key or *); anything else is a schema violation at its line', () => {
    const ok = compile(LOAN_EXAMPLE_YAML.replace('project: loans', 'project: loans\naccepts_handoffs_from: [support, "*"]'));
    expect(ok.diagnostics).toEqual([]);
    expect(ok.project!.accepts_handoffs_from).toEqual(['support', '*']);
    expect(compile(LOAN_EXAMPLE_YAML).project!.accepts_handoffs_from).toBeUndefined();
    const bad = compile(LOAN_EXAMPLE_YAML.replace('project: loans', 'project: loans\naccepts_handoffs_from: ["two words"]'));
    expect(bad.project).toBeNull();
    expect(bad.diagnostics).toContainEqual(expect.objectContaining({ code: 'SCHEMA_VIOLATION', message: expect.stringContaining('accepts_handoffs_from.0') }));
  });
});

describe('reserved names (__proto__, constructor, prototype)', () => {
  it.each(['__proto__', 'constructor', 'prototype'])('a MAP or SET key %s is an error of the compiler, not a silently dropped entry', (name) => {
    const map = compile(LOAN_EXAMPLE_YAML.replace('annual_income: annual_income', `${name}: annual_income`));
    expect(map.project).toBeNull();
    expect(map.diagnostics).toContainEqual(expect.objectContaining({ severity: 'error', message: expect.stringContaining(name) }));
    const set = compile(LOAN_EXAMPLE_YAML.replace('annual_income: annual_income', `annual_income: annual_income\n      SET:\n        ${name}: "x"`));
    expect(set.project).toBeNull();
    expect(set.diagnostics).toContainEqual(
      expect.objectContaining({ severity: 'error', message: expect.stringContaining('"__proto__", "constructor" and "prototype" are reserved') }),
    );
  });

  it('an agent named __proto__ is reported even when the definition has other errors (nothing else names it)', () => {
    const broken = compile(`${LOAN_EXAMPLE_YAML}\n---\nAGENT: __proto__\nROLE: [1, 2]\n`);
    expect(broken.project).toBeNull();
    expect(broken.diagnostics.map((d) => d.code)).toContain('INVALID_VALUE');
    expect(broken.diagnostics).toContainEqual(
      expect.objectContaining({ code: 'SCHEMA_VIOLATION', message: expect.stringContaining('"__proto__", "constructor" and "prototype" are reserved') }),
    );
    // At the name itself (the AGENT value), not the document's first column.
    const text = `${LOAN_EXAMPLE_YAML}\n---\nAGENT: __proto__\nROLE: [1, 2]\n`;
    const reserved = broken.diagnostics.find((d) => d.code === 'SCHEMA_VIOLATION')!;
    expect([reserved.line, reserved.column]).toEqual([text.split('\n').findIndex((l) => l === 'AGENT: __proto__') + 1, 'AGENT: '.length + 1]);
  });

  it('an agent, a variable and a PASS entry named like other Object.prototype members compile like any name', () => {
    const renamed = LOAN_EXAMPLE_YAML.split('Loan_Supervisor').join('toString').split('annual_income').join('valueOf');
    const result = compile(renamed);
    expect(result.diagnostics).toEqual([]);
    expect(result.project!.agents.map((a) => a.name)).toContain('toString');
  });
});

describe('a value of the wrong shape is INVALID_VALUE wherever it is written, never dropped or coerced without a word', () => {
  /** Exactly one error, INVALID_VALUE with `message`, at the first line holding `marker`; nothing compiles. */
  const refusedOnce = (text: string, message: string, marker: string) => {
    const result = compile(text);
    const line = text.split('\n').findIndex((l) => l.includes(marker)) + 1;
    expect(line).toBeGreaterThan(0);
    expect(result.diagnostics.filter((d) => d.severity === 'error')).toEqual([expect.objectContaining({ code: 'INVALID_VALUE', line, message })]);
    expect(result.project).toBeNull();
  };
  const AGENT = '---\nAGENT: worker\n';

  it("the audit's definition (workflows: 5, lead: [1, 2], COMPLETE: true) is refused at each of the three, not published without its workflows and lead", () => {
    const text = 'project: shapes\nworkflows: 5\nlead: [1, 2]\n---\nAGENT: a\nCOMPLETE: true\n';
    const result = compile(text);
    expect(result.project).toBeNull();
    expect(result.diagnostics.map((d) => `${d.line}:${d.column} ${d.severity} ${d.code} ${d.message}`)).toEqual([
      "2:12 error INVALID_VALUE workflows lists the project's workflows, not 5",
      "3:7 error INVALID_VALUE lead is an agent of the project or a person's handle, not a list",
      '6:11 error INVALID_VALUE COMPLETE lists conditions (WHEN, RESPOND), not true',
    ]);
    expect(result.diagnostics.every((d) => d.hint.startsWith('Write'))).toBe(true);
  });

  it.each([
    ['workflows: 5', "workflows lists the project's workflows, not 5", 'workflows:'],
    ['workflows: {a: 1}', "workflows lists the project's workflows, not a map", 'workflows:'],
    ['workflows:\n  - 5', 'a workflow is a map, not 5', '- 5'],
    ['agents: 7', "agents lists the project's agents, not 7", 'agents:'],
    ['agents: [helper]', 'an agent is a map, not helper', 'agents:'],
    ['lead: [1, 2]', "lead is an agent of the project or a person's handle, not a list", 'lead:'],
    ['lead: {name: worker}', "lead is an agent of the project or a person's handle, not a map", 'lead:'],
    ['lead: 5', "lead is an agent of the project or a person's handle, not 5", 'lead:'],
    ['lead:', "lead is an agent of the project or a person's handle, not empty", 'lead:'],
    ['accepts_handoffs_from: 3', 'accepts_handoffs_from lists project keys (or "*" for any project), not 3', 'accepts_handoffs_from:'],
    ['accepts_handoffs_from: "*"', 'accepts_handoffs_from lists project keys (or "*" for any project), not "*"', 'accepts_handoffs_from:'],
    ['accepts_handoffs_from: [support, {a: 1}]', 'an accepts_handoffs_from entry is a project key or "*", not a map', 'accepts_handoffs_from:'],
    ['meshes: "x"', 'meshes lists the project\'s meshes, not "x"', 'meshes:'],
    ['meshes:\n  - 5', 'a mesh is a map, not 5', '- 5'],
    ['execution: 5', 'execution is a map of return_deadline and pipeline, not 5', 'execution:'],
    ['execution: [30m]', 'execution is a map of return_deadline and pipeline, not a list', 'execution:'],
    ['execution:\n  pipeline: 5', 'pipeline is a map holding parentReturn, not 5', 'pipeline:'],
    ['execution:\n  pipeline:\n    parentReturn: [1]', 'parentReturn is a map of minConfidence and ignoreAmbiguous, not a list', 'parentReturn:'],
    ['execution:\n  pipeline:\n    parentReturn:\n      minConfidence: high', 'minConfidence is a number between 0 and 1, not high', 'minConfidence:'],
    ['execution:\n  pipeline:\n    parentReturn:\n      minConfidence: [1]', 'minConfidence is a number between 0 and 1, not a list', 'minConfidence:'],
    ['execution:\n  pipeline:\n    parentReturn:\n      ignoreAmbiguous: yes', 'ignoreAmbiguous is true or false, not yes', 'ignoreAmbiguous:'],
    ['return_handlers: 5', 'return_handlers maps handler names to their settings, not 5', 'return_handlers:'],
    ['return_handlers:\n  done: [1]', "return handler 'done' is a map of RESUME_INTENT, RESUME_WITH, RESPOND, MAP and SET, not a list", 'done:'],
    ['return_handlers:\n  done:\n    MAP: 5', 'MAP is child_field: parent_variable pairs, not 5', 'MAP:'],
    ['return_handlers:\n  done:\n    MAP:\n      note: [1]', "MAP target of 'note' is a variable name, not a list", 'note:'],
    ['return_handlers:\n  done:\n    SET: [1]', 'SET is parent_variable: value pairs, not a list', 'SET:'],
    ['return_handlers:\n  done:\n    SET:\n      note: {a: 1}', "SET value of 'note' is a text, a number, true, false or null, not a map", 'note:'],
  ])('a header key: %j', (lines, message, marker) => {
    refusedOnce(`project: shapes\n${lines}\n${AGENT}`, message, marker);
  });

  it.each([
    ['project: [shapes]', 'project is a project key (lowercase letters, digits, _ and -), not a list'],
    ['project: {name: shapes}', 'project is a project key (lowercase letters, digits, _ and -), not a map'],
    ['project: 2024', 'project is a project key (lowercase letters, digits, _ and -), not 2024'],
    ['project:', 'project is a project key (lowercase letters, digits, _ and -), not empty'],
  ])('the project key: %j', (line, message) => {
    refusedOnce(`${line}\n${AGENT}`, message, 'project:');
  });

  const WORKFLOW =
    'project: shapes\nworkflows:\n  - name: flow\n    version: 1\n    entry: work\n    steps:\n      - id: work\n        agent: worker\n        terminal: true\n';
  it.each([
    ['    version: 1', '    version: "1"', 'version is a whole number (1, 2, …), not "1"'],
    ['    version: 1', '    version: 1.5', 'version is a whole number (1, 2, …), not 1.5'],
    ['    version: 1', '    version: [1]', 'version is a whole number (1, 2, …), not a list'],
    ['  - name: flow', '  - name: [flow]', 'name is a workflow name, not a list'],
    ['    entry: work', '    entry: 5', 'entry is the id of the step a run starts at, not 5'],
    ['    steps:\n      - id: work\n        agent: worker\n        terminal: true', '    steps: 5', "steps lists the workflow's steps, not 5"],
    [
      '    steps:\n      - id: work\n        agent: worker\n        terminal: true',
      '    steps:\n      - work',
      'a step is a map of id, agent, next, terminal and human_gate, not work',
    ],
    ['      - id: work', '      - id: {a: 1}', 'id is a step id, not a map'],
    ['        agent: worker', '        agent: [worker]', 'agent is an agent of the project, not a list'],
    ['        terminal: true', '        terminal: "yes"', 'terminal is true or false, not "yes"'],
    ['        terminal: true', '        terminal: true\n        human_gate: 1', 'human_gate is true or false, not 1'],
    ['        terminal: true', '        next: [work]', 'next is the id of a step of the workflow, not a list'],
  ])('a workflow field: %j → %j', (from, to, message) => {
    const marker = to.split('\n').at(-1)!.trim();
    refusedOnce(`${WORKFLOW.replace(from, to)}${AGENT}`, message, marker);
  });

  it.each([
    ['COMPLETE: true', 'COMPLETE lists conditions (WHEN, RESPOND), not true', 'COMPLETE:'],
    ['COMPLETE: "done IS SET"', 'COMPLETE lists conditions (WHEN, RESPOND), not "done IS SET"', 'COMPLETE:'],
    ['COMPLETE:\n  - 5', 'a COMPLETE entry is a map of WHEN and RESPOND, not 5', '- 5'],
    ['COMPLETE:\n  - WHEN: done IS SET\n    RESPOND: [1]', 'RESPOND is a text, not a list', 'RESPOND:'],
    ['SUPERVISOR: 5', "SUPERVISOR is the agent's name (or true beside AGENT or name), not 5", 'SUPERVISOR:'],
    ['EXECUTION: [1]', 'EXECUTION is a map of return_deadline and pipeline, not a list', 'EXECUTION:'],
    ['RETURN_HANDLERS: 5', 'RETURN_HANDLERS maps handler names to their settings, not 5', 'RETURN_HANDLERS:'],
    ['RETURN_HANDLERS:\n  done: yes', "return handler 'done' is a map of RESUME_INTENT, RESUME_WITH, RESPOND, MAP and SET, not yes", 'done:'],
    ['MEMORY:\n  session:\n    - note: 5', "memory variable 'note' is a map of TYPE, DESCRIPTION and READONLY, not 5", 'note:'],
    ['MEMORY:\n  session:\n    - [note]', 'a memory variable is a name or a map, not a list', '- [note]'],
    ['MEMORY:\n  session:\n    - name: [note]', 'name is a variable name, not a list', 'name:'],
    ['GATHER:\n  field: 5', "GATHER field 'field' is a map of PROMPT, TYPE and REQUIRED, not 5", 'field:'],
  ])('an agent key: %j', (lines, message, marker) => {
    refusedOnce(`project: shapes\n---\nAGENT: worker\n${lines}\n`, message, marker);
  });

  it.each([
    ['    RETURN: [1]', 'RETURN is true or false, not a list', 'RETURN:'],
    ['    RETURN: true\n    ON_RETURN:\n      action: [continue]', 'action is continue or resume_intent, not a list', 'action:'],
    ['    RETURN: true\n    ON_RETURN:\n      resume_with: {a: 1}', 'resume_with is a text, not a map', 'resume_with:'],
    ['    RETURN: true\n    ON_RETURN:\n      handler: [done]', 'handler is the name of a RETURN_HANDLERS entry, not a list', 'handler:'],
    [
      '    RETURN: true\n    ON_RETURN:\n      MAP:\n        annual_income: [annual_income]',
      "MAP target of 'annual_income' is a variable name, not a list",
      'annual_income: [',
    ],
    [
      '    RETURN: true\n    ON_RETURN:\n      SET:\n        annual_income: {a: 1}',
      "SET value of 'annual_income' is a text, a number, true, false or null, not a map",
      '{a: 1}',
    ],
  ])('a route key: %j', (lines, message, marker) => {
    refusedOnce(supervisor(lines), message, marker);
  });

  it('a TO that is not a name is INVALID_VALUE at the TO (not "a route has no TO")', () => {
    refusedOnce(`${HEADER}AGENT: worker\nHANDOFF:\n  - TO: [worker]\n`, 'TO is an agent name, not a list', 'TO:');
  });

  it('source written in JSON is held to the same shapes', () => {
    const result = compileProject([
      { path: 'p.json', text: JSON.stringify({ project: 'shapes', workflows: 5, lead: ['a'], agents: [{ name: 'a', complete: true }] }) },
    ]);
    expect(result.project).toBeNull();
    expect(result.diagnostics.map((d) => `${d.code} ${d.message}`)).toEqual([
      "INVALID_VALUE workflows lists the project's workflows, not 5",
      "INVALID_VALUE lead is an agent of the project or a person's handle, not a list",
      'INVALID_VALUE complete lists conditions (WHEN, RESPOND), not true',
    ]);
  });

  it('an empty value stays what it was: none for workflows, agents, execution, return handlers and COMPLETE; the defaults for a GATHER field, a memory variable and a handler', () => {
    const text = `project: shapes
workflows:
agents:
execution:
return_handlers:
---
AGENT: worker
COMPLETE:
EXECUTION:
MEMORY:
  session:
    - note:
GATHER:
  field:
RETURN_HANDLERS:
  done:
`;
    const result = compile(text);
    expect(result.diagnostics).toEqual([]);
    expect(result.project).toMatchObject({
      workflows: [],
      agents: [{ name: 'worker', complete: [], gather: [{ name: 'field' }], memory: [{ name: 'note' }] }],
    });
    expect(result.project!.execution).toBeUndefined();
  });

  it('a key Baton does not know inside execution, pipeline, a COMPLETE entry or a memory variable is UNKNOWN_KEY, not ignored without a word', () => {
    const text = `project: shapes
execution:
  retries: 3
  pipeline:
    parallel: true
---
AGENT: worker
COMPLETE:
  - WHEN: done IS SET
    THEN: stop
MEMORY:
  session:
    - done: { TYPE: boolean, DEFAULT: false }
`;
    const result = compile(text);
    expect(result.diagnostics.map((d) => `${d.severity}:${d.code} ${d.message}`)).toEqual([
      "warning:UNKNOWN_KEY unknown execution key 'retries' is ignored",
      "warning:UNKNOWN_KEY unknown pipeline key 'parallel' is ignored",
      "warning:UNKNOWN_KEY unknown COMPLETE key 'THEN' is ignored (did you mean 'WHEN'?)",
      "warning:UNKNOWN_KEY unknown memory key 'DEFAULT' is ignored",
    ]);
    expect(result.project).not.toBeNull();
  });

  it('a COMPLETE entry without WHEN is reported at the entry, not at the top of the file', () => {
    const result = compile(`project: shapes\n---\nAGENT: worker\nCOMPLETE:\n  - RESPOND: "done"\n`);
    expect(result.diagnostics).toEqual([
      expect.objectContaining({ code: 'INVALID_CONDITION', line: 5, column: 5, message: 'COMPLETE WHEN must be a condition string, not empty' }),
    ]);
  });
});

describe('keys are read alike everywhere: case-insensitive, camelCase as snake_case (workflows, steps and meshes too)', () => {
  const SNAKE = `project: shop
workflows:
  - name: ship-feature
    version: 1
    entry: code
    steps:
      - { id: code, agent: coder, next: review, human_gate: true }
      - { id: review, agent: reviewer, terminal: true }
meshes:
  - name: pair
    description: Coder and reviewer talk it over
    entry: coder
    handoffs:
      coder: [reviewer]
      reviewer: [coder]
    outputs: [reviewer]
    max_iterations: 6
---
AGENT: coder
---
AGENT: reviewer
`;
  const OTHER_SPELLINGS = `project: shop
Workflows:
  - Name: ship-feature
    VERSION: 1
    Entry: code
    Steps:
      - { ID: code, Agent: coder, NEXT: review, humanGate: true }
      - { id: review, AGENT: reviewer, Terminal: true }
MESHES:
  - NAME: pair
    Description: Coder and reviewer talk it over
    ENTRY: coder
    Handoffs:
      coder: [reviewer]
      reviewer: [coder]
    OUTPUTS: [reviewer]
    maxIterations: 6
---
AGENT: coder
---
AGENT: reviewer
`;

  it('a workflow, its steps and a mesh written in other spellings compile exactly as snake_case (they were SCHEMA_VIOLATION "Unrecognized key")', () => {
    const snake = compile(SNAKE);
    expect(snake.diagnostics).toEqual([]);
    const other = compile(OTHER_SPELLINGS);
    expect(other.diagnostics).toEqual([]);
    expect(other.project).toEqual(snake.project);
    expect(other.project!.workflows[0]!.steps[0]).toEqual({ id: 'code', agent: 'coder', next: 'review', human_gate: true });
    expect(other.project!.meshes![0]).toMatchObject({ name: 'pair', max_iterations: 6, handoffs: { coder: ['reviewer'] } });
    // HUMAN_GATE is human_gate as well; and source written in JSON reads the same.
    expect(compile(SNAKE.replace('human_gate: true', 'HUMAN_GATE: true')).project).toEqual(snake.project);
    const json = compileProject([
      {
        path: 'shop.json',
        text: JSON.stringify({
          project: 'shop',
          agents: [{ name: 'coder' }],
          workflows: [{ Name: 'solo', Version: 1, Entry: 'a', Steps: [{ Id: 'a', Agent: 'coder', humanGate: false, Terminal: true }] }],
        }),
      },
    ]);
    expect(json.diagnostics).toEqual([]);
    expect(json.project!.workflows[0]!.steps[0]).toEqual({ id: 'a', agent: 'coder', human_gate: false, terminal: true });
  });

  it("a mesh's handoffs stay keyed by the agents' names as written (a name is not a key to normalize)", () => {
    const text = `project: shop\nagents:\n  - name: CodeReviewer\n  - name: code_reviewer\nmeshes:\n  - name: pair\n    entry: CodeReviewer\n    handoffs:\n      CodeReviewer: [code_reviewer]\n`;
    const result = compile(text);
    expect(result.diagnostics).toEqual([]);
    expect(result.project!.meshes![0]!.handoffs).toEqual({ CodeReviewer: ['code_reviewer'] });
  });

  it('a value of the wrong shape under another spelling is INVALID_VALUE at its line, named as written, once', () => {
    const text = SNAKE.replace('human_gate: true', 'humanGate: "yes"');
    const result = compile(text);
    expect(result.project).toBeNull();
    expect(result.diagnostics.filter((d) => d.severity === 'error')).toEqual([
      expect.objectContaining({ code: 'INVALID_VALUE', line: 7, message: 'humanGate is true or false, not "yes"' }),
    ]);
  });

  it('a key a step does not have is still refused as written (SCHEMA_VIOLATION), in any spelling, at the key, with the known key nearest to it', () => {
    const result = compile(SNAKE.replace('human_gate: true', 'humanGat: true'));
    expect(result.project).toBeNull();
    expect(result.diagnostics).toEqual([
      expect.objectContaining({
        code: 'SCHEMA_VIOLATION',
        line: 7,
        column: SNAKE.split('\n')[6]!.indexOf('human_gate') + 1,
        message: "unknown step key 'humanGat' is refused (did you mean 'humanGate'?)",
      }),
    ]);
  });

  it.each([
    [
      'a step',
      SNAKE.replace('next: review', 'nxt: review'),
      'nxt: review',
      "unknown step key 'nxt' is refused (did you mean 'next'?)",
      /A step holds only id, agent, next, terminal, human_gate/,
    ],
    [
      'a mesh',
      SNAKE.replace('max_iterations: 6', 'max_iteration: 6'),
      'max_iteration: 6',
      "unknown mesh key 'max_iteration' is refused (did you mean 'max_iterations'?)",
      /A mesh holds only name, description, entry, handoffs, outputs, max_iterations/,
    ],
    [
      'a mesh (camelCase)',
      SNAKE.replace('max_iterations: 6', 'maxIteration: 6'),
      'maxIteration: 6',
      "unknown mesh key 'maxIteration' is refused (did you mean 'maxIterations'?)",
      /A mesh holds only/,
    ],
    [
      'a workflow',
      SNAKE.replace('    entry: code\n', '    entry: code\n    ENTRYS: review\n'),
      'ENTRYS',
      "unknown workflow key 'ENTRYS' is refused (did you mean 'ENTRY'?)",
      /A workflow holds only name, version, entry, steps/,
    ],
    [
      'a step (nothing near)',
      SNAKE.replace('next: review', 'next: review, colour: red'),
      'colour',
      "unknown step key 'colour' is refused",
      /an error, not ignored/,
    ],
  ])(
    'an unknown key of %s is an error naming the key and its scope, at the key, with the known key nearest to it (was the schema\'s "Unrecognized key" at the map)',
    (_, text, marker, message, hint) => {
      const result = compile(text);
      expect(result.project).toBeNull();
      const line = text.split('\n').findIndex((l) => l.includes(marker));
      expect(result.diagnostics).toEqual([
        {
          file: 'loans.yaml',
          line: line + 1,
          column: text.split('\n')[line]!.indexOf(marker.split(':')[0]!) + 1,
          severity: 'error',
          code: 'SCHEMA_VIOLATION',
          message,
          hint: expect.stringMatching(hint),
        },
      ]);
    },
  );

  it.each([
    ['an agent', `${SNAKE}ROLEE: Reviews\n`, "unknown agent key 'ROLEE' is ignored (did you mean 'ROLE'?)"],
    ['the header', SNAKE.replace('project: shop\n', 'project: shop\nleed: coder\n'), "unknown key 'leed' is ignored (did you mean 'lead'?)"],
    ['a route', `${SNAKE}HANDOFF:\n  - TO: coder\n    RETRUN: true\n`, "unknown HANDOFF key 'RETRUN' is ignored (did you mean 'RETURN'?)"],
    [
      'a HISTORY block',
      `${SNAKE}HANDOFF:\n  - TO: coder\n    HISTORY:\n      mode: full\n      counts: 3\n`,
      "unknown HISTORY key 'counts' is ignored (did you mean 'count'?)",
    ],
  ])('an unknown key of %s stays a warning (UNKNOWN_KEY, ignored), with the known key nearest to it', (_, text, message) => {
    const result = compile(text);
    expect(result.diagnostics).toEqual([expect.objectContaining({ severity: 'warning', code: 'UNKNOWN_KEY', message })]);
    expect(result.project).not.toBeNull();
  });

  it.each([
    [
      'a step',
      SNAKE.replace('human_gate: true', 'human_gate: true, humanGate: false'),
      'humanGate',
      "'humanGate' is the key 'human_gate' (line 7) written again",
    ],
    ['a workflow', SNAKE.replace('    entry: code\n', '    entry: code\n    Entry: review\n'), 'Entry', "'Entry' is the key 'entry' (line 5) written again"],
    [
      'a mesh',
      SNAKE.replace('    max_iterations: 6\n', '    max_iterations: 6\n    maxIterations: 60\n'),
      'maxIterations',
      "'maxIterations' is the key 'max_iterations' (line 17) written again",
    ],
    ['the header', SNAKE.replace('project: shop\n', 'project: shop\nlead: coder\nLEAD: reviewer\n'), 'LEAD', "'LEAD' is the key 'lead' (line 2) written again"],
    ['an agent', `${SNAKE}ROLE: Reviews\nrole: Codes\n`, 'role:', "'role' is the key 'ROLE' (line 22) written again"],
    ['a route', `${SNAKE}HANDOFF:\n  - TO: coder\n    to: reviewer\n`, 'to: reviewer', "'to' is the key 'TO' (line 23) written again"],
  ])('one key written twice in two spellings in %s is DUPLICATE_KEY, an error at the second (which was meant cannot be told)', (_, text, marker, message) => {
    const result = compile(text);
    expect(result.project).toBeNull();
    const line = text.split('\n').findIndex((l) => l.includes(marker)) + 1;
    expect(result.diagnostics).toEqual([
      expect.objectContaining({
        severity: 'error',
        code: 'DUPLICATE_KEY',
        line,
        message: expect.stringContaining(message),
        hint: expect.stringMatching(/^Keep one '/),
      }),
    ]);
  });

  it('names are not keys: GATHER fields income and Income are two fields, not DUPLICATE_KEY', () => {
    const result = compile(`project: p\n---\nAGENT: a\nGATHER:\n  income:\n    TYPE: number\n  Income:\n    TYPE: string\n`);
    expect(result.diagnostics).toEqual([]);
    expect(result.project!.agents[0]!.gather!.map((g) => g.name)).toEqual(['income', 'Income']);
  });
});

describe('a project header key outside the header is HEADER_KEY_OUTSIDE_HEADER, an error: it would be ignored', () => {
  const errorsOf = (result: ReturnType<typeof compile>) =>
    result.diagnostics.filter((d) => d.severity === 'error').map((d) => `${d.file}:${d.line}:${d.column} ${d.code} ${d.message}`);

  it.each([
    ['accepts_handoffs_from: [support]', 'accepts_handoffs_from'],
    ['acceptsHandoffsFrom: [support]', 'acceptsHandoffsFrom'],
    ['lead: worker', 'lead'],
    ['meshes:\n  - { name: m, entry: worker }', 'meshes'],
    ['workflows:\n  - { name: f, version: 1, entry: a, steps: [{ id: a, agent: worker, terminal: true }] }', 'workflows'],
    ['agents:\n  - name: helper', 'agents'],
    ['project: other', 'project'],
  ])('in an agent document: %j (was UNKNOWN_KEY, a warning, and the project published without it)', (line, key) => {
    const text = `project: shop\n---\nAGENT: worker\n${line}\n`;
    const result = compile(text);
    expect(result.project).toBeNull();
    expect(errorsOf(result)).toEqual([
      `loans.yaml:4:1 HEADER_KEY_OUTSIDE_HEADER '${key}' is a project header key, not an agent key: in an agent's definition it would be ignored`,
    ]);
    expect(result.diagnostics.map((d) => d.code)).not.toContain('UNKNOWN_KEY');
  });

  it("in an agents: entry of the header (an agent's map as well)", () => {
    const result = compile('project: shop\nagents:\n  - name: worker\n    accepts_handoffs_from: ["*"]\n');
    expect(errorsOf(result)).toEqual([
      "loans.yaml:4:5 HEADER_KEY_OUTSIDE_HEADER 'accepts_handoffs_from' is a project header key, not an agent key: in an agent's definition it would be ignored",
    ]);
  });

  it('in a second document without project: (lead, accepts_handoffs_from, execution and meshes were dropped without a word)', () => {
    const text = 'project: shop\n---\nlead: worker\naccepts_handoffs_from: [support]\nexecution:\n  return_deadline: 5m\nmeshes: []\n---\nAGENT: worker\n';
    const result = compile(text);
    expect(result.project).toBeNull();
    expect(errorsOf(result)).toEqual(
      ['3:1 lead', '4:1 accepts_handoffs_from', '5:1 execution', '7:1 meshes'].map(
        (at) =>
          `loans.yaml:${at.split(' ')[0]} HEADER_KEY_OUTSIDE_HEADER '${at.split(' ')[1]}' is a project header key, but this document has no project: it would be ignored`,
      ),
    );
    expect(result.diagnostics[0]!.hint).toContain('`project: <key>`');
  });

  it('in a file of its own, or a first document, when project: is written in another', () => {
    const files = compileProject([
      { path: 'a-header.yaml', text: 'project: shop\n---\nAGENT: worker\n' },
      { path: 'b-consent.yaml', text: '# who may hand us work\naccepts_handoffs_from: [support]\n' },
    ]);
    expect(files.project).toBeNull();
    expect(errorsOf(files)).toEqual([
      "b-consent.yaml:2:1 HEADER_KEY_OUTSIDE_HEADER 'accepts_handoffs_from' is a project header key, but this document has no project: it would be ignored",
    ]);
    const first = compile('lead: worker\n---\nproject: shop\n---\nAGENT: worker\n');
    expect(errorsOf(first)).toEqual([
      "loans.yaml:1:1 HEADER_KEY_OUTSIDE_HEADER 'lead' is a project header key, but this document has no project: it would be ignored",
    ]);
  });

  it('agents, workflows and return handlers are still merged from a document without project:', () => {
    const text =
      'project: shop\n---\nagents:\n  - name: worker\nworkflows:\n  - { name: f, version: 1, entry: a, steps: [{ id: a, agent: worker, terminal: true }] }\nreturn_handlers:\n  done:\n    RESUME_INTENT: true\n';
    const result = compile(text);
    expect(result.diagnostics).toEqual([]);
    expect(result.project).toMatchObject({ agents: [{ name: 'worker' }], workflows: [{ name: 'f' }] });
  });
});

describe('YAML aliases are not read: YAML_ALIAS, an error at the alias', () => {
  it.each([
    ['a map', 'project: p\n---\nAGENT: a\nMEMORY: &mem\n  session:\n    - note\nGATHER:\n  note: *mem\n', 8, 9, '*mem is a YAML alias (of &mem, line 4)'],
    ['a scalar', 'project: &key p\nlead: *key\n---\nAGENT: a\n', 2, 7, '*key is a YAML alias (of &key, line 1)'],
    [
      'a merge key',
      'project: p\nagents:\n  - name: a\n    EXECUTION: &exec\n      return_deadline: 5m\n  - name: b\n    EXECUTION:\n      <<: *exec\n',
      8,
      11,
      '*exec is a YAML alias (of &exec, line 4)',
    ],
    [
      'an anchor of another document (anchors are per document)',
      'project: p\nexecution: &exec\n  return_deadline: 5m\n---\nAGENT: a\nEXECUTION: *exec\n',
      6,
      12,
      '*exec is a YAML alias: Baton does not read aliases (and no anchor &exec comes before it in this document)',
    ],
  ])(
    'an alias of %s is YAML_ALIAS naming its line (was INVALID_VALUE "… not *mem", or an UNKNOWN_KEY <<), and nothing else of its document',
    (_, text, line, column, message) => {
      const result = compile(text);
      expect(result.project).toBeNull();
      expect(result.diagnostics).toEqual([
        expect.objectContaining({ severity: 'error', code: 'YAML_ALIAS', line, column, message: expect.stringContaining(message) }),
      ]);
      expect(result.diagnostics[0]!.hint).toMatch(/Write the value out where it is used/);
    },
  );

  it('an alias bomb is refused as written, never expanded', () => {
    const levels = ['a: &l0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i <= 12; i++) levels.push(`l${i}: &l${i} [${Array.from({ length: 10 }, () => `*l${i - 1}`).join(', ')}]`);
    // 10^12 strings once expanded: the parser keeps each alias a node, and the compiler reads none of them.
    const text = `project: p\nworkflows:\n  - name: f\n    steps: *l12\nbomb:\n  ${levels.join('\n  ')}\n---\nAGENT: a\n`;
    const started = Date.now();
    const result = compile(text);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(result.project).toBeNull();
    expect(new Set(result.diagnostics.map((d) => d.code))).toEqual(new Set(['YAML_ALIAS']));
    expect(result.diagnostics).toHaveLength(121);
    expect(result.diagnostics[0]).toMatchObject({ line: 4, message: expect.stringContaining('*l12 is a YAML alias') });
  });

  it('an anchor no alias refers to changes nothing', () => {
    const result = compile(LOAN_EXAMPLE_YAML.replace('project: loans', 'project: &key loans'));
    expect(result.diagnostics).toEqual([]);
    expect(result.project).toEqual(compile(LOAN_EXAMPLE_YAML).project);
  });
});

describe('one pass names every error it can: a value out of shape does not hide the checks that do not depend on it', () => {
  const VALID = `project: shop
agents:
  - name: coder
  - name: reviewer
workflows:
  - name: ship
    version: 1
    entry: code
    steps:
      - id: code
        agent: coder
        next: review
        human_gate: true
      - id: review
        agent: reviewer
        terminal: true
meshes:
  - name: pair
    entry: coder
    handoffs:
      coder: [reviewer]
      reviewer: [coder]
---
AGENT: writer
HANDOFF:
  - TO: coder
`;
  const at = (text: string, marker: string) => text.split('\n').findIndex((l) => l.includes(marker)) + 1;
  const errors = (text: string) =>
    compile(text)
      .diagnostics.filter((d) => d.severity === 'error')
      .map((d) => `${d.line} ${d.code} ${d.message}`)
      .sort();

  it('the definition the cases below break compiles without a diagnostic', () => {
    expect(compile(VALID).diagnostics).toEqual([]);
  });

  it('human_gate: yes beside a step agent and a mesh target that are not on the roster: all three (was the INVALID_VALUE alone)', () => {
    const text = VALID.replace('human_gate: true', 'human_gate: yes')
      .replace('agent: reviewer', 'agent: reviewr')
      .replace('reviewer: [coder]', 'reviewer: [codr]');
    const result = compile(text);
    expect(result.project).toBeNull();
    expect(errors(text)).toEqual(
      [
        `${at(text, 'human_gate: yes')} INVALID_VALUE human_gate is true or false, not yes`,
        `${at(text, 'agent: reviewr')} SCHEMA_VIOLATION workflows.0.steps.1.agent: agent 'reviewr' of step 'review' is not listed in the project's agents`,
        `${at(text, 'reviewer: [codr]')} MESH_UNKNOWN_TARGET meshes.0.handoffs.reviewer.0: mesh 'pair': 'reviewer' hands off to 'codr', which is not listed in the project's agents`,
      ].sort(),
    );
  });

  it.each([
    ['version: "1"', 'INVALID_VALUE version is a whole number (1, 2, …), not "1"'],
    ['version: 0', 'SCHEMA_VIOLATION workflows.0.version: Too small: expected number to be >=1'],
  ])('%s beside a step agent not on the roster: both (`version: "1"` was reported alone)', (version, message) => {
    const text = VALID.replace('version: 1', version).replace('agent: reviewer', 'agent: reviewr');
    expect(errors(text)).toEqual(
      [
        `${at(text, version)} ${message}`,
        `${at(text, 'agent: reviewr')} SCHEMA_VIOLATION workflows.0.steps.1.agent: agent 'reviewr' of step 'review' is not listed in the project's agents`,
      ].sort(),
    );
  });

  it("a MEMORY TYPE outside its set in an agent's document beside a mesh entry not on the roster: both", () => {
    const text = `${VALID}MEMORY:\n  - name: note\n    TYPE: banana\n`.replace('entry: coder\n    handoffs', 'entry: codr\n    handoffs');
    expect(errors(text)).toEqual(
      [
        `${at(text, 'TYPE: banana')} SCHEMA_VIOLATION agents.2.memory.0.type: Invalid option: expected one of "string"|"number"|"boolean"|"object"|"list"|"any"`,
        `${at(text, 'entry: codr')} MESH_UNKNOWN_ENTRY meshes.0.entry: mesh 'pair': entry agent 'codr' is not listed in the project's agents`,
      ].sort(),
    );
  });

  it("a broken value's dependants are skipped, the rest reported: a step id that is no name leaves entry and next alone, not its agent", () => {
    // `review` cannot be read, so whether `next: review` names a step cannot be told; its agent is checked all the same.
    const text = VALID.replace('id: review', 'id: [review]').replace('agent: reviewer', 'agent: reviewr').replace('human_gate: true', 'human_gate: yes');
    expect(errors(text)).toEqual(
      [
        `${at(text, 'human_gate: yes')} INVALID_VALUE human_gate is true or false, not yes`,
        `${at(text, 'id: [review]')} INVALID_VALUE id is a step id, not a list`,
        `${at(text, 'agent: reviewr')} SCHEMA_VIOLATION workflows.0.steps.1.agent: agent 'reviewr' of step '["review"]' is not listed in the project's agents`,
      ].sort(),
    );
    // The entry is the broken one: no "entry is not a step"; a terminal step's next is still refused.
    const entry = VALID.replace('entry: code', 'entry: 7').replace('terminal: true', 'terminal: true\n        next: code');
    expect(errors(entry)).toEqual(
      [
        `${at(entry, 'entry: 7')} INVALID_VALUE entry is the id of the step a run starts at, not 7`,
        `${at(entry, 'next: code')} SCHEMA_VIOLATION workflows.0.steps.1.next: terminal step 'review' cannot have a next edge`,
      ].sort(),
    );
  });

  it('an agent that cannot be read leaves the roster unknown: no step, mesh or TO is refused for naming an agent not read, the rest is reported', () => {
    const text = VALID.replace('  - name: coder\n', '  - name: [coder]\n')
      .replace('human_gate: true', 'human_gate: yes')
      .replace('reviewer: [coder]', 'reviewer: [reviewer]');
    expect(errors(text)).toEqual(
      [
        `${at(text, 'name: [coder]')} INVALID_VALUE name is the agent's name, not a list`,
        `${at(text, 'human_gate: yes')} INVALID_VALUE human_gate is true or false, not yes`,
        `${at(text, 'reviewer: [reviewer]')} MESH_SELF_HANDOFF meshes.0.handoffs.reviewer.0: mesh 'pair': 'reviewer' may not hand off to itself; a turn that wants to keep talking simply ends without a handoff call`,
      ].sort(),
    );
    // `agents: 7`: no agent of the header is read (the writer's TO coder was UNKNOWN_HANDOFF_TARGET).
    const seven = VALID.replace('agents:\n  - name: coder\n  - name: reviewer\n', 'agents: 7\n');
    expect(errors(seven)).toEqual([`2 INVALID_VALUE agents lists the project's agents, not 7`]);
  });

  it('publishes nothing while any error stands: the project is null', () => {
    expect(compile(VALID.replace('human_gate: true', 'human_gate: yes')).project).toBeNull();
    expect(compile(VALID.replace('agent: reviewer', 'agent: reviewr')).project).toBeNull();
  });
});
