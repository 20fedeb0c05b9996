import { HttpStatus } from '@nestjs/common';
import { ApiError } from './api-error';
import { isFormPost } from './form-post';
import { errorFormat, negotiateFormat, negotiateJsonFormat, rememberFormat } from './negotiation';

const FORM = 'multipart/form-data; boundary=----x';

function req(method: string, contentType?: string, accept?: string) {
  const headers: Record<string, string> = {};
  if (contentType !== undefined) {
    headers['content-type'] = contentType;
  }
  if (accept !== undefined) {
    headers.accept = accept;
  }
  return { method, headers };
}

describe('isFormPost', () => {
  it.each([
    ['POST', FORM, true],
    ['POST', 'Multipart/Form-Data;boundary=x', true],
    ['POST', 'multipart/form-data', true],
    ['GET', FORM, false],
    ['POST', 'multipart/mixed; boundary=x', false],
    ['POST', 'application/x-www-form-urlencoded', false],
    ['POST', 'application/zip', false],
    ['POST', undefined, false],
  ])('%s %s -> %s', (method, contentType, expected) => {
    expect(isFormPost(req(method, contentType))).toBe(expected);
  });
});

describe('negotiateFormat', () => {
  describe('for API requests', () => {
    it.each([
      [undefined, 'application/vnd.svc+xml'],
      ['*/*', 'application/vnd.svc+xml'],
      ['application/vnd.svc+json', 'application/vnd.svc+json'],
      ['application/json', 'application/json'],
      ['application/vnd.svc+xml;q=0.5, application/vnd.svc+json', 'application/vnd.svc+json'],
    ])('Accept %s -> %s', (accept, mediaType) => {
      expect(negotiateFormat(req('POST', 'application/zip', accept)).mediaType).toBe(mediaType);
    });

    it('gives vnd+json the mapped shape and application/json the plain one', () => {
      expect(negotiateFormat(req('GET', undefined, 'application/vnd.svc+json')).format).toBe(
        'mapped-json',
      );
      expect(negotiateFormat(req('GET', undefined, 'application/json')).format).toBe('json');
    });

    it('refuses with 406 when nothing acceptable is asked for', () => {
      expect(() => negotiateFormat(req('GET', undefined, 'text/html'))).toThrow(ApiError);
      try {
        negotiateFormat(req('GET', undefined, 'text/html'));
      } catch (error) {
        expect((error as ApiError).getStatus()).toBe(HttpStatus.NOT_ACCEPTABLE);
      }
    });
  });

  describe('for form posts: plain types with the seed’s micro-format, never 406', () => {
    it.each([
      [undefined, 'xml', 'application/xml'],
      ['', 'xml', 'application/xml'],
      ['*/*', 'xml', 'application/xml'],
      ['text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'xml', 'application/xml'],
      ['text/html', 'xml', 'application/xml'],
      ['image/png', 'xml', 'application/xml'],
      // The seed's browser contract: application/json is the jobToken element, mapped.
      ['application/json', 'mapped-json', 'application/json'],
      ['application/vnd.svc+json', 'mapped-json', 'application/json'],
      ['application/vnd.svc+xml', 'xml', 'application/xml'],
      ['application/xml;q=0.4, application/json;q=0.8', 'mapped-json', 'application/json'],
    ])('Accept %s -> %s as %s', (accept, format, mediaType) => {
      expect(negotiateFormat(req('POST', FORM, accept))).toEqual({ format, mediaType });
    });

    it('answers errors in the same plain types', () => {
      expect(errorFormat(req('POST', FORM, 'text/html'))).toEqual({
        format: 'xml',
        mediaType: 'application/xml',
      });
      expect(errorFormat(req('POST', FORM, 'application/json'))).toEqual({
        format: 'mapped-json',
        mediaType: 'application/json',
      });
    });
  });
});

describe('negotiateJsonFormat (routes that speak JSON only)', () => {
  it.each([
    [undefined, 'json', 'application/json'],
    ['*/*', 'json', 'application/json'],
    ['application/*', 'json', 'application/json'],
    ['text/html', 'json', 'application/json'],
    ['application/json', 'json', 'application/json'],
    ['application/vnd.svc+json', 'mapped-json', 'application/vnd.svc+json'],
    ['application/vnd.svc+xml', 'xml', 'application/vnd.svc+xml'],
  ])('Accept %s -> %s as %s', (accept, format, mediaType) => {
    expect(negotiateJsonFormat(req('POST', 'application/json', accept))).toEqual({
      format,
      mediaType,
    });
  });

  it('is what errors are answered in once a route settled it', () => {
    const request = req('POST', 'application/json', '*/*');
    rememberFormat(request as never, negotiateJsonFormat(request));
    expect(errorFormat(request).format).toBe('json');
    expect(errorFormat(req('POST', 'application/json', '*/*')).format).toBe('xml');
  });
});
