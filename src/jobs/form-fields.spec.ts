import { HttpStatus } from '@nestjs/common';
import { ApiError } from '../common/api-error';
import {
  applicationNameFromFields,
  isJobFileField,
  metaFromFields,
  plainFileName,
} from './form-fields';

type Fields = Array<[string, string]>;

/** The ApiError a call throws; fails the test when it throws nothing or something else. */
function refusal(run: () => unknown): ApiError {
  try {
    run();
  } catch (error) {
    if (error instanceof ApiError) {
      return error;
    }
    throw error;
  }
  throw new Error('expected the call to be refused');
}

function expect400(run: () => unknown, message: RegExp): void {
  const error = refusal(run);
  expect([error.getStatus(), error.message]).toEqual([
    HttpStatus.BAD_REQUEST,
    expect.stringMatching(message),
  ]);
}

describe('applicationNameFromFields', () => {
  it('finds the field in any case and trims it', () => {
    expect(applicationNameFromFields([['x-svc-APPLICATION-name', ' demo ']])).toBe('demo');
  });

  it.each<[string, Fields, RegExp]>([
    ['missing', [['X-SVC-Meta-a', '1']], /is missing or empty/],
    ['empty', [['X-SVC-Application-Name', '  ']], /is missing or empty/],
    ['invalid', [['X-SVC-Application-Name', 'a-b']], /"a-b" is invalid/],
    ['too long', [['X-SVC-Application-Name', 'a'.repeat(65)]], /longer than 64/],
    [
      'given twice in different cases',
      [
        ['X-SVC-Application-Name', 'demo'],
        ['x-svc-application-name', 'demo'],
      ],
      /given 2 times/,
    ],
  ])('refuses a name %s', (_what, fields, message) => {
    expect400(() => applicationNameFromFields(fields), message);
  });
});

describe('metaFromFields', () => {
  it('reads type A (case kept) and type B fields, ignoring other fields', () => {
    expect(
      metaFromFields([
        ['X-SVC-Application-Name', 'demo'],
        ['x-svc-meta-Colour', 'blue'],
        ['X-SVC-META-#1', 'Size = 3'],
        ['jobSubmitButton', 'Submit job'],
      ]),
    ).toEqual({ Colour: 'blue', Size: '3' });
  });

  it('normalises the well-known names', () => {
    expect(
      metaFromFields([
        ['X-SVC-Meta-RSCRIPT', 'a.R'],
        ['X-SVC-Meta-#x', 'SweaveFile = r.Rnw'],
      ]),
    ).toEqual({ rScript: 'a.R', sweaveFile: 'r.Rnw' });
  });

  it('drops fields left empty, as a form sends its unused inputs', () => {
    expect(
      metaFromFields([
        ['X-SVC-Meta-rScript', ''],
        ['X-SVC-Meta-sweaveFile', '  '],
        ['X-SVC-Meta-#3', ''],
        ['X-SVC-Meta-kept', 'yes'],
      ]),
    ).toEqual({ kept: 'yes' });
  });

  it.each<[string, Fields, RegExp]>([
    ['a type B value without "="', [['X-SVC-Meta-#1', 'oops']], /"name = value"/],
    [
      'a parameter given as type A and type B',
      [
        ['X-SVC-Meta-size', '1'],
        ['X-SVC-Meta-#1', 'size = 2'],
      ],
      /"size" is given more than once/,
    ],
    [
      'the same field twice',
      [
        ['X-SVC-Meta-#1', 'a = 1'],
        ['X-SVC-Meta-#1', 'b = 2'],
      ],
      /given more than once/,
    ],
    ['an empty type B name', [['X-SVC-Meta-#1', ' = 2']], /empty name/],
  ])('refuses %s', (_what, fields, message) => {
    expect400(() => metaFromFields(fields), message);
  });
});

describe('file parts', () => {
  it.each([
    ['X-SVC-JobFile[]', true],
    ['x-svc-jobfile[]', true],
    ['X-SVC-JobFile', true],
    ['X-SVC-JobFiles', false],
    ['file', false],
  ])('%s is a job file field: %s', (field, expected) => {
    expect(isJobFileField(field)).toBe(expected);
  });

  it.each([
    ['data.csv', 'data.csv'],
    ['C:\\fakepath\\data.csv', 'data.csv'],
    ['dir/sub/data.csv', 'data.csv'],
    ['', ''],
  ])('%s has the plain name %s', (original, plain) => {
    expect(plainFileName(original)).toBe(plain);
  });
});
