import {
  API_TOKEN_HASH_PATTERN,
  API_TOKEN_ID_PATTERN,
  API_TOKEN_PATTERN,
  API_TOKEN_SALT_PATTERN,
  ApiTokenKeys,
  apiTokenExpired,
  formatApiToken,
  hashTokenSecret,
  mintApiToken,
  parseApiToken,
  parseTokenLifetime,
  tokenSecretMatches,
} from './api-token';

const ID = '0123456789abcdef';
// 43 base64url characters, with the `_` and `-` a base64url secret may hold.
const SECRET = 'Ab_cD-ef_gh-IJ_kl-MN_op-QR_st-UV_wx-YZ_01-2';

describe('operator API token format', () => {
  it('a token is bt_<16 hex id>_<43 base64url secret>, and parses back to its parts', () => {
    expect(SECRET).toHaveLength(43);
    const token = formatApiToken({ tokenId: ID, secret: SECRET });
    expect(token).toBe(`bt_${ID}_${SECRET}`);
    expect(parseApiToken(token)).toEqual({ tokenId: ID, secret: SECRET });
    expect(parseApiToken(`  ${token}\n`)).toEqual({ tokenId: ID, secret: SECRET });
  });

  it.each([
    ['empty', ''],
    ['another prefix', `xt_${ID}_${SECRET}`],
    ['no prefix', `${ID}_${SECRET}`],
    ['a short id', `bt_${ID.slice(1)}_${SECRET}`],
    ['an upper-case id', `bt_${ID.toUpperCase()}_${SECRET}`],
    ['a short secret', `bt_${ID}_${SECRET.slice(1)}`],
    ['a long secret', `bt_${ID}_${SECRET}A`],
    ['a secret outside base64url', `bt_${ID}_${SECRET.slice(1)}+`],
    ['a Bearer prefix', `Bearer bt_${ID}_${SECRET}`],
  ])('%s is not a token', (_what, presented) => {
    expect(parseApiToken(presented)).toBeNull();
  });

  it('hashes sha256(salt ":" secret) in hex, and checks a secret against a stored hash', () => {
    const salt = '00112233445566778899aabbccddeeff';
    const hash = '7a8dc7d432e767be5916edd8c3fd8796d6776bb5b22f31876f3cb71f49e81bf0';
    expect(hashTokenSecret(salt, 's3cr3t')).toBe(hash);
    expect(tokenSecretMatches(salt, 's3cr3t', hash)).toBe(true);
    expect(tokenSecretMatches(salt, 's3cr3T', hash)).toBe(false);
    expect(tokenSecretMatches('ffeeddccbbaa99887766554433221100', 's3cr3t', hash)).toBe(false);
    expect(tokenSecretMatches(salt, 's3cr3t', hash.slice(2))).toBe(false);
    expect(tokenSecretMatches(salt, 's3cr3t', '')).toBe(false);
  });

  it('mints a token that parses back, with a fresh salt and the hash of its secret', () => {
    const minted = mintApiToken();
    expect(minted.token).toMatch(API_TOKEN_PATTERN);
    expect(minted.tokenId).toMatch(API_TOKEN_ID_PATTERN);
    expect(minted.salt).toMatch(API_TOKEN_SALT_PATTERN);
    expect(minted.hash).toMatch(API_TOKEN_HASH_PATTERN);
    expect(parseApiToken(minted.token)).toEqual({ tokenId: minted.tokenId, secret: minted.secret });
    expect(minted.hash).toBe(hashTokenSecret(minted.salt, minted.secret));
    const other = mintApiToken();
    expect(other.tokenId).not.toBe(minted.tokenId);
    expect(other.secret).not.toBe(minted.secret);
    expect(other.salt).not.toBe(minted.salt);
  });

  it('every minted secret parses, whatever base64url characters it holds', () => {
    for (let i = 0; i < 200; i++) {
      const minted = mintApiToken();
      expect(parseApiToken(minted.token)?.secret).toBe(minted.secret);
    }
  });

  it('keeps a record per token and the set of ids under the deployment prefix', () => {
    expect(ApiTokenKeys.token('baton', ID)).toBe(`baton:auth:token:${ID}`);
    expect(ApiTokenKeys.tokens('baton')).toBe('baton:auth:tokens');
  });

  it('a token expires at its expires_at (absent or null: never); a lifetime reads <n><s|m|h|d|w>', () => {
    const now = Date.parse('2027-01-01T00:00:00Z');
    expect(apiTokenExpired({}, now)).toBe(false);
    expect(apiTokenExpired({ expires_at: null }, now)).toBe(false);
    expect(apiTokenExpired({ expires_at: '2027-01-01T00:00:01Z' }, now)).toBe(false);
    expect(apiTokenExpired({ expires_at: '2027-01-01T00:00:00Z' }, now)).toBe(true);
    expect(apiTokenExpired({ expires_at: 'not a time' }, now)).toBe(true);
    expect(parseTokenLifetime('30d')).toBe(30 * 86_400_000);
    expect(parseTokenLifetime('12h')).toBe(12 * 3_600_000);
    expect(parseTokenLifetime('90m')).toBe(90 * 60_000);
    expect(parseTokenLifetime('45s')).toBe(45_000);
    expect(parseTokenLifetime('2w')).toBe(14 * 86_400_000);
    for (const bad of ['0d', '30', 'd', '1.5d', '-1d', '30 days', '']) expect(parseTokenLifetime(bad)).toBeNull();
  });
});
