import 'reflect-metadata';
import { exitOnStartFailure } from '@baton/platform';
import { startWatchdog } from './bootstrap';

startWatchdog().catch(exitOnStartFailure('watchdog'));
