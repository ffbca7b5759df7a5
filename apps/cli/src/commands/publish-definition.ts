import { headersFrom } from '@baton/eventstore';
import {
  leadingCode,
  parseIgnoringUnknownKeys,
  ProjectDefinitionSchema,
  PUBLISHED_BY_HEADER,
  PublishDefinitionReplySchema,
  rejectionFromZod,
} from '@baton/contracts';
import { AgentSubjects } from '@baton/sdk';
import type { Command } from '../command';
import { parseCommandArgs } from '../command';
import { CliError, CliErrorCode, CliWarningCode, ExitCode, requestError } from '../errors';
import { printJson, renderFields } from '../output';
import { formatDiagnostic, hasErrors } from '@baton/definitions';
import { loadDefinition } from './definition-files';
import { readJsonFile } from './read-json';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const publishDefinitionCommand: Command = {
  name: 'publish-definition',
  summary: "publish a project's definition (agents, workflows, lead) to the router",
  help: `Usage: baton publish-definition <file.json|file.yaml|dir> [--json]

Validate a ProjectDefinition (docs/schemas/project-definition.json) and send it to the router
(request/reply on <prefix>.cmd.router.<project>.publish_definition). Publishing the same
definition again changes nothing (changed: false). Use - to read stdin (JSON, the compiled
contract). A .yaml / .yml file, or a directory of definition files, is compiled first (see baton
validate) and refused when it has errors; a .json file is taken as the compiled contract when it
is one, else compiled as source written in JSON — exactly as baton validate reads it.

Options:
  --json   print the router's reply as JSON
`,
  async run(argv, ctx) {
    const args = parseCommandArgs(argv, { json: { type: 'boolean' } }, { min: 1, max: 1, names: ['<file.json|file.yaml|dir> (the definition; - for stdin)'] });
    if (args.help) {
      ctx.io.stdout.write(this.help);
      return ExitCode.ok;
    }
    const file = args.positionals[0]!;
    let source: unknown;
    if (file === '-') {
      source = await readJsonFile(file);
    } else {
      // Read as validate reads it (docs/definitions.md); a definition with errors is never sent.
      const loaded = await loadDefinition(file);
      const compiled = loaded.result;
      if (loaded.format === 'source' && loaded.contract !== undefined) {
        // A .json file that is neither the compiled contract nor a source that compiles: the
        // contract's refusal, with the router's code for it (a mesh that does not build: MESH_*).
        const rejection = rejectionFromZod(loaded.contract);
        throw new CliError(`${file} is not a valid project definition`, { code: leadingCode(rejection), issues: rejection.issues });
      }
      if (compiled.project === null || hasErrors(compiled.diagnostics)) {
        throw new CliError(`${file} does not compile:\n${compiled.diagnostics.map((d) => `  ${formatDiagnostic(d)}`).join('\n')}`, {
          code: CliErrorCode.definitionInvalid,
          details: { diagnostics: compiled.diagnostics },
        });
      }
      // Warnings of a definition that compiles (with --json kept, each with its diagnostic: see CliContext.warn).
      for (const d of compiled.diagnostics)
        ctx.warn(CliWarningCode.definitionWarning, formatDiagnostic(d), `baton: ${formatDiagnostic(d)}\n`, { diagnostic: d });
      source = compiled.project;
    }
    const parsed = ProjectDefinitionSchema.safeParse(source);
    if (!parsed.success) {
      const rejection = rejectionFromZod(parsed.error);
      // The router's code for the same refusal (a mesh that does not build: its MESH_* code).
      throw new CliError(`${file} is not a valid project definition`, { code: leadingCode(rejection), issues: rejection.issues });
    }
    const definition = parsed.data;
    const nats = await ctx.nats();
    const subject = AgentSubjects.router(ctx.config().BATON_PREFIX, definition.project, 'publish_definition');
    // The admin connection publishes and is recorded as the publisher (`admin`); the person it names
    // (BATON_OPERATOR, else $USER) is recorded beside it as on_behalf_of, a claim, as for pause and resume.
    const named = ctx.namedOperator();
    const headers = headersFrom(named !== undefined ? { [PUBLISHED_BY_HEADER]: named } : {});
    let raw: Uint8Array;
    try {
      raw = (await nats.connection.request(subject, encoder.encode(JSON.stringify(definition)), { timeout: 10_000, headers })).data;
    } catch (error) {
      const failure = requestError(error, 'publishing the definition', 'router', subject, ctx.config().BATON_PREFIX);
      // Publishing is idempotent by content: the same definition again is no new version (changed: false).
      if (failure.code === CliErrorCode.outcomeUnknown)
        throw new CliError(`${failure.message}; publishing the same definition again is safe: if it was applied, it changes nothing (changed: false)`, {
          cause: error,
          code: CliErrorCode.outcomeUnknown,
        });
      throw failure;
    }
    let body: unknown;
    try {
      body = JSON.parse(decoder.decode(raw));
    } catch {
      body = undefined;
    }
    const reply = parseIgnoringUnknownKeys(PublishDefinitionReplySchema, body);
    if (!reply.success) throw new CliError(`unexpected reply from the router: ${decoder.decode(raw).slice(0, 300)}`, { code: CliErrorCode.badReply });
    if (args.values['json'] === true) printJson(ctx.io, reply.data);
    if (!reply.data.ok) {
      const e = reply.data.error;
      throw new CliError(`the router refused the definition: ${e.code}: ${e.message}`, {
        code: e.code,
        issues: e.issues,
        ...(e.details !== undefined ? { details: e.details } : {}),
      });
    }
    if (args.values['json'] !== true) {
      ctx.io.stdout.write(renderFields({ project: reply.data.project, version: reply.data.version, digest: reply.data.digest, changed: reply.data.changed }));
    }
    return ExitCode.ok;
  },
};
