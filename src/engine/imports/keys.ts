/**
 * The natural keys (SKUs, emails) an import has met, with the row each was first met on, in
 * typed arrays: a million keys take 24 MB, where a Set of strings would take several times
 * that. A key is kept as two independent 32-bit hashes (FNV-1a-like, with two offsets and primes): two different
 * keys of a million-row file are taken for one with a chance of about one in ten million.
 */
export class KeyRows {
  #high = new Uint32Array(1024);
  #low = new Uint32Array(1024);
  #rows = new Uint32Array(1024);
  #size = 0;

  /** The row `key` was first met on, or undefined (and `row` is kept as its first). */
  firstRowOf(key: string, row: number): number | undefined {
    if (this.#size * 10 >= this.#rows.length * 7) this.#grow();
    const high = hash(key, 0x811c9dc5, 0x01000193);
    const low = (hash(key, 0x9747b28c, 0x5bd1e995) | 1) >>> 0;
    const mask = this.#rows.length - 1;
    for (let slot = (high ^ low) & mask; ; slot = (slot + 1) & mask) {
      if (this.#rows[slot] === 0) {
        this.#high[slot] = high;
        this.#low[slot] = low;
        this.#rows[slot] = row;
        this.#size++;
        return undefined;
      }
      if (this.#high[slot] === high && this.#low[slot] === low) return this.#rows[slot];
    }
  }

  #grow(): void {
    const [high, low, rows] = [this.#high, this.#low, this.#rows];
    const capacity = rows.length * 2;
    this.#high = new Uint32Array(capacity);
    this.#low = new Uint32Array(capacity);
    this.#rows = new Uint32Array(capacity);
    const mask = capacity - 1;
    for (let index = 0; index < rows.length; index++) {
      if (rows[index] === 0) continue;
      let slot = (high[index]! ^ low[index]!) & mask;
      while (this.#rows[slot] !== 0) slot = (slot + 1) & mask;
      this.#high[slot] = high[index]!;
      this.#low[slot] = low[index]!;
      this.#rows[slot] = rows[index]!;
    }
  }
}

function hash(text: string, offset: number, prime: number): number {
  let value = offset >>> 0;
  for (let index = 0; index < text.length; index++) {
    value ^= text.charCodeAt(index);
    value = Math.imul(value, prime) >>> 0;
    value ^= value >>> 13;
  }
  return value >>> 0;
}
