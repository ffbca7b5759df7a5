import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateJsonSchemas } from './json-schema';

/**
 * Producers in other languages read the JSON Schemas committed in docs/schemas. They are generated
 * from the zod contracts by `baton schemas` (pretty-printed, trailing newline); this test fails
 * when a contract changed and the committed copies were not regenerated.
 */
const dir = join(__dirname, '..', '..', '..', 'docs', 'schemas');
const schemas = generateJsonSchemas();

describe('committed JSON Schemas never drift from the zod contracts (regenerate: node bin/baton.js schemas)', () => {
  it('docs/schemas holds exactly one file per wire contract', () => {
    const files = readdirSync(dir)
      .filter((name) => name.endsWith('.json'))
      .sort();
    expect(files).toEqual(
      Object.keys(schemas)
        .map((name) => `${name}.json`)
        .sort(),
    );
  });

  it.each(Object.keys(schemas))('docs/schemas/%s.json equals generateJsonSchemas()', (name) => {
    const committed = readFileSync(join(dir, `${name}.json`), 'utf8');
    expect(committed).toBe(`${JSON.stringify(schemas[name], null, 2)}\n`);
  });
});
