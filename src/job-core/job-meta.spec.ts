import { HttpStatus } from '@nestjs/common';
import { parse } from 'dot-properties';
import { ApiError } from '../common/api-error';
import {
  mergeMeta,
  normaliseMetaName,
  parseConfigurationFile,
  parseMetaFields,
  parseMetaHeaders,
  parseMetaParameters,
  renderConfigurationFile,
} from './job-meta';

type Pairs = Array<[string, string]>;

function expect400(run: () => unknown, message: RegExp): void {
  let caught: unknown;
  try {
    run();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ApiError);
  expect((caught as ApiError).getStatus()).toBe(HttpStatus.BAD_REQUEST);
  expect((caught as ApiError).message).toMatch(message);
}

describe('normaliseMetaName', () => {
  it.each([
    ['rscript', 'rScript'],
    ['RSCRIPT', 'rScript'],
    ['rScript', 'rScript'],
    ['sweavefile', 'sweaveFile'],
    ['SweaveFile', 'sweaveFile'],
    ['alpha', 'alpha'],
    ['Alpha', 'Alpha'],
    ['rScripts', 'rScripts'],
  ])('%s -> %s', (name, expected) => {
    expect(normaliseMetaName(name)).toBe(expected);
  });
});

describe('parseMetaHeaders', () => {
  it('returns nothing without meta headers, ignoring other headers', () => {
    expect(
      parseMetaHeaders([
        ['Host', 'localhost'],
        ['X-SVC-Application-Name', 'demo'],
        ['X-SVC-Metadata', 'not meta'],
        ['Content-Type', 'application/zip'],
      ]),
    ).toEqual({});
  });

  it('reads type A headers, lower-casing names and keeping values as given', () => {
    expect(
      parseMetaHeaders([
        ['X-SVC-Meta-Alpha', 'One Two'],
        ['x-svc-meta-BETA', ' spaced = value '],
        ['X-Svc-Meta-gamma.delta', ''],
      ]),
    ).toEqual({ alpha: 'One Two', beta: ' spaced = value ', 'gamma.delta': '' });
  });

  it('reads type B headers, trimming around the first "=" and keeping the name case', () => {
    expect(
      parseMetaHeaders([
        ['X-SVC-Meta-#1', 'MyParam = some value'],
        ['X-SVC-Meta-#two', 'expr=a=b'],
        ['x-svc-meta-#', 'empty ='],
        ['X-SVC-Meta-#tight', 'k=v'],
      ]),
    ).toEqual({ MyParam: 'some value', expr: 'a=b', empty: '', k: 'v' });
  });

  it('normalises the well-known names from either type', () => {
    expect(
      parseMetaHeaders([
        ['X-SVC-Meta-RScript', 'analysis.R'],
        ['X-SVC-Meta-#1', 'SWEAVEFILE = report.Rnw'],
      ]),
    ).toEqual({ rScript: 'analysis.R', sweaveFile: 'report.Rnw' });
  });

  it('keeps the order given', () => {
    const meta = parseMetaHeaders([
      ['X-SVC-Meta-zeta', '1'],
      ['X-SVC-Meta-#a', 'alpha = 2'],
      ['X-SVC-Meta-mu', '3'],
    ]);
    expect(Object.keys(meta)).toEqual(['zeta', 'alpha', 'mu']);
  });

  it('treats a type B name differing only in case from a type A one as another parameter', () => {
    expect(
      parseMetaHeaders([
        ['X-SVC-Meta-foo', '1'],
        ['X-SVC-Meta-#1', 'Foo = 2'],
      ]),
    ).toEqual({ foo: '1', Foo: '2' });
  });

  it('keeps names that are also Object.prototype members as plain parameters', () => {
    const meta = parseMetaHeaders([
      ['X-SVC-Meta-constructor', 'a'],
      ['X-SVC-Meta-#1', '__proto__ = b'],
      ['X-SVC-Meta-toString', 'c'],
    ]);
    expect(Object.keys(meta)).toEqual(['constructor', '__proto__', 'tostring']);
    expect(Object.getPrototypeOf(meta)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(meta, '__proto__')?.value).toBe('b');
  });

  describe('refuses with 400', () => {
    it.each<[string, Pairs, RegExp]>([
      ['an empty type A name', [['X-SVC-Meta-', 'v']], /empty name/],
      ['an empty type B name', [['X-SVC-Meta-#1', ' = v']], /empty name/],
      ['a type B value without "="', [['X-SVC-Meta-#1', 'no equals sign']], /"name = value"/],
      ['an empty type B value', [['X-SVC-Meta-#1', '']], /"name = value"/],
      [
        'the same parameter twice',
        [
          ['X-SVC-Meta-#1', 'alpha = 1'],
          ['X-SVC-Meta-#2', 'alpha = 2'],
        ],
        /"alpha" is given more than once/,
      ],
      [
        'the same parameter twice after lower-casing',
        [
          ['X-SVC-Meta-Alpha', '1'],
          ['X-SVC-Meta-#2', 'alpha = 2'],
        ],
        /"alpha" is given more than once/,
      ],
      [
        'a well-known parameter twice after normalisation',
        [
          ['X-SVC-Meta-rscript', 'a.R'],
          ['X-SVC-Meta-#1', 'RSCRIPT = a.R'],
        ],
        /"rScript" is given more than once/,
      ],
      [
        'a meta header repeated',
        [
          ['X-SVC-Meta-alpha', '1'],
          ['X-SVC-Meta-alpha', '2'],
        ],
        /header "X-SVC-Meta-alpha" is given more than once/,
      ],
      [
        'a meta header repeated in another case',
        [
          ['X-SVC-Meta-#1', 'a = 1'],
          ['x-svc-meta-#1', 'b = 2'],
        ],
        /is given more than once/,
      ],
      ['a type B name with control characters', [['X-SVC-Meta-#1', 'a\u0001b = 1']], /control/],
    ])('%s', (_what, headers, message) => {
      expect400(() => parseMetaHeaders(headers), message);
    });
  });
});

