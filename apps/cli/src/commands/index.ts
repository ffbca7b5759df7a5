import type { Command } from '../command';
import { abandonCommand } from './abandon';
import { answerCommand } from './answer';
import { answerHoldCommand } from './answer-hold';
import { pauseCommand } from './pause';
import { projectCommand } from './project';
import { resumeCommand } from './resume';
import { decideCommand } from './decide';
import { dlqCommand } from './dlq';
import { handoffCommand } from './handoff';
import { inboxCommand } from './inbox';
import { meshCommand } from './mesh';
import { noticeCommand } from './notice';
import { messageCommand } from './message';
import { publishDefinitionCommand } from './publish-definition';
import { replayCommand } from './replay';
import { resultCommand } from './result';
import { runCommand } from './run';
import { schemasCommand } from './schemas';
import { startCommand } from './start';
import { stopsCommand } from './stops';
import { tokenCommand } from './token';
import { streamsCommand } from './streams';
import { verifyCommand } from './verify';
import { backupCommand, restoreCommand } from './backup';
import { validateCommand } from './validate';
import { credsCommand, natsConfigCommand } from './nats-auth';

/** Every command, in the order `baton help` lists them. */
export const commands: readonly Command[] = [
  inboxCommand,
  stopsCommand,
  handoffCommand,
  runCommand,
  meshCommand,
  answerCommand,
  answerHoldCommand,
  decideCommand,
  abandonCommand,
  pauseCommand,
  resumeCommand,
  projectCommand,
  startCommand,
  messageCommand,
  resultCommand,
  publishDefinitionCommand,
  validateCommand,
  replayCommand,
  verifyCommand,
  streamsCommand,
  backupCommand,
  restoreCommand,
  dlqCommand,
  noticeCommand,
  schemasCommand,
  tokenCommand,
  natsConfigCommand,
  credsCommand,
];
