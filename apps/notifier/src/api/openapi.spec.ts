import { buildOpenApiDocument } from './openapi';

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
