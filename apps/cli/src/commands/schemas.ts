import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { generateJsonSchemas } from '@baton/contracts';
import type { Command } from '../command';
import { parseCommandArgs, str } from '../command';
import { ExitCode } from '../errors';

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
    await mkdir(dir, { recursive: true });
    const schemas = generateJsonSchemas();
    for (const [name, schema] of Object.entries(schemas)) {
      await writeFile(join(dir, `${name}.json`), schemaFileText(schema), 'utf8');
    }
    ctx.io.stdout.write(`wrote ${Object.keys(schemas).length} schemas to ${dir}\n`);
    return ExitCode.ok;
  },
};
