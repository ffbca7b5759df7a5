import type { Command } from '../command';
import { answerCommand } from './answer';
import { decideCommand } from './decide';
import { handoffCommand } from './handoff';
import { inboxCommand } from './inbox';
import { publishDefinitionCommand } from './publish-definition';
import { replayCommand } from './replay';
import { resultCommand } from './result';
import { runCommand } from './run';
import { schemasCommand } from './schemas';
import { startCommand } from './start';
import { stopsCommand } from './stops';
import { verifyCommand } from './verify';

/** Every command, in the order `baton help` lists them. */
export const commands: readonly Command[] = [
  inboxCommand,
  stopsCommand,
  handoffCommand,
  runCommand,
  answerCommand,
  decideCommand,
  startCommand,
  resultCommand,
  publishDefinitionCommand,
  replayCommand,
  verifyCommand,
  schemasCommand,
];
