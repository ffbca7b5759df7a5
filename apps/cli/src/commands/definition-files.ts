import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { compileProject, type CompileResult, type SourceFile } from '@baton/definitions';
import { Limits } from '@baton/contracts';
import { CliError, CliErrorCode } from '../errors';

const DEFINITION_FILE = /\.(ya?ml|json)$/i;

/** True for a path that names a YAML definition (`.yaml` / `.yml`). */
export function isYamlPath(path: string): boolean {
  return /\.ya?ml$/i.test(path);
}

/**
 * Read a definition: a file, or every `.yaml` / `.yml` / `.json` file of a directory (sorted by
 * name, not recursive), each size-capped like every Baton entry point, and compile them as one
 * project. Throws a CliError when a path cannot be read.
 */
export async function compileDefinitionPath(path: string): Promise<CompileResult> {
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
  return compileProject(files);
}
