import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AgentNameSchema, ProjectIdSchema, ServiceNameSchema, describePrincipal, type Principal } from '@baton/contracts';
import {
  DeploymentError,
  credsName,
  ensureServiceCreds,
  issueCreds,
  openDeployment,
  permissionsFor,
  writeServerConfig,
  type AuthDeployment,
} from '@baton/eventstore';
import type { Command } from '../command';
import { flag, parseCommandArgs, required, str } from '../command';
import type { CliContext } from '../context';
import { CliError, CliErrorCode, ExitCode, UsageError } from '../errors';

/** The deployment folder: `--dir`, else BATON_NATS_DIR, else ./var/nats-auth. */
function deploymentDir(ctx: CliContext, dir: string | undefined): string {
  return resolve(dir ?? ctx.env['BATON_NATS_DIR'] ?? 'var/nats-auth');
}

/**
 * The deployment in `dir`. `create` (nats-config) makes a new one when the folder holds none.
 * `baton creds` does not, for a folder it was pointed at (`--dir`, BATON_NATS_DIR): it refuses
 * before writing anything, since credentials signed by a new operator and account in a mistyped
 * folder are trusted by no server and would be handed out as if they worked. The default
 * ./var/nats-auth is the folder `npm start` and `baton nats-config` use, so credentials made
 * there first are trusted once the server is configured from it: made, with a warning that says
 * so (and names the folder, which depends on the working directory).
 */
function open(ctx: CliContext, dir: string | undefined, create: boolean): AuthDeployment {
  const folder = deploymentDir(ctx, dir);
  if (!create && !existsSync(join(folder, 'deployment.json'))) {
    const chosen = dir !== undefined ? '--dir' : ctx.env['BATON_NATS_DIR'] !== undefined ? 'BATON_NATS_DIR' : null;
    if (chosen !== null) {
      throw new UsageError(
        `no deployment in ${folder} (${chosen}): it holds no deployment.json. Run \`baton nats-config\` first, or point --dir or BATON_NATS_DIR at the folder it made; nothing was written`,
        false,
        { code: CliErrorCode.usage, details: { dir: folder } },
      );
    }
    ctx.warn(
      `no deployment in ${folder} (the default ./var/nats-auth of this working directory): a new one is made; its credentials are trusted only by a nats-server configured from this folder (npm start, or baton nats-config)`,
    );
  }
  try {
    return openDeployment(folder, ctx.config().BATON_PREFIX);
  } catch (error) {
    if (error instanceof DeploymentError) throw new CliError(error.message, { cause: error });
    const errno = (error as NodeJS.ErrnoException).code;
    // The folder (or one above it) is a file: no deployment can be made or read there.
    if (errno === 'EEXIST' || errno === 'ENOTDIR') {
      const chosen = dir !== undefined ? '--dir' : ctx.env['BATON_NATS_DIR'] !== undefined ? 'BATON_NATS_DIR' : 'the default ./var/nats-auth';
      throw new CliError(`${folder} (${chosen}) is not a folder (it, or a folder above it, is a file): name a folder for the deployment; nothing was written`, {
        cause: error,
        code: CliErrorCode.invalidInput,
        details: { dir: folder },
      });
    }
    throw error;
  }
}

/**
 * A `host:port` option (`--listen`, `--http`) as nats-server takes it: a host (a name, an IPv4
 * address, or an IPv6 one in brackets) and a port from 1 to 65535. Checked before anything is
 * written: a value nats-server refuses would otherwise be written into its configuration.
 */
export function hostPort(option: string, value: string): string {
  const at = value.lastIndexOf(':');
  const host = at > 0 ? value.slice(0, at) : '';
  const port = at > 0 ? value.slice(at + 1) : '';
  const bracketed = host.startsWith('[') && host.endsWith(']') && host.length > 2;
  const hostOk = bracketed || (host.length > 0 && !/[\s:[\]/]/.test(host));
  const portOk = /^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535;
  if (!hostOk || !portOk) throw new UsageError(`--${option} must be host:port with a host and a port from 1 to 65535 (e.g. 127.0.0.1:4222), got "${value}"`);
  return value;
}