describe('parseMetaFields', () => {
  it('keeps the case of type A names', () => {
    expect(
      parseMetaFields([
        ['X-SVC-Meta-MyParam', 'v'],
        ['x-svc-meta-other', 'w'],
        ['applicationName', 'demo'],
      ]),
    ).toEqual({ MyParam: 'v', other: 'w' });
  });

  it('normalises well-known names and reads type B fields', () => {
    expect(
      parseMetaFields([
        ['X-SVC-Meta-RSCRIPT', 'a.R'],
        ['X-SVC-Meta-#x', 'Threshold = 0.5'],
      ]),
    ).toEqual({ rScript: 'a.R', Threshold: '0.5' });
  });

  it('allows names differing only in case (they are different parameters)', () => {
    expect(
      parseMetaFields([
        ['X-SVC-Meta-Param', '1'],
        ['X-SVC-Meta-param', '2'],
      ]),
    ).toEqual({ Param: '1', param: '2' });
  });

  it('keeps multi-line values (a textarea) as given', () => {
    expect(parseMetaFields([['X-SVC-Meta-notes', 'line 1\r\nline 2']])).toEqual({
      notes: 'line 1\r\nline 2',
    });
  });

  it.each<[string, Pairs, RegExp]>([
    ['an empty name', [['X-SVC-Meta-', 'v']], /empty name in form field "X-SVC-Meta-"/],
    ['a type B value without "="', [['X-SVC-Meta-#1', 'x']], /form field "X-SVC-Meta-#1"/],
    [
      'a field repeated',
      [
        ['X-SVC-Meta-a', '1'],
        ['X-SVC-Meta-a', '2'],
      ],
      /form field "X-SVC-Meta-a" is given more than once/,
    ],
    [
      'a parameter twice',
      [
        ['X-SVC-Meta-sweaveFile', 'a'],
        ['X-SVC-Meta-#1', 'SweaveFile = b'],
      ],
      /"sweaveFile" is given more than once/,
    ],
    ['a name with control characters', [['X-SVC-Meta-a\nb', '1']], /control characters/],
  ])('refuses %s with 400', (_what, fields, message) => {
    expect400(() => parseMetaFields(fields), message);
  });
});

