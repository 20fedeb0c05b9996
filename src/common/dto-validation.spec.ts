import { Type } from 'class-transformer';
import { IsOptional, ValidateNested } from 'class-validator';
import { ApiError } from './api-error';
import {
  DTO_VALIDATION,
  isJsonObject,
  JsonObject,
  jsonObjectMessageOf,
  Satisfies,
  unknownFields,
  unvalidatableProblem,
  WholeSatisfies,
} from './dto-validation';

const wordOf =
  (field: string) =>
  (value: unknown): string | undefined =>
    typeof value === 'string' ? undefined : `${field} must be a word.`;

@WholeSatisfies((inner) =>
  unknownFields(inner, ['a', 'b']).length > 0 ? 'inner has unknown fields.' : undefined,
)
class InnerDto {
  @Satisfies(wordOf('inner.a'))
  a!: string;

  @Satisfies(wordOf('inner.b'))
  b!: string;
}

@JsonObject('The body must be a JSON object.')
@WholeSatisfies((body) =>
  unknownFields(body, ['first', 'inner', 'last']).length > 0 ? 'Unknown fields.' : undefined,
)
class OuterDto {
  @Satisfies((value) => {
    if (typeof value !== 'string') {
      return 'first is required.';
    }
    return value.length > 3 ? 'first has at most 3 characters.' : undefined;
  })
  first!: string;

  @Satisfies((value) => (isJsonObject(value) ? undefined : 'inner must be an object.'))
  @ValidateNested()
  @Type(() => InnerDto)
  inner!: InnerDto;

  @IsOptional()
  @Satisfies(wordOf('last'))
  last?: string;
}

/** The message of the 400 a body gets, or the DTO it becomes. */
async function check(body: unknown): Promise<string | OuterDto> {
  try {
    return (await DTO_VALIDATION.transform(body, {
      type: 'custom',
      metatype: OuterDto,
    })) as OuterDto;
  } catch (error) {
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).getStatus()).toBe(400);
    return (error as ApiError).message;
  }
}

describe('DTO_VALIDATION', () => {
  const valid = { first: 'abc', inner: { a: 'x', b: 'y' } };

  it('gives the DTO, an instance of its class with its nested classes', async () => {
    const dto = await check(valid);
    expect(dto).toBeInstanceOf(OuterDto);
    expect((dto as OuterDto).inner).toBeInstanceOf(InnerDto);
    expect(dto).toMatchObject(valid);
  });

  it('answers one problem: the whole object before its fields, fields in declaration order', async () => {
    expect(await check({ ...valid, extra: 1, first: 7, last: 7 })).toBe('Unknown fields.');
    expect(await check({ ...valid, first: 7, last: 7 })).toBe('first is required.');
    expect(await check({ ...valid, first: 'abcd', last: 7 })).toBe(
      'first has at most 3 characters.',
    );
    expect(await check({ ...valid, last: 7 })).toBe('last must be a word.');
  });

  it("answers a nested object's problem where its field stands, its own whole-object check first", async () => {
    expect(await check({ ...valid, inner: 'x', last: 7 })).toBe('inner must be an object.');
    expect(await check({ ...valid, inner: [], last: 7 })).toBe('inner must be an object.');
    expect(await check({ ...valid, inner: { a: 1, b: 2, c: 3 }, last: 7 })).toBe(
      'inner has unknown fields.',
    );
    expect(await check({ ...valid, inner: { a: 1, b: 2 }, last: 7 })).toBe(
      'inner.a must be a word.',
    );
    expect(await check({ ...valid, inner: { a: 'x', b: 2 }, last: 7 })).toBe(
      'inner.b must be a word.',
    );
  });

  it('keeps the message a DTO gives for a body that is not an object, for @JsonBody()', () => {
    expect(jsonObjectMessageOf(OuterDto)).toBe('The body must be a JSON object.');
    expect(jsonObjectMessageOf(InnerDto)).toBeUndefined();
    expect(jsonObjectMessageOf(Object)).toBeUndefined();
  });
});

describe('unvalidatableProblem', () => {
  /** `{"a": [[…]]}` with `depth` lists. */
  const nested = (depth: number): unknown =>
    JSON.parse(`{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`) as unknown;

  it('passes a body of ordinary depth and names', () => {
    expect(unvalidatableProblem({ a: [{ b: 'x' }], c: { d: [1, 2] } })).toBeUndefined();
    expect(unvalidatableProblem(nested(32))).toBeUndefined();
  });

  it('refuses a body nested deeper than the validation can walk, however deep', () => {
    const message = 'The body nests objects and lists deeper than 32 levels.';
    expect(unvalidatableProblem(nested(33))).toBe(message);
    expect(unvalidatableProblem(nested(200_000))).toBe(message);
  });

  it('names where a field has a name the validation would delete', () => {
    expect(unvalidatableProblem(JSON.parse('{"principal": "p", "__proto__": {}}'))).toBe(
      'The body has a field named "__proto__", which no field may be named.',
    );
    expect(unvalidatableProblem({ job: { meta: { region: 'north', constructor: 'x' } } })).toBe(
      'job.meta has a field named "constructor", which no field may be named.',
    );
    expect(unvalidatableProblem({ email: { to: ['a@example.com', { prototype: 1 }] } })).toBe(
      'email.to[1] has a field named "prototype", which no field may be named.',
    );
  });
});
