/** Exit codes of the `baton` command. */
export const ExitCode = {
  /** The command did what was asked (for `verify`: the projections match). */
  ok: 0,
  /** The command failed, or (verify) found a difference. */
  failure: 1,
  /** The command line was wrong: unknown command or option, missing argument. */
  usage: 2,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** A mistake in the command line or the environment. Printed (with the command's usage unless `showUsage` is false); exit code 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly showUsage = true,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A failure the user can act on (server unreachable, not found, refused). Printed as is; exit code 1. */
export class CliError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CliError';
  }
}
