import { readFile } from 'node:fs/promises';
import { Limits, parseUntrustedJson } from '@baton/contracts';
import { CliError, CliErrorCode } from '../errors';

/** Read a JSON file (`-` reads stdin), size-capped like every Baton entry point. */
export async function readJsonFile(path: string): Promise<unknown> {
  let text: string;
  try {
    text = path === '-' ? await readStdin() : await readFile(path, 'utf8');
  } catch (error) {
    throw new CliError(`cannot read ${path}: ${(error as Error).message}`, { code: CliErrorCode.invalidInput });
  }
  const decoded = parseUntrustedJson(text, Limits.maxMessageBytes);
  if (!decoded.ok) throw new CliError(`${path}: ${decoded.rejection.message}`, { code: CliErrorCode.invalidInput });
  return decoded.value;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
