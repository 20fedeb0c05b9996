import { fromDomainPassed, parseAuthenticationResults } from './authentication-results';

describe('Authentication-Results', () => {
  it('takes a header apart: comments dropped, methods and results in lower case', () => {
    expect(
      parseAuthenticationResults(
        ' mx.example.com 1; spf=pass (sender IP is 192.0.2.1) smtp.mailfrom=example.com;\r\n' +
          '\tDKIM = Pass header.d=Example.com header.b="ab;cd"; dmarc=fail (p=reject) header.from=example.com',
      ),
    ).toEqual({
      authservId: 'mx.example.com',
      results: [
        { method: 'spf', result: 'pass', properties: { 'smtp.mailfrom': 'example.com' } },
        {
          method: 'dkim',
          result: 'pass',
          properties: { 'header.d': 'Example.com', 'header.b': 'ab;cd' },
        },
        { method: 'dmarc', result: 'fail', properties: { 'header.from': 'example.com' } },
      ],
    });
    expect(parseAuthenticationResults('mx.example.com; none')).toEqual({
      authservId: 'mx.example.com',
      results: [],
    });
    expect(parseAuthenticationResults('  ; spf=pass')).toBeNull();
  });

  it('passes a DMARC pass, or a DKIM pass of the From domain itself, from the named server', () => {
    const pass = (values: string[]) => fromDomainPassed(values, 'mx.example.com', 'example.com');
    expect(pass(['mx.example.com; dmarc=pass header.from=example.com'])).toBe(true);
    expect(pass(['MX.example.com; dkim=pass header.d=EXAMPLE.com'])).toBe(true);
    expect(pass(['mx.example.com; dkim=pass header.i=@example.com'])).toBe(true);
    expect(
      fromDomainPassed(
        ['mx.example.com; dmarc=pass header.from=xn--mnchen-3ya.example'],
        'mx.example.com',
        'münchen.example',
      ),
    ).toBe(true);
  });

  it('refuses what is not a pass of the From domain by the named server', () => {
    const pass = (values: string[]) => fromDomainPassed(values, 'mx.example.com', 'example.com');
    expect(pass([])).toBe(false);
    // SPF vouches for the envelope sender, not for the From.
    expect(pass(['mx.example.com; spf=pass smtp.mailfrom=example.com'])).toBe(false);
    expect(pass(['mx.example.com; dkim=pass header.d=elsewhere.org'])).toBe(false);
    expect(pass(['mx.example.com; dkim=pass header.d=sub.example.com'])).toBe(false);
    expect(pass(['mx.example.com; dmarc=pass header.from=elsewhere.org'])).toBe(false);
    expect(pass(['mx.example.com; dmarc=fail header.from=example.com'])).toBe(false);
    expect(pass(['mx.elsewhere.org; dmarc=pass header.from=example.com'])).toBe(false);
    // A pass hidden in a comment, or the id in a comment.
    expect(pass(['mx.example.com; dmarc=fail (dmarc=pass) header.from=example.com'])).toBe(false);
    expect(pass(['(mx.example.com) mx.elsewhere.org; dmarc=pass header.from=example.com'])).toBe(
      false,
    );
  });

  it("trusts only the topmost header of the server's id: a lower one came with the message", () => {
    expect(
      fromDomainPassed(
        [
          'mx.example.com; dmarc=fail header.from=example.com',
          'mx.example.com; dmarc=pass header.from=example.com',
        ],
        'mx.example.com',
        'example.com',
      ),
    ).toBe(false);
  });
});
