import fc from 'fast-check';
import { decodeUtf8, firstInvalidUtf8Offset, parseUntrustedJsonBytes, RejectionCode } from './rejection';

const bytes = (...values: number[]) => new Uint8Array(values);
const utf8 = (text: string) => new TextEncoder().encode(text);

describe('strict UTF-8 for untrusted bytes (issue 14: invalid UTF-8 is named as such)', () => {
  it('bytes that are not UTF-8 are refused invalid_utf8, naming the first bad byte; they are never replaced by U+FFFD', () => {
    const cases: Array<[Uint8Array, number]> = [
      [bytes(0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d), 6], // {"a":"\xff"}: valid JSON once replaced
      [bytes(0x61, 0xc3), 1], // a sequence cut short at the end
      [bytes(0xc0, 0xaf), 0], // overlong '/'
      [bytes(0xed, 0xa0, 0x80), 0], // an encoded surrogate
      [bytes(0xf4, 0x90, 0x80, 0x80), 0], // above U+10FFFF
      [bytes(0x80), 0], // a lone continuation byte
    ];
    for (const [input, offset] of cases) {
      expect(firstInvalidUtf8Offset(input)).toBe(offset);
      const decoded = decodeUtf8(input);
      expect(decoded).toEqual({ ok: false, rejection: { code: 'invalid_utf8', message: expect.stringContaining(`offset ${offset}`), issues: [] } });
    }
    expect(RejectionCode.invalidUtf8).toBe('invalid_utf8');
  });

  it('UTF-8 text decodes as written: ASCII, accents, CJK, emoji, a leading BOM dropped', () => {
    for (const text of ['{"a":1}', 'café', '日本語', '👩‍💻 done']) expect(decodeUtf8(utf8(text))).toEqual({ ok: true, value: text });
    expect(decodeUtf8(bytes(0xef, 0xbb, 0xbf, 0x7b, 0x7d))).toEqual({ ok: true, value: '{}' });
  });

  it('the validator agrees with a fatal TextDecoder on arbitrary bytes', () => {
    const fatal = new TextDecoder('utf-8', { fatal: true });
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (input) => {
        let valid = true;
        try {
          fatal.decode(input);
        } catch {
          valid = false;
        }
        expect(firstInvalidUtf8Offset(input) < 0).toBe(valid);
        expect(decodeUtf8(input).ok).toBe(valid);
      }),
      { numRuns: 3000 },
    );
  });

  it('parseUntrustedJsonBytes: size first, then UTF-8, then JSON', () => {
    expect(parseUntrustedJsonBytes(utf8('{"a":"é"}'), 100)).toEqual({ ok: true, value: { a: 'é' } });
    expect(parseUntrustedJsonBytes(bytes(0x7b, 0xff, 0x7d), 100)).toMatchObject({ ok: false, rejection: { code: 'invalid_utf8' } });
    expect(parseUntrustedJsonBytes(utf8('{"a":'), 100)).toMatchObject({ ok: false, rejection: { code: 'malformed_json' } });
    expect(parseUntrustedJsonBytes(new Uint8Array(101).fill(0xff), 100)).toMatchObject({ ok: false, rejection: { code: 'payload_too_large' } });
  });
});

describe('a \\u escape of a lone surrogate', () => {
  it('is refused invalid_utf8 (no character; jq and other strict readers refuse it too); a pair written as two escapes is a character', () => {
    for (const text of ['{"body":"a\\ud800b"}', '{"body":"\\udc00"}', '{"k\\ud83d":1}', '["\\ud83d"]']) {
      expect(parseUntrustedJsonBytes(utf8(text), 1_000)).toEqual({
        ok: false,
        rejection: { code: 'invalid_utf8', message: expect.stringContaining('lone surrogate'), issues: [] },
      });
    }
    expect(parseUntrustedJsonBytes(utf8('{"body":"\\ud83d\\ude00"}'), 1_000)).toEqual({ ok: true, value: { body: '😀' } });
  });
});
