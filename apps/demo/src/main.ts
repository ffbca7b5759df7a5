import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Principals } from '@baton/contracts';
import { credsPath, deploymentDir, issueCreds, openDeployment, readLocalDeployment, stoppedDeployment } from '@baton/eventstore';
import { runDemo } from '@baton/testing';

/**
 * Where the platform's NATS is and who the demo is on it. With NATS_URL unset, the platform
 * `npm start` runs (with authentication) is found through `<BATON_NATS_DIR>/local.json`: the demo
 * connects as the admin, and each demo agent gets credentials of its own from the deployment folder
 * (`baton creds agent`), so it talks to Baton exactly as an agent microservice would.
 */
function natsAccess(prefix: string): { natsUrl: string; natsCreds?: string; agentCreds?: (agent: string) => string; apiUrl?: string } {
  const dir = deploymentDir(process.env);
  const local = process.env['NATS_URL'] === undefined ? readLocalDeployment(dir) : null;
  // The folder holds a deployment whose npm start is not running: the defaults may be another platform's.
  const stopped = stoppedDeployment(process.env, local);
  if (stopped !== null)
    console.warn(
      `warning (default_server_read): ${stopped.dir} holds a deployment (${stopped.found.join(', ')}) but ` +
        `${stopped.localJson === 'missing' ? 'no local.json: npm start is not running' : 'its local.json is not one npm start wrote'}, ` +
        `so the demo uses NATS at the default nats://127.0.0.1:4222${process.env['BATON_API_URL'] === undefined ? ' and the operator API at the default http://127.0.0.1:7100' : ''}, ` +
        `which may be another deployment's. Start the platform (npm start), or set NATS_URL and NATS_CREDS${process.env['BATON_API_URL'] === undefined ? ' and BATON_API_URL' : ''} to the one meant`,
    );
  if (local !== null) {
    const deployment = openDeployment(dir, prefix);
    const issued = new Map<string, string>();
    const project = process.env['BATON_DEMO_PROJECT'] ?? 'demo';
    const agentCreds = (agent: string) => {
      let file = issued.get(agent);
      if (file === undefined) {
        const principal = Principals.agent(project, agent);
        file = existsSync(credsPath(deployment, principal)) ? credsPath(deployment, principal) : issueCreds(deployment, principal).file;
        issued.set(agent, file);
      }
      return file;
    };
    return { natsUrl: local.url, natsCreds: local.admin, agentCreds, ...(local.api !== undefined ? { apiUrl: local.api } : {}) };
  }
  const natsCreds = process.env['NATS_CREDS'];
  return { natsUrl: process.env['NATS_URL'] ?? 'nats://127.0.0.1:4222', ...(natsCreds ? { natsCreds } : {}) };
}

/**
 * The operator API needs a token. Use BATON_TOKEN when set; otherwise make an operator token for
 * the demo project with `baton token create`, as an operator would: named for the project
 * (`demo-operator-<project>`), so that demos of several projects at once do not revoke each
 * other's (`--rotate` revokes the earlier tokens of the same name only).
 */
function demoToken(project: string): string {
  const given = process.env['BATON_TOKEN'];
  if (given) return given;
  const cli = join(__dirname, '..', '..', '..', '..', 'bin', 'baton.js');
  const made = spawnSync(
    process.execPath,
    [cli, 'token', 'create', '--role', 'operator', '--project', project, '--name', `demo-operator-${project}`, '--rotate', '--json'],
    {
      encoding: 'utf8',
      env: { ...process.env, BATON_CLI_NO_BUILD: process.env['BATON_CLI_NO_BUILD'] ?? '0' },
    },
  );
  if (made.status !== 0) throw new Error(`could not create an operator token (baton token create): ${made.stderr}`);
  return (JSON.parse(made.stdout) as { token: string }).token;
}

/**
 * `npm run demo`: run seed 000 §6's worked examples, a seed 003 stop and a seed 002 claim /
 * return / accept cycle against the running platform (`npm start`), print what happened and what
 * the operator inbox holds, and exit non-zero if any outcome differs from the rules.
 */
async function main(): Promise<number> {
  // The prefix npm start's platform runs with (local.json) when BATON_PREFIX does not say, as the CLI does.
  const localPrefix = process.env['NATS_URL'] === undefined ? readLocalDeployment(deploymentDir(process.env))?.prefix : undefined;
  const prefix = process.env['BATON_PREFIX'] ?? localPrefix ?? 'baton';
  const access = natsAccess(prefix);
  const natsUrl = access.natsUrl;
  // The operator API npm start names in local.json (NOTIFIER_HTTP_PORT may have moved it), unless BATON_API_URL says.
  const apiUrl = process.env['BATON_API_URL'] ?? access.apiUrl ?? 'http://127.0.0.1:7100';
  const project = process.env['BATON_DEMO_PROJECT'] ?? 'demo';
  console.log(
    `Baton demo against ${natsUrl} (prefix ${prefix}${access.natsCreds ? ', authenticated; each agent with its own credentials' : ''}), operator API ${apiUrl}`,
  );
  try {
    await fetch(`${apiUrl}/health/ready`);
  } catch {
    console.error(`The operator API at ${apiUrl} does not answer. Start the platform first: npm start`);
    return 1;
  }
  const apiToken = demoToken(project);
  const report = await runDemo({ ...access, prefix, apiUrl, apiToken, project, log: (line) => console.log(line) });
  console.log('\nThe operator inbox now holds (open items from this demo run, most urgent first):');
  for (const item of report.inbox) {
    console.log(
      `  - [${String(item['kind'])}] ${String(item['why'] ?? '')} ${String(item['agent'] ?? '')} priority=${String(item['priority'] ?? '')} ${String(item['title'] ?? item['summary'] ?? item['id'])}`,
    );
  }
  if (report.inbox.length === 0) console.log('  (nothing)');
  const failed = report.outcomes.filter((o) => !o.ok);
  console.log(`\n${report.outcomes.length - failed.length} passed, ${failed.length} failed`);
  return failed.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
