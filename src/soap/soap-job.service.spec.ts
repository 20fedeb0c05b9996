import { ApiError } from '../common/api-error';
import { metaFromParameters } from './soap-job.service';

describe('metaFromParameters (SOAP parameters as meta type A)', () => {
  it('keeps names and order; rScript and sweaveFile in any case', () => {
    expect(
      metaFromParameters([
        { name: 'RSCRIPT', value: 'a.R' },
        { name: 'Colour', value: 'blue' },
        { name: 'sweavefile', value: 'r.Rnw' },
      ]),
    ).toEqual({ rScript: 'a.R', Colour: 'blue', sweaveFile: 'r.Rnw' });
  });

  it('a name like __proto__ is just a name', () => {
    const meta = metaFromParameters([{ name: '__proto__', value: 'x' }]);
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
      metaFromParameters(parameters);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect((thrown as ApiError).getStatus()).toBe(400);
    expect((thrown as ApiError).message).toMatch(message);
  });
});
