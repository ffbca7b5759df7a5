import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { compileProject, hasErrors, type CompileResult, type SourceFile } from '@baton/definitions';
import { Limits, parseUntrustedJson, ProjectDefinitionSchema, type ProjectDefinition } from '@baton/contracts';
import type { ZodError } from 'zod';
import { CliError, CliErrorCode } from '../errors';

const DEFINITION_FILE = /\.(ya?ml|json)$/i;

/**
 * Read a definition: a file, or every `.yaml` / `.yml` / `.json` file of a directory (sorted by
 * name, not recursive), each size-capped like every Baton entry point, and compile them as one
 * project. Throws a CliError when a path cannot be read.
 */
export async function compileDefinitionPath(path: string): Promise<CompileResult> {
  return compileProject(await readDefinitionFiles(path));
}

/** The source files a definition path names (see {@link compileDefinitionPath}), read once. */
async function readDefinitionFiles(path: string): Promise<SourceFile[]> {
  let paths: string[];
  try {
    const info = await stat(path);
    paths = info.isDirectory()
      ? (await readdir(path))
          .filter((name) => DEFINITION_FILE.test(name))
          .sort()
          .map((name) => join(path, name))
      : [path];
  } catch (error) {
    throw new CliError(`cannot read ${path}: ${(error as Error).message}`, { code: CliErrorCode.invalidInput });
  }
  if (paths.length === 0) throw new CliError(`${path} holds no .yaml, .yml or .json definition file`, { code: CliErrorCode.invalidInput });
  const files: SourceFile[] = [];
  for (const file of paths) {
    const text = await readFile(file, 'utf8');
    if (Buffer.byteLength(text) > Limits.maxMessageBytes)
      throw new CliError(`${file} is larger than ${Limits.maxMessageBytes} bytes`, { code: CliErrorCode.invalidInput });
    files.push({ path: file, text });
  }
  return files;
}

/**
 * A definition as `validate` and `publish-definition` both read it: the compiled definition, and
 * how it was written.
 * - a directory, or a `.yaml` / `.yml` file: the source format, compiled (docs/definitions.md);
 * - a `.json` file: the compiled contract (`docs/schemas/project-definition.json`, what the router
 *   takes) when it is one, else the source format written as JSON (JSON is YAML), compiled.
 * `contract` is, for a `.json` file that is neither, why the compiled contract refused it.
 */
export type LoadedDefinition =
  | { format: 'compiled'; result: CompileResult & { project: ProjectDefinition } }
  | { format: 'source'; result: CompileResult; contract?: ZodError };

export async function loadDefinition(path: string): Promise<LoadedDefinition> {
  const files = await readDefinitionFiles(path);
  const single = files.length === 1 && files[0]!.path === path ? files[0]! : undefined;
  if (single !== undefined && /\.json$/i.test(path)) {
    const json = parseUntrustedJson(single.text, Limits.maxMessageBytes);
    if (!json.ok) throw new CliError(`${path}: ${json.rejection.message}`, { code: CliErrorCode.invalidInput });
    const parsed = ProjectDefinitionSchema.safeParse(json.value);
    if (parsed.success) return { format: 'compiled', result: { project: parsed.data, diagnostics: [] } };
    const result = compileProject(files);
    return hasErrors(result.diagnostics) ? { format: 'source', result, contract: parsed.error } : { format: 'source', result };
  }
  return { format: 'source', result: compileProject(files) };
}