describe('parseConfigurationFile', () => {
  const parseText = (text: string) => parseConfigurationFile(Buffer.from(text, 'utf8'));

  it('reads Java properties: separators, comments, continuations, escapes', () => {
    const text = [
      '# a comment',
      '! another comment',
      '',
      'alpha = 1',
      'beta:2',
      'gamma 3',
      '  delta   =   spaced value  ',
      'multi = first \\',
      '        second',
      'key\\ with\\ spaces = yes',
      'escaped = tab\\there\\nnewline \\u00e9',
      'path = C:\\\\data\\\\x.csv',
      'empty =',
      'bare',
    ].join('\n');
    expect(parseText(text)).toEqual({
      alpha: '1',
      beta: '2',
      gamma: '3',
      delta: 'spaced value  ',
      multi: 'first second',
      'key with spaces': 'yes',
      escaped: 'tab\there\nnewline é',
      path: 'C:\\data\\x.csv',
      empty: '',
      bare: '',
    });
  });

  it('keeps name case except for the well-known names', () => {
    expect(parseText('RSCRIPT = a.R\nsweavefile=r.Rnw\nMyParam = x\n')).toEqual({
      rScript: 'a.R',
      sweaveFile: 'r.Rnw',
      MyParam: 'x',
    });
  });

  it('accepts CRLF line ends, a UTF-8 BOM and an empty file', () => {
    expect(parseText('\uFEFFa = 1\r\nb = 2\r\n')).toEqual({ a: '1', b: '2' });
    expect(parseConfigurationFile(Buffer.alloc(0))).toEqual({});
    expect(parseText('# only a comment\n')).toEqual({});
  });

  it('reads UTF-8, and ISO-8859-1 when the bytes are not UTF-8', () => {
    expect(parseText('city = Zürich')).toEqual({ city: 'Zürich' });
    expect(parseConfigurationFile(Buffer.from('city = Zürich', 'latin1'))).toEqual({
      city: 'Zürich',
    });
  });

  it.each([
    ['binary content', Buffer.from([0x61, 0x3d, 0x00, 0x01, 0x02]), /not a text file/],
    ['a malformed \\u escape', Buffer.from('a = \\u00zz\n'), /malformed \\uXXXX escape.*"a"/],
    ['a malformed \\u escape in a name', Buffer.from('a\\u12 = 1\n'), /malformed/],
    ['a truncated \\u escape', Buffer.from('a = \\u12'), /malformed/],
    ['an empty name', Buffer.from('= value\n'), /empty name.*configuration\.txt/],
    ['a name twice', Buffer.from('a = 1\na = 2\n'), /"a" is given more than once/],
    ['a well-known name twice', Buffer.from('rscript = a\nRScript = b\n'), /"rScript"/],
  ])('refuses %s with 400', (_what, content, message) => {
    expect400(() => parseConfigurationFile(content), message);
  });

  it('does not mistake an escaped backslash before "u" for a \\u escape', () => {
    expect(parseText('a = \\\\uzz\n')).toEqual({ a: '\\uzz' });
  });

  it('ignores \\u lookalikes in comments', () => {
    expect(parseText('# see \\uZZZZ\na = 1\n')).toEqual({ a: '1' });
  });
});

describe('mergeMeta', () => {
  it('lets the request win and keeps everything else', () => {
    expect(
      mergeMeta({ rScript: 'file.R', a: '1', b: '2' }, { rScript: 'header.R', c: '3' }),
    ).toEqual({ rScript: 'header.R', a: '1', b: '2', c: '3' });
  });

  it('keeps configuration order first, then new request parameters', () => {
    expect(Object.keys(mergeMeta({ x: '1', y: '2' }, { z: '3', x: '4' }))).toEqual(['x', 'y', 'z']);
  });

  it('handles empty sides and does not modify its inputs', () => {
    const file = { a: '1' };
    const request = { a: '2' };
    expect(mergeMeta({}, {})).toEqual({});
    expect(mergeMeta(file, {})).toEqual({ a: '1' });
    expect(mergeMeta({}, request)).toEqual({ a: '2' });
    mergeMeta(file, request);
    expect(file).toEqual({ a: '1' });
    expect(request).toEqual({ a: '2' });
  });
});

