import 'reflect-metadata';
import { exitOnStartFailure } from '@baton/platform';
import { startLedger } from './ledger';

startLedger().catch(exitOnStartFailure('ledger'));