export const natsConfigCommand: Command = {
  name: 'nats-config',
  summary: 'make the NATS operator, account and service credentials and write a nats-server configuration',
  help: `Usage: baton nats-config [--dir <folder>] [--listen <host:port>] [--store-dir <folder>] [--http <host:port>] [--json]

Set up NATS authentication for a Baton deployment (decentralized JWT auth, works on
nats-server 2.9 and newer). The first run creates an operator key, the BATON account (JetStream
on) and a system account in <folder>, then credentials for the four services and the admin;
later runs keep them. It (re)writes <folder>/nats-server.conf, which trusts the operator with a
memory resolver: no user is listed in it and no client connects without credentials. Each
principal may publish and read only its own subjects (see docs/identity.md).

Start the server with:   nats-server -c <folder>/nats-server.conf
and each service with:   NATS_CREDS=<folder>/creds/<service>.creds
Agents get their own file from \`baton creds agent\`.

The *.seed files are secrets (mode 0600): whoever holds account.seed can issue credentials.

Options:
  --dir <folder>        deployment folder (default BATON_NATS_DIR or ./var/nats-auth)
  --listen <host:port>  client listener (default 127.0.0.1:4222; keep loopback unless TLS is set up)
  --store-dir <folder>  JetStream storage (default <folder>/jetstream)
  --http <host:port>    monitoring listener (default none)
  --json                print the paths as JSON
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      { dir: { type: 'string' }, listen: { type: 'string' }, 'store-dir': { type: 'string' }, http: { type: 'string' }, json: { type: 'boolean' } },
      { min: 0, max: 0 },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    // The listeners first: nothing is written for a command line that is wrong.
    const listen = hostPort('listen', str(args, 'listen') ?? '127.0.0.1:4222');
    const httpGiven = str(args, 'http');
    const http = httpGiven !== undefined ? hostPort('http', httpGiven) : undefined;
    const deployment = open(ctx, str(args, 'dir'), true);
    const creds = ensureServiceCreds(deployment);
    const config = writeServerConfig(deployment, {
      listen,
      storeDir: resolve(str(args, 'store-dir') ?? resolve(deployment.dir, 'jetstream')),
      ...(http !== undefined ? { http } : {}),
    });
    const summary = { dir: deployment.dir, prefix: deployment.prefix, server_config: config, listen, account: deployment.account.publicKey, creds };
    if (flag(args, 'json')) {
      ctx.io.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
      return ExitCode.ok;
    }
    ctx.io.stdout.write(
      [
        `deployment ${deployment.dir} (prefix ${deployment.prefix}, account ${deployment.account.publicKey})`,
        `server configuration: ${config}`,
        `  start it with: nats-server -c ${config}`,
        ...Object.entries(creds).map(([name, file]) => `credentials of ${name}: ${file}`),
        '',
      ].join('\n'),
    );
    return ExitCode.ok;
  },
};

function principalOf(kind: string, args: ReturnType<typeof parseCommandArgs>): Principal {
  switch (kind) {
    case 'agent': {
      const project = required(args, 'project');
      const agent = required(args, 'agent');
      if (!ProjectIdSchema.safeParse(project).success) throw new UsageError(`--project "${project}" is not a project key (lowercase letters, digits, _ and -)`);
      if (!AgentNameSchema.safeParse(agent).success) throw new UsageError(`--agent "${agent}" is not an agent name (letters, digits, _ and -)`);
      return { kind: 'agent', project, agent };
    }
    case 'service': {
      const name = args.positionals[1];
      const parsed = ServiceNameSchema.safeParse(name);
      if (!parsed.success) throw new UsageError(`baton creds service <router|ledger|watchdog|notifier>, got "${name ?? ''}"`);
      return { kind: 'svc', service: parsed.data };
    }
    case 'admin':
      return { kind: 'op', relay: 'admin' };
    default:
      throw new UsageError(`baton creds agent|service|admin, got "${kind}"`);
  }
}

export const credsCommand: Command = {
  name: 'creds',
  summary: 'issue NATS credentials for an agent, a service or the admin',
  help: `Usage: baton creds agent --project <p> --agent <name> [--dir <folder>] [--json]
       baton creds service <router|ledger|watchdog|notifier> [--dir <folder>] [--json]
       baton creds admin [--dir <folder>] [--json]

Issue a new credentials file (a user JWT signed by the deployment's account key, plus the user's
nkey seed) for one principal, written under <folder>/creds/ with mode 0600. The server needs no
change: it trusts every user the account signs. An agent's credentials let it publish, on its
edge (<prefix>.edge.<p>.…, relayed by the ledger to <prefix>.in.<p>.…), its own results
(.result.<agent>), runs and meshes started as itself (.start.<agent>, .mesh_start.<agent>) or on the
project's shared start subjects, its mesh turns and messages in its project; pull and acknowledge
its own offers durable through its edge (<prefix>.edge.<p>.offers.<agent>.…); call the ledger as
itself (<prefix>.cmd.ledger.<p>.agent.<agent>.*); and read replies on its own inbox prefix —
nothing else, and nothing JetStream reads directly (docs/identity.md, "The agent edge").

Give the file to the agent microservice as NATS_CREDS (the SDK's natsCreds option). Run
\`baton nats-config\` first: a folder named by --dir or BATON_NATS_DIR that holds no deployment
(no deployment.json) is refused (exit 2) and nothing is written, since credentials from a new
operator would be trusted by no server. In the default ./var/nats-auth (of the working directory)
a deployment is made, with a warning: npm start and nats-config then configure the server from it.

Options:
  --project <p>   the agent's project        --agent <name>  the agent's name
  --dir <folder>  deployment folder (default BATON_NATS_DIR or ./var/nats-auth)
  --json          print the file, principal and permissions as JSON
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(
      argv,
      { project: { type: 'string' }, agent: { type: 'string' }, dir: { type: 'string' }, json: { type: 'boolean' } },
      { min: 1, max: 2, names: ['what to issue: agent, service or admin'] },
    );
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const principal = principalOf(args.positionals[0] ?? '', args);
    const deployment = open(ctx, str(args, 'dir'), false);
    const issued = issueCreds(deployment, principal);
    if (flag(args, 'json')) {
      const permissions = permissionsFor(deployment.prefix, principal);
      ctx.io.stdout.write(
        `${JSON.stringify({ principal, name: credsName(principal), file: issued.file, user: issued.userPublicKey, permissions }, null, 2)}\n`,
      );
      return ExitCode.ok;
    }
    ctx.io.stdout.write(`${describePrincipal(principal)}: ${issued.file}\n  user ${issued.userPublicKey}; give it to the process as NATS_CREDS\n`);
    return ExitCode.ok;
  },
};