describe('renderConfigurationFile', () => {
  it('writes one "name = value" line per parameter, in order', () => {
    const text = renderConfigurationFile({ rScript: 'a.R', alpha: '1', empty: '' }).toString();
    expect(text).toBe('rScript = a.R\nalpha = 1\nempty = \n');
  });

  it('writes nothing for no parameters', () => {
    expect(renderConfigurationFile({}).length).toBe(0);
  });

  it('writes pure ASCII, escaping other characters as \\uXXXX like Java', () => {
    const out = renderConfigurationFile({ city: 'Zürich', currency: '€', emoji: '😀' });
    expect([...out].every((byte) => byte < 0x80)).toBe(true);
    expect(out.toString()).toBe(
      'city = Z\\u00fcrich\ncurrency = \\u20ac\nemoji = \\ud83d\\ude00\n',
    );
  });

  it('does not fold long values', () => {
    const long = 'x '.repeat(200);
    const text = renderConfigurationFile({ long }).toString();
    expect(text.split('\n')).toHaveLength(2);
  });

  it('round-trips awkward names and values through parseConfigurationFile', () => {
    const meta = {
      rScript: 'analysis.R',
      'key with spaces': ' leading and trailing ',
      'a=b:c': 'x = y : z',
      '#notAComment': '!bang',
      multi: 'line 1\nline 2\r\n\tindented',
      backslash: 'C:\\data\\x.csv',
      unicode: 'Zürich € 😀',
      control: 'bell\u0007',
      empty: '',
    };
    expect(parseConfigurationFile(renderConfigurationFile(meta))).toEqual(meta);
  });

  it('is readable by a plain Java properties parser', () => {
    const meta = { a: 'ü', b: 'x=y' };
    expect(parse(renderConfigurationFile(meta).toString('latin1'))).toEqual(meta);
  });

  it('round-trips request meta merged with a configuration file', () => {
    const fromFile = parseConfigurationFile(Buffer.from('rscript = file.R\nkeep = me\n'));
    const fromRequest = parseMetaHeaders([['X-SVC-Meta-RScript', 'header.R']]);
    const merged = mergeMeta(fromFile, fromRequest);
    expect(parseConfigurationFile(renderConfigurationFile(merged))).toEqual({
      rScript: 'header.R',
      keep: 'me',
    });
  });
});

describe('parseMetaParameters (SOAP parameters as meta type A)', () => {
  it('keeps names and order; rScript and sweaveFile in any case', () => {
    expect(
      parseMetaParameters([
        { name: 'RSCRIPT', value: 'a.R' },
        { name: 'Colour', value: 'blue' },
        { name: 'sweavefile', value: 'r.Rnw' },
      ]),
    ).toEqual({ rScript: 'a.R', Colour: 'blue', sweaveFile: 'r.Rnw' });
  });

  it('a name like __proto__ is just a name', () => {
    const meta = parseMetaParameters([{ name: '__proto__', value: 'x' }]);
    expect(Object.keys(meta)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(meta)).toBe(Object.prototype);
  });

  it.each([
    [[{ name: ' ', value: 'x' }], /empty name/],
    [[{ name: 'a\nb', value: 'x' }], /control characters/],
    [
      [
        { name: 'rScript', value: 'a' },
        { name: 'rscript', value: 'b' },
      ],
      /"rScript" is given more than once/,
    ],
  ])('refuses %j with a 400', (parameters, message) => {
    let thrown: unknown;
    try {
      parseMetaParameters(parameters);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect((thrown as ApiError).getStatus()).toBe(400);
    expect((thrown as ApiError).message).toMatch(message);
  });
});
