import { formatDiagnostic, hasErrors } from '@baton/definitions';
import type { Command } from '../command';
import { parseCommandArgs } from '../command';
import { ExitCode } from '../errors';
import { printJson } from '../output';
import { loadDefinition } from './definition-files';

export const validateCommand: Command = {
  name: 'validate',
  summary: 'compile a project definition (YAML or JSON) and print its diagnostics',
  help: `Usage: baton validate <dir|file> [--json]

Compile a project definition — a .yaml / .yml / .json file, or every such file of a directory —
and print each diagnostic as

  file:line:col severity CODE message — hint

(docs/definitions.md lists the codes). Exits 1 when any diagnostic is an error, 0 otherwise
(warnings alone do not fail). Nothing is sent anywhere.

Options:
  --json   print { ok, diagnostics, project } as JSON (project = the compiled definition, or null)
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { json: { type: 'boolean' } }, { min: 1, max: 1, names: ['<dir|file>'] });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    // Read as publish-definition reads it: a .json file in the compiled contract's shape is valid as it is.
    const { result } = await loadDefinition(args.positionals[0]!);
    const failed = hasErrors(result.diagnostics);
    if (args.values['json'] === true) {
      printJson(ctx.io, { ok: !failed, diagnostics: result.diagnostics, project: result.project });
    } else {
      for (const d of result.diagnostics) ctx.io.stdout.write(`${formatDiagnostic(d)}\n`);
      const errors = result.diagnostics.filter((d) => d.severity === 'error').length;
      const warnings = result.diagnostics.length - errors;
      ctx.io.stdout.write(
        `${failed ? 'invalid' : 'valid'}: ${errors} error(s), ${warnings} warning(s)${result.project ? ` — project '${result.project.project}', ${result.project.agents.length} agent(s)` : ''}\n`,
      );
    }
    return failed ? ExitCode.failure : ExitCode.ok;
  },
};
