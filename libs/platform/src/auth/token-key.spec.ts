import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  apiTokenRecordMac,
  apiTokenRecordMacValid,
  ensureTokenKeyFile,
  readTokenKey,
  TokenKeyError,
  TokenKeyFileSetting,
  type SignedTokenFields,
} from './token-key';

/* The deployment's token key file: made once, 0600, never replaced; read and checked at start. */

describe('the token key file', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'baton-key-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is made once in the deployment folder, 0600, and read back the same by every later call', () => {
    const first = ensureTokenKeyFile(join(dir, 'deployment'));
    expect(first.created).toBe(true);
    expect(first.key.file).toBe(join(dir, 'deployment', 'token.key'));
    expect(statSync(first.key.file).mode & 0o777).toBe(0o600);
    expect(readFileSync(first.key.file, 'utf8')).toMatch(/^[A-Za-z0-9_-]{43}\n$/);
    const second = ensureTokenKeyFile(join(dir, 'deployment'));
    expect(second.created).toBe(false);
    expect(second.key.secret.equals(first.key.secret)).toBe(true);
    expect(second.key.fingerprint).toMatch(/^[0-9a-f]{12}$/);
  });

  it('a missing or too short file is a TokenKeyError; as BATON_TOKEN_KEY_FILE, a configuration problem naming the file', () => {
    expect(() => readTokenKey(join(dir, 'absent'))).toThrow(TokenKeyError);
    writeFileSync(join(dir, 'short'), 'abc\n');
    expect(() => readTokenKey(join(dir, 'short'))).toThrow(expect.objectContaining({ reason: 'invalid' }));
    const parsed = TokenKeyFileSetting.safeParse(join(dir, 'absent'));
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.message).toContain(`cannot read the token key ${join(dir, 'absent')}`);
    // Any text of 32 characters or more is a key (openssl rand -hex 32 will do), white space around it ignored.
    writeFileSync(join(dir, 'hex'), ` ${'ab'.repeat(32)}\n`);
    expect(TokenKeyFileSetting.parse(join(dir, 'hex')).secret.toString()).toBe('ab'.repeat(32));
  });

  it("a record's MAC covers every field and the prefix", () => {
    const key = ensureTokenKeyFile(dir).key;
    const record: SignedTokenFields = {
      token_id: '0123456789abcdef',
      name: 'ada',
      role: 'viewer',
      projects: ['alpha'],
      salt: 'a'.repeat(32),
      hash: 'b'.repeat(64),
      created_at: '2026-01-01T00:00:00.000Z',
      revoked_at: null,
    };
    const mac = apiTokenRecordMac(key, 'baton', record);
    expect(apiTokenRecordMacValid(key, 'baton', record, mac)).toBe(true);
    expect(apiTokenRecordMacValid(key, 'other', record, mac)).toBe(false);
    const changes: Array<Partial<SignedTokenFields>> = [
      { name: 'bob' },
      { role: 'admin' },
      { projects: '*' },
      { hash: 'c'.repeat(64) },
      { revoked_at: '2026-01-02T00:00:00.000Z' },
      { expires_at: '2030-01-01T00:00:00.000Z' },
      { created_by: 'x' },
    ];
    for (const change of changes)
      expect({ change, valid: apiTokenRecordMacValid(key, 'baton', { ...record, ...change }, mac) }).toEqual({ change, valid: false });
    expect(apiTokenRecordMacValid(key, 'baton', record, 'nothex')).toBe(false);
    expect(apiTokenRecordMacValid(key, 'baton', record, undefined)).toBe(false);
  });
});
