import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { CliContext } from './context';
import { UsageError, type ExitCode } from './errors';

/** One `baton <command>`: its help text and its run function (returns the exit code). */
export interface Command {
  name: string;
  /** One line for `baton help`. */
  summary: string;
  /** The full help: usage line, options, examples. */
  help: string;
  run(argv: string[], ctx: CliContext): Promise<ExitCode>;
}

type Options = NonNullable<ParseArgsConfig['options']>;

export interface ParsedArgs {
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
  /** True when `--help` / `-h` was given: the caller prints its help and exits 0. */
  help: boolean;
}

/**
 * Parse a command's arguments with node:util parseArgs (strict: unknown options are usage
 * errors). `--help` / `-h` is added to every command. `positionals.names` names the arguments as
 * the usage line does (`<handoff-id>`), so that a missing one is named.
 */
export function parseCommandArgs(argv: string[], options: Options, positionals: { min: number; max: number; names?: readonly string[] }): ParsedArgs {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(usageMessage(error, options));
  }
  const values = parsed.values as ParsedArgs['values'];
  if (values['help'] === true) return { values, positionals: parsed.positionals, help: true };
  if (parsed.positionals.length < positionals.min) {
    const missing = positionals.names?.[parsed.positionals.length];
    throw new UsageError(missing !== undefined ? `missing ${missing}` : 'missing argument');
  }
  // An id or a path that is empty (`baton answer ""`) names nothing: not a request to send.
  if (parsed.positionals.some((value) => value.trim() === '')) throw new UsageError('an argument is empty');
  if (parsed.positionals.length > positionals.max) throw new UsageError(`unexpected argument "${parsed.positionals[positionals.max]}"`);
  return { values, positionals: parsed.positionals, help: false };
}

/**
 * What a command line that util.parseArgs refused says: an unknown option names the options the
 * command takes (Node's own text suggests a `--` separator with unbalanced quotes); anything else
 * as Node words it.
 */
function usageMessage(error: unknown, options: Options): string {
  const { code, message } = error as { code?: string; message: string };
  const unknown = /Unknown option '([^']+)'/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown !== undefined) {
    const known = Object.keys(options)
      .map((name) => `--${name}`)
      .join(', ');
    return `unknown option ${unknown}${known ? ` (this command takes ${known}, --help)` : ' (this command takes no options but --help)'}`;
  }
  return message;
}

/** A string option's value, or undefined. */
export function str(args: ParsedArgs, name: string): string | undefined {
  const value = args.values[name];
  return typeof value === 'string' ? value : undefined;
}

/** A string option that must be present. */
export function required(args: ParsedArgs, name: string): string {
  const value = str(args, name);
  if (value === undefined || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

/** A positive integer option, or undefined. */
export function int(args: ParsedArgs, name: string, range: { min: number; max: number }): number | undefined {
  const raw = str(args, name);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < range.min || value > range.max) {
    throw new UsageError(`--${name} must be an integer from ${range.min} to ${range.max}, got "${raw}"`);
  }
  return value;
}

export function flag(args: ParsedArgs, name: string): boolean {
  return args.values[name] === true;
}
