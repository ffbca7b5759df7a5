import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { OperatorApiRequestSchemas, type OperatorApiRequestName } from '@baton/contracts';
import { buildOpenApiDocument } from './openapi';
import {
  AbandonHandoffBodySchema,
  HandbackDecisionBodySchema,
  HoldAnswerBodySchema,
  NoticeRedeliverBodySchema,
  PauseBodySchema,
  ResumeBodySchema,
  StopAnswerBodySchema,
} from './schemas';

type Operation = { responses: Record<string, { description: string; headers?: Record<string, unknown> }>; requestBody?: { content: Record<string, unknown> } };

/** The operator API's OpenAPI document says what every route may answer, as the API answers it. */
describe('the OpenAPI document', () => {
  const doc = buildOpenApiDocument() as { paths: Record<string, Record<string, Operation>> };
  const operations = Object.entries(doc.paths)
    .filter(([path]) => path.startsWith('/v1/'))
    .flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ route: `${method.toUpperCase()} ${path}`, method, op })));

  it('every /v1 route lists 401 (with WWW-Authenticate), 429 and 503 (with Retry-After)', () => {
    for (const { route, op } of operations) {
      expect({ route, statuses: ['401', '429', '503'].filter((s) => op.responses[s] === undefined) }).toEqual({ route, statuses: [] });
      expect({ route, header: op.responses['401']!.headers?.['WWW-Authenticate'] !== undefined }).toEqual({ route, header: true });
      expect({ route, retry: op.responses['503']!.headers?.['Retry-After'] !== undefined }).toEqual({ route, retry: true });
    }
  });

  it('every GET but the live stream lists 304 (an ETag answered again unchanged), inside /v1 and outside it', () => {
    const gets = Object.entries(doc.paths).flatMap(([path, ops]) =>
      ops['get'] !== undefined && path !== '/v1/events/stream' ? [[path, ops['get']] as const] : [],
    );
    expect(gets.length).toBeGreaterThan(10);
    for (const [path, op] of gets) expect({ path, has304: op.responses['304'] !== undefined }).toEqual({ path, has304: true });
  });

  it('every /v1 GET but the live stream lists its 200 with the ETag, Cache-Control and Vary the API sends; /docs answers an HTML body', () => {
    const gets = operations.filter((o) => o.method === 'get' && o.route !== 'GET /v1/events/stream');
    for (const { route, op } of gets) {
      expect({ route, headers: Object.keys(op.responses['200']?.headers ?? {}).sort() }).toEqual({ route, headers: ['Cache-Control', 'ETag', 'Vary'] });
    }
    const docs = doc.paths['/docs']!['get']! as Operation & { responses: Record<string, { content?: Record<string, unknown> }> };
    expect(Object.keys(docs.responses['200']!.content ?? {})).toEqual(['text/html']);
  });

  it('every POST lists 413 and 415 and takes its body as JSON or form-encoded; payload_too_large is a 413, not a 400', () => {
    const posts = operations.filter((o) => o.method === 'post');
    expect(posts.length).toBeGreaterThanOrEqual(6);
    for (const { route, op } of posts) {
      expect({ route, has: ['413', '415'].every((s) => op.responses[s] !== undefined) }).toEqual({ route, has: true });
      expect({ route, types: Object.keys(op.requestBody?.content ?? {}).sort() }).toEqual({
        route,
        types: ['application/json', 'application/x-www-form-urlencoded'],
      });
      expect({ route, bad: op.responses['400']!.description.includes('payload_too_large') }).toEqual({ route, bad: false });
    }
  });

  describe('every POST body has one schema: the zod schema the route parses with, published as docs/schemas/<name>.json and in this document', () => {
    const root = join(__dirname, '..', '..', '..', '..');
    const published = (name: string): Record<string, unknown> => {
      const {
        $schema: _dialect,
        $id: _id,
        ...schema
      } = JSON.parse(readFileSync(join(root, 'docs', 'schemas', `${name}.json`), 'utf8')) as Record<string, unknown>;
      return schema;
    };
    const names = Object.keys(OperatorApiRequestSchemas) as OperatorApiRequestName[];
    const nameOf = (path: string) => names.filter((name) => (OperatorApiRequestSchemas[name].routes as readonly string[]).includes(path));
    const posts = operations.filter((o) => o.method === 'post').map((o) => ({ ...o, path: o.route.slice('POST '.length) }));

    it('the controllers parse each body with the schema published under its name (one zod object, not a copy)', () => {
      const parsedWith: Record<OperatorApiRequestName, unknown> = {
        'operator-answer-request': StopAnswerBodySchema,
        'hold-answer-request': HoldAnswerBodySchema,
        'handback-decision-request': HandbackDecisionBodySchema,
        'abandon-handoff-request': AbandonHandoffBodySchema,
        'project-pause-request': PauseBodySchema,
        'project-resume-request': ResumeBodySchema,
        'notice-redeliver-request': NoticeRedeliverBodySchema,
      };
      for (const name of names) expect({ name, same: OperatorApiRequestSchemas[name].schema === parsedWith[name] }).toEqual({ name, same: true });
    });

    it("each POST route's requestBody (JSON and form) is its published file, and names it", () => {
      expect(posts.length).toBe(names.flatMap((name) => OperatorApiRequestSchemas[name].routes).length);
      for (const { path, op } of posts) {
        const [name, ...more] = nameOf(path);
        expect({ path, name, more }).toEqual({ path, name: expect.any(String), more: [] });
        const body = op.requestBody as { description?: string; content: Record<string, { schema: unknown }> };
        expect({ path, description: body.description }).toEqual({ path, description: `docs/schemas/${name}.json` });
        for (const type of ['application/json', 'application/x-www-form-urlencoded']) {
          expect({ path, type, schema: body.content[type]!.schema }).toEqual({ path, type, schema: published(name!) });
        }
      }
    });

    it('every route a published body names is a POST of this document', () => {
      const documented = new Set(posts.map((p) => p.path));
      expect(names.flatMap((name) => OperatorApiRequestSchemas[name].routes).filter((route) => !documented.has(route))).toEqual([]);
    });

    it("README's route table points each project POST route at its request schema", () => {
      const readme = readFileSync(join(root, 'README.md'), 'utf8');
      const section = readme.slice(readme.indexOf('## The operator HTTP API'), readme.indexOf('\n## ', readme.indexOf('## The operator HTTP API') + 1));
      const rows = section.split('\n').filter((line) => line.startsWith('| `'));
      for (const name of names) {
        const route = OperatorApiRequestSchemas[name].routes[0].replace(/\{([a-z_]+)\}/g, ':$1');
        const row = rows.find((line) => line.split(' | ')[0]!.includes(`POST ${route}\``));
        expect({ route, row: row !== undefined, names: row?.includes(`docs/schemas/${name}.json`) }).toEqual({ route, row: true, names: true });
      }
    });
  });

  it('responses allow fields a newer Baton adds (no additionalProperties: false); request bodies stay strict', () => {
    const responses = operations.flatMap(({ op }) => Object.values(op.responses));
    expect(responses.length).toBeGreaterThan(20);
    expect(JSON.stringify(responses)).not.toContain('"additionalProperties":false');
    const bodies = operations.filter((o) => o.op.requestBody !== undefined).map((o) => JSON.stringify(o.op.requestBody!.content['application/json']));
    expect(bodies.length).toBeGreaterThanOrEqual(3);
    for (const body of bodies) expect(body).toContain('"additionalProperties":false');
  });

  it('a 202 names its Location; the listings name 403 project_forbidden and the bounds of limit', () => {
    for (const { route, op } of operations.filter((o) => o.op.responses['202'] !== undefined)) {
      expect({ route, location: op.responses['202']!.headers?.['Location'] !== undefined }).toEqual({ route, location: true });
    }
    for (const path of ['/v1/inbox', '/v1/stops']) {
      const op = doc.paths[path]!['get'] as Operation & { parameters: Array<{ name: string; schema: { anyOf?: Array<Record<string, unknown>> } }> };
      expect(op.responses['403']!.description).toContain('project_forbidden');
      const limit = op.parameters.find((p) => p.name === 'limit')!;
      expect(limit.schema.anyOf).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ minimum: 1, maximum: 500 }),
          expect.objectContaining({ pattern: '^(?:[1-9][0-9]?|[1-4][0-9]{2}|500)$' }),
        ]),
      );
    }
  });

  it("GET /v1/projects/{project}/webhooks documents each webhook's id, name, state, last success and failure (with its reason codes), failing_since and dead letters; the inbox page its open_count", () => {
    type Node = { type?: string; properties?: Record<string, Node>; items?: Node; anyOf?: Node[]; enum?: string[]; required?: string[] };
    const schemaOf = (path: string) =>
      (doc.paths[path]!['get'] as unknown as { responses: Record<string, { content: Record<string, { schema: Node }> }> }).responses['200']!.content[
        'application/json'
      ]!.schema;
    const op = doc.paths['/v1/projects/{project}/webhooks']!['get']! as Operation & { parameters: Array<{ name: string }> };
    expect(op.parameters.map((p) => p.name)).toEqual(['project']);
    expect(Object.keys(op.responses).sort()).toEqual(['200', '304', '400', '401', '404', '429', '503']);
    const webhook = schemaOf('/v1/projects/{project}/webhooks').properties!['webhooks']!.items!;
    expect(webhook.required?.slice().sort()).toEqual(
      ['dead_lettered', 'failing_since', 'id', 'last_dead_lettered', 'last_failure', 'last_success', 'name', 'state'].sort(),
    );
    expect(webhook.properties!['state']!.enum).toEqual(['ok', 'failing', 'unknown']);
    const failure = webhook.properties!['last_failure']!.anyOf!.find((branch) => branch.type === 'object')!;
    expect(failure.properties!['reason']!.enum).toEqual(expect.arrayContaining(['http_status', 'connection_refused', 'timeout', 'request_failed']));
    expect(schemaOf('/v1/inbox').properties!['open_count']).toMatchObject({ type: 'integer' });
    // The redelivery's answers name each webhook beside its id.
    const redeliver = doc.paths['/v1/projects/{project}/notices/{notice_id}/redeliver']!['post'] as unknown as {
      responses: Record<string, { content: Record<string, { schema: Node }> }>;
    };
    expect(redeliver.responses['200']!.content['application/json']!.schema.properties!['webhook_names']).toMatchObject({ type: 'object' });
    const refusal = redeliver.responses['502']!.content['application/json']!.schema.properties!['error']!.properties!['details']!;
    expect(refusal.properties!['failed']!.items!.properties!['name']).toMatchObject({ type: 'string' });
    expect(refusal.properties!['webhook_names']).toMatchObject({ type: 'object' });
  });

  it("GET /v1/projects/{project} documents each workflow's versions (workflow_versions) beside workflows, which stays a list of names", () => {
    type Node = { type?: string; properties?: Record<string, Node>; items?: Node; anyOf?: Node[]; required?: string[] };
    const op = doc.paths['/v1/projects/{project}']!['get'] as unknown as { responses: Record<string, { content: Record<string, { schema: Node }> }> };
    const project = op.responses['200']!.content['application/json']!.schema;
    const definition = project.properties!['definition']!.anyOf!.find((branch) => branch.type === 'object')!;
    expect(definition.properties!['workflows']).toMatchObject({ type: 'array', items: { type: 'string' } });
    // A new field, optional: a summary without it is still the route's reply.
    expect(definition.required).not.toContain('workflow_versions');
    const entry = definition.properties!['workflow_versions']!.items!;
    expect(entry).toMatchObject({
      type: 'object',
      properties: {
        name: { type: 'string' },
        versions: { type: 'array', items: { type: 'integer' } },
        in_force: { type: 'array', items: { type: 'integer' } },
      },
    });
  });
});
