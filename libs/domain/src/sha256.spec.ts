import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { sha256, sha256Hex } from './sha256';

const nodeSha256 = (input: string | Uint8Array): string => createHash('sha256').update(input).digest('hex');

describe('sha256 (pure TypeScript, for the ids the domain derives)', () => {
  it('gives the published FIPS 180-4 / NIST test vectors', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')).toBe('248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1');
    expect(sha256Hex('abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu')).toBe(
      'cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1',
    );
    expect(sha256Hex('a'.repeat(1_000_000))).toBe('cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0');
  });

  it('pads correctly at every block boundary (lengths 0…200 against node:crypto)', () => {
    for (let length = 0; length <= 200; length++) {
      const text = 'x'.repeat(length);
      expect(sha256Hex(text)).toBe(nodeSha256(text));
    }
  });

  it('hashes text as its UTF-8 bytes, non-ASCII included', () => {
    for (const text of ['é', 'naïve café', '日本語', '😀 emoji', 'ß'.repeat(70)]) expect(sha256Hex(text)).toBe(nodeSha256(text));
    expect(sha256Hex('é')).toBe(sha256Hex(new Uint8Array([0xc3, 0xa9])));
  });

  it('returns 32 bytes, the same as its hex', () => {
    const bytes = sha256('abc');
    expect(bytes).toHaveLength(32);
    expect(Buffer.from(bytes).toString('hex')).toBe(sha256Hex('abc'));
  });

  it('agrees with node:crypto on any string or byte array', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 300 }), (text) => sha256Hex(text) === nodeSha256(text)),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (bytes) => sha256Hex(bytes) === nodeSha256(bytes)),
      { numRuns: 300 },
    );
  });
});
