/**
 * The keys a rebuild wrote into its shadow generation, as a Bloom filter: {@link mightHave} is
 * false only for a key that was never {@link add}ed (no false negatives), and true, now and then,
 * for one that was not (about 2 % with a million keys at the default size, more beyond; a false
 * positive only costs the read it would have made anyway). A shadow generation is fresh and only
 * its rebuild writes it, so a key the filter never saw holds nothing there: the rebuild takes it
 * as absent instead of reading it back. Memory is fixed (`bits / 8` bytes) whatever the stream's
 * length, where a set of the keys would grow with it.
 */
export class WrittenKeys {
  private readonly words: Uint32Array;
  private readonly mask: number;
  private count = 0;

  /**
   * @param log2Bits the filter's size as a power of two (default 2^23 bits: 1 MiB)
   * @param hashes bit positions per key (default 4)
   */
  constructor(
    log2Bits = 23,
    private readonly hashes = 4,
  ) {
    if (!Number.isInteger(log2Bits) || log2Bits < 5 || log2Bits > 31) throw new RangeError('log2Bits must be an integer from 5 to 31');
    if (!Number.isInteger(hashes) || hashes < 1 || hashes > 16) throw new RangeError('hashes must be an integer from 1 to 16');
    this.words = new Uint32Array(2 ** (log2Bits - 5));
    this.mask = 2 ** log2Bits - 1;
  }

  /** Keys added so far (each `add` counts, repeats too). */
  get added(): number {
    return this.count;
  }

  add(key: string): void {
    this.count++;
    hashPair(key);
    const h1 = hash1;
    const h2 = hash2;
    for (let i = 0; i < this.hashes; i++) {
      const bit = (h1 + Math.imul(i, h2)) & this.mask;
      this.words[bit >>> 5]! |= 1 << (bit & 31);
    }
  }

  /** False: `key` was certainly never added. True: it probably was. */
  mightHave(key: string): boolean {
    hashPair(key);
    const h1 = hash1;
    const h2 = hash2;
    for (let i = 0; i < this.hashes; i++) {
      const bit = (h1 + Math.imul(i, h2)) & this.mask;
      if ((this.words[bit >>> 5]! & (1 << (bit & 31))) === 0) return false;
    }
    return true;
  }
}

/** The two hashes of the last {@link hashPair} call (module scratch: no array per key). */
let hash1 = 0;
let hash2 = 1;

/**
 * Two independent 32-bit hashes of a string's UTF-16 code units (FNV-1a, and the same walk with
 * another offset and a murmur-style mix), into {@link hash1} and {@link hash2}; the filter's
 * positions are `h1 + i·h2`. `h2` is made odd so that its multiples cover the table.
 */
function hashPair(key: string): void {
  let a = 0x811c9dc5 | 0;
  let b = 0x9747b28c | 0;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 15;
  }
  b ^= b >>> 13;
  b = Math.imul(b, 0xc2b2ae35 | 0);
  b ^= b >>> 16;
  hash1 = a;
  hash2 = b | 1;
}
