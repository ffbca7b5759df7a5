import 'reflect-metadata';
import { ConfigError } from '@baton/platform';
import { startLedger } from './ledger';

startLedger().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`baton ledger: ${error.message}\n`);
    process.exit(78);
  }
  process.stderr.write(`baton ledger failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
