import { startRouter } from './router.app';

void startRouter().catch((error: unknown) => {
  process.stderr.write(`baton router: failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
