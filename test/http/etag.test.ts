import { describe, expect, it } from 'vitest';
import { entityTag, etagFor, ifMatchAllows, ifNoneMatchHits } from '../../src/http/etag.js';

/** Entity tags and the two conditional headers (RFC 9110 §8.8.3, §13.1.1, §13.1.2). */
describe('entity tags', () => {
  it('one strong tag per version and format', () => {
    expect(etagFor(3, 'json')).toBe('"v3"');
    expect(etagFor(3, 'xml')).toBe('"v3-xml"');
    expect(entityTag('abc', 'json', true)).toBe('W/"abc"');
  });

  it('If-None-Match: weak comparison, lists and *', () => {
    expect(ifNoneMatchHits('"v3"', '"v3"')).toBe(true);
    expect(ifNoneMatchHits('W/"v3"', '"v3"')).toBe(true);
    expect(ifNoneMatchHits('"v1", "v2" , "v3"', '"v3"')).toBe(true);
    expect(ifNoneMatchHits('*', '"v3"')).toBe(true);
    expect(ifNoneMatchHits('"v2"', '"v3"')).toBe(false);
    expect(ifNoneMatchHits('"v3-xml"', '"v3"')).toBe(false);
    expect(ifNoneMatchHits(undefined, '"v3"')).toBe(false);
  });

  it('If-Match: strong comparison; either format of the current version; * and no header allow', () => {
    expect(ifMatchAllows('"v3"', 3)).toBe(true);
    expect(ifMatchAllows('"v3-xml"', 3)).toBe(true);
    expect(ifMatchAllows('"v2", "v3"', 3)).toBe(true);
    expect(ifMatchAllows('*', 3)).toBe(true);
    expect(ifMatchAllows(undefined, 3)).toBe(true);
    expect(ifMatchAllows('W/"v3"', 3)).toBe(false);
    expect(ifMatchAllows('"v2"', 3)).toBe(false);
    expect(ifMatchAllows('v3', 3)).toBe(false);
  });
});
