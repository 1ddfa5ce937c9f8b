import { describe, expect, it } from 'vitest';
import { charsetOf, chooseFormat, mediaTypeOf, parseAccept } from '../../src/http/negotiate.js';

/** Content negotiation on its own: Accept with q-values (RFC 9110 §12.5.1), Content-Type's parts. */
describe('parseAccept', () => {
  it('reads each range with its quality, specificity and position', () => {
    expect(parseAccept('application/xml;q=0.5, application/*;q=0.1, */*;q=0')).toEqual([
      { type: 'application', subtype: 'xml', q: 0.5, specificity: 2, position: 0 },
      { type: 'application', subtype: '*', q: 0.1, specificity: 1, position: 1 },
      { type: '*', subtype: '*', q: 0, specificity: 0, position: 2 },
    ]);
  });

  it('counts parameters before q as more specific, and lower-cases types', () => {
    expect(parseAccept('Application/JSON;charset=utf-8;q=0.8')).toEqual([
      { type: 'application', subtype: 'json', q: 0.8, specificity: 3, position: 0 },
    ]);
  });

  it.each(['q=1.5', 'q=2', 'q=0.1234', 'q=-1', 'q=abc', 'q=1.001'])(
    'drops a range whose quality is not a qvalue (%s)',
    (q) => {
      expect(parseAccept(`application/xml;${q}, application/json`)).toEqual([
        { type: 'application', subtype: 'json', q: 1, specificity: 2, position: 1 },
      ]);
    },
  );

  it.each(['json', '*/json', 'application/json/extra', 'appli cation/json', ''])(
    'drops a range that is not type/subtype (%j)',
    (range) => {
      expect(parseAccept(range)).toEqual([]);
    },
  );
});

describe('chooseFormat', () => {
  const both = ['json', 'xml'] as const;

  it('JSON when Accept is absent, empty or */*', () => {
    expect(chooseFormat(undefined, both)).toBe('json');
    expect(chooseFormat('', both)).toBe('json');
    expect(chooseFormat('*/*', both)).toBe('json');
  });

  it('the higher quality wins, whatever the order', () => {
    expect(chooseFormat('application/json;q=0.4, application/xml;q=0.9', both)).toBe('xml');
    expect(chooseFormat('text/xml;q=0.2, application/json', both)).toBe('json');
  });

  it('at equal quality, the more specific range, then the first listed', () => {
    expect(chooseFormat('*/*, application/xml', both)).toBe('xml');
    expect(chooseFormat('application/xml, application/json', both)).toBe('xml');
  });

  it('q=0 refuses a format even when a wildcard would allow it', () => {
    expect(chooseFormat('application/json;q=0, */*', both)).toBe('xml');
    expect(chooseFormat('application/json;q=0, application/xml;q=0', both)).toBeUndefined();
  });

  it('the problem media types count only when named outright', () => {
    expect(chooseFormat('application/problem+xml', both)).toBe('xml');
    expect(chooseFormat('application/json;q=0, application/*', both)).toBe('xml');
  });

  it('none of the available formats: undefined (406)', () => {
    expect(chooseFormat('text/html', both)).toBeUndefined();
    expect(chooseFormat('application/xml', ['json'])).toBeUndefined();
  });

  it('a header with no range it can read says nothing: the first format', () => {
    expect(chooseFormat('garbage;;;', both)).toBe('json');
  });
});

describe('Content-Type', () => {
  it('mediaTypeOf: lower-cased, without parameters', () => {
    expect(mediaTypeOf('Application/Merge-Patch+JSON; charset=UTF-8')).toBe('application/merge-patch+json');
    expect(mediaTypeOf(undefined)).toBe('');
  });

  it('charsetOf: lower-cased, quoted or not; undefined without one', () => {
    expect(charsetOf('application/json; charset="UTF-8"')).toBe('utf-8');
    expect(charsetOf('application/xml;charset=iso-8859-1')).toBe('iso-8859-1');
    expect(charsetOf('application/json')).toBeUndefined();
  });
});
