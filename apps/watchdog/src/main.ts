import 'reflect-metadata';
import { ConfigError } from '@baton/platform';
import { startWatchdog } from './bootstrap';

startWatchdog().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`baton watchdog: ${error.message}\n`);
    process.exit(78);
  }
  process.stderr.write(`baton watchdog: failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
