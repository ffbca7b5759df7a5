import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { generateJsonSchemas } from '@baton/contracts';
import type { Command } from '../command';
import { parseCommandArgs, str } from '../command';
import { CliError, CliErrorCode, ExitCode } from '../errors';

/** The file text of one JSON Schema: pretty-printed, two spaces, trailing newline. */
export function schemaFileText(schema: unknown): string {
  return `${JSON.stringify(schema, null, 2)}\n`;
}

export const schemasCommand: Command = {
  name: 'schemas',
  summary: 'write the JSON Schemas of every wire contract (one file each)',
  help: `Usage: baton schemas [--out <dir>]

Write the JSON Schema (draft 2020-12) of every contract a producer in another language needs
(agent results, run starts, ledger commands, stop packets, ...), generated from the zod sources,
one <name>.json per contract. Files are overwritten; nothing else in <dir> is touched.

Options:
  --out <dir>   target directory (default docs/schemas)
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { out: { type: 'string' } }, { min: 0, max: 0 });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const dir = resolve(str(args, 'out') ?? 'docs/schemas');
    const schemas = generateJsonSchemas();
    try {
      await mkdir(dir, { recursive: true });
      for (const [name, schema] of Object.entries(schemas)) {
        await writeFile(join(dir, `${name}.json`), schemaFileText(schema), 'utf8');
      }
    } catch (error) {
      const errno = (error as NodeJS.ErrnoException).code;
      // --out names a file (or a path through one): there is no folder to write the schemas into.
      if (errno === 'EEXIST' || errno === 'ENOTDIR')
        throw new CliError(`--out ${dir} is not a folder (it, or a folder above it, is a file): name a folder for the schemas`, {
          cause: error,
          code: CliErrorCode.invalidInput,
          details: { out: dir },
        });
      throw error;
    }
    ctx.io.stdout.write(`wrote ${Object.keys(schemas).length} schemas to ${dir}\n`);
    return ExitCode.ok;
  },
};
