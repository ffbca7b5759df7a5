import { exitOnStartFailure } from '@baton/platform';
import { startRouter } from './router.app';

void startRouter().catch(exitOnStartFailure('router'));
