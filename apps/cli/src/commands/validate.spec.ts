import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOAN_EXAMPLE_YAML } from '@baton/definitions';
import { createCliContext } from '../context';
import { main } from '../main';
import { bufferedIo } from '../output';
import { validateCommand } from './validate';

const run = async (argv: string[]) => {
  const io = bufferedIo();
  const code = await validateCommand.run(argv, createCliContext({ io, env: {} }));
  return { code, out: io.out() };
};

describe('baton validate', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-validate-'));
  const good = join(dir, 'good');
  const bad = join(dir, 'bad.yaml');
  beforeAll(() => {
    mkdirSync(good);
    writeFileSync(join(good, 'loans.yaml'), LOAN_EXAMPLE_YAML);
    writeFileSync(bad, 'project: loans\n---\nSUPERVISOR: S\nHANDOFF:\n  - TO: Nobody\n    RETURN: True\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("a directory with seed 001's loan example is valid: exit 0", async () => {
    const { code, out } = await run([good]);
    expect(code).toBe(0);
    expect(out).toMatch(/^valid: 0 error\(s\), 0 warning\(s\) — project 'loans', 3 agent\(s\)/m);
  });

  it('prints file:line:col severity code message — hint and exits 1 on errors', async () => {
    const { code, out } = await run([bad]);
    expect(code).toBe(1);
    expect(out).toContain(`${bad}:5:9 error UNKNOWN_HANDOFF_TARGET TO target 'Nobody' is not an agent of the project — Every TO target must exist.`);
    expect(out).toContain(`${bad}:6:13 warning HANDOFF_RETURN_NOT_LOWERCASE_TRUE`);
  });

  it('--json prints the diagnostics and the compiled project', async () => {
    const { code, out } = await run([good, '--json']);
    expect(code).toBe(0);
    const parsed = JSON.parse(out) as { ok: boolean; diagnostics: unknown[]; project: { agents: unknown[] } };
    expect(parsed).toMatchObject({ ok: true, diagnostics: [] });
    expect(parsed.project.agents).toHaveLength(3);
  });

  it('validate and publish-definition read a compiled .json alike: the project --json printed is valid as it is', async () => {
    const compiled = (JSON.parse((await run([good, '--json'])).out) as { project: unknown }).project;
    const file = join(dir, 'compiled.json');
    writeFileSync(file, JSON.stringify(compiled));
    const { code, out } = await run([file, '--json']);
    expect(code).toBe(0);
    expect(JSON.parse(out)).toEqual({ ok: true, diagnostics: [], project: compiled });
    // Source written as JSON still compiles (JSON is YAML), with its diagnostics located.
    const source = join(dir, 'source.json');
    writeFileSync(source, JSON.stringify({ project: 'loans', agents: [{ name: 'S', HANDOFF: [{ TO: 'Nobody' }] }] }));
    const refused = await run([source]);
    expect(refused.code).toBe(1);
    expect(refused.out).toContain('UNKNOWN_HANDOFF_TARGET');
  });

  describe('one pass names every error: human_gate: yes beside a step agent, a mesh target and a step key that are typos', () => {
    const typos = join(dir, 'typos.yaml');
    const text = [
      'project: shop',
      'agents:',
      '  - name: coder',
      '  - name: reviewer',
      'workflows:',
      '  - name: ship',
      '    version: 1',
      '    entry: code',
      '    steps:',
      '      - id: code',
      '        agent: coder',
      '        nxt: review',
      '        human_gate: yes',
      '      - id: review',
      '        agent: reviewr',
      '        terminal: true',
      'meshes:',
      '  - name: pair',
      '    entry: coder',
      '    handoffs:',
      '      coder: [reviewer]',
      '      reviewer: [codr]',
      '',
    ].join('\n');
    beforeAll(() => writeFileSync(typos, text));

    it('validate prints all four at once (was the INVALID_VALUE and the nxt alone, the agent and the target only once human_gate was fixed): exit 1', async () => {
      const { code, out } = await run([typos]);
      expect(code).toBe(1);
      expect(out).toContain(`${typos}:12:9 error SCHEMA_VIOLATION unknown step key 'nxt' is refused (did you mean 'next'?) — A step holds only`);
      expect(out).toContain(`${typos}:13:21 error INVALID_VALUE human_gate is true or false, not yes — `);
      expect(out).toContain(
        `${typos}:15:16 error SCHEMA_VIOLATION workflows.0.steps.1.agent: agent 'reviewr' of step 'review' is not listed in the project's agents — `,
      );
      expect(out).toContain(`${typos}:22:18 error MESH_UNKNOWN_TARGET meshes.0.handoffs.reviewer.0: mesh 'pair': 'reviewer' hands off to 'codr'`);
      expect(out).toMatch(/^invalid: 4 error\(s\), 0 warning\(s\)$/m);
    });

    it('publish-definition refuses it before sending anything, with the same four', async () => {
      const io = bufferedIo();
      // Nothing listens there: had the definition been sent, the refusal would be `unavailable`.
      const code = await main(['publish-definition', typos, '--json'], { io, env: { NATS_URL: 'nats://127.0.0.1:1', BATON_PREFIX: 'baton' } });
      expect({ code, out: io.out() }).toEqual({ code: 1, out: '' });
      const refusal = JSON.parse(io.err()) as { error: { code: string; details: { diagnostics: { code: string }[] } } };
      expect(refusal.error.code).toBe('definition_invalid');
      expect(refusal.error.details.diagnostics.map((d) => d.code).sort()).toEqual([
        'INVALID_VALUE',
        'MESH_UNKNOWN_TARGET',
        'SCHEMA_VIOLATION',
        'SCHEMA_VIOLATION',
      ]);
    });
  });

  describe('a header value of the wrong shape (workflows: 5, lead: [1, 2], COMPLETE: true)', () => {
    const shapes = join(dir, 'shapes.yaml');
    const expected = [
      { line: 2, column: 12, message: "workflows lists the project's workflows, not 5" },
      { line: 3, column: 7, message: "lead is an agent of the project or a person's handle, not a list" },
      { line: 6, column: 11, message: 'COMPLETE lists conditions (WHEN, RESPOND), not true' },
    ].map((d) => expect.objectContaining({ file: shapes, severity: 'error', code: 'INVALID_VALUE', ...d }));
    beforeAll(() => writeFileSync(shapes, 'project: shapes\nworkflows: 5\nlead: [1, 2]\n---\nAGENT: a\nCOMPLETE: true\n'));

    it('validate refuses it: exit 1, each INVALID_VALUE at its line, and no project in --json', async () => {
      const text = await run([shapes]);
      expect(text.code).toBe(1);
      expect(text.out).toContain(`${shapes}:2:12 error INVALID_VALUE workflows lists the project's workflows, not 5 — Write`);
      expect(text.out).toMatch(/^invalid: 3 error\(s\), 0 warning\(s\)$/m);
      const json = await run([shapes, '--json']);
      expect(json.code).toBe(1);
      expect(JSON.parse(json.out)).toEqual({ ok: false, diagnostics: expected, project: null });
    });

    it('publish-definition refuses it before sending anything (definition_invalid, with the same diagnostics)', async () => {
      const io = bufferedIo();
      // Nothing listens there: had the definition been sent, the refusal would be `unavailable`.
      const code = await main(['publish-definition', shapes, '--json'], { io, env: { NATS_URL: 'nats://127.0.0.1:1', BATON_PREFIX: 'baton' } });
      expect({ code, out: io.out() }).toEqual({ code: 1, out: '' });
      expect(JSON.parse(io.err())).toEqual({
        error: expect.objectContaining({ code: 'definition_invalid', details: { diagnostics: expected } }),
      });
    });
  });
});
