import { ValidationPipe } from '@nestjs/common';
import { registerDecorator, ValidationError } from 'class-validator';
import { ApiError } from './api-error';

/**
 * What is wrong with a value, in the words a client reads in the 400's message; undefined when
 * nothing is. `object` is the object that holds the value (the DTO being checked).
 */
export type Problem = (value: unknown, object: Record<string, unknown>) => string | undefined;

/** The property under which a class's checks of the whole object are kept (never a JSON field). */
const WHOLE_OBJECT = '(whole object)';

function register(target: object, propertyName: string, problem: Problem): void {
  registerDecorator({
    name: 'problem',
    target: target as new () => unknown,
    propertyName,
    validator: {
      validate: (value, args) =>
        problem(value, args!.object as Record<string, unknown>) === undefined,
      defaultMessage: (args) => problem(args!.value, args!.object as Record<string, unknown>) ?? '',
    },
  });
}

/**
 * A property's check with a message of its own (several steps in one function keep their order:
 * class-validator runs a property's decorators bottom-up, which reads badly for more than one).
 */
export function Satisfies(problem: Problem): PropertyDecorator {
  return (prototype, propertyName) =>
    register(prototype.constructor, String(propertyName), problem);
}

/** A check of the object as a whole (e.g. its unknown fields): it comes before its fields' checks. */
export function WholeSatisfies(problem: (object: Record<string, unknown>) => string | undefined) {
  return (target: abstract new (...args: never[]) => unknown): void =>
    register(target, WHOLE_OBJECT, (_value, object) => problem(object));
}

export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The first of the object's fields that `known` does not name, as unknown fields are reported. */
export function unknownFields(object: Record<string, unknown>, known: Iterable<string>): string[] {
  const names = new Set(known);
  return Object.keys(object).filter((key) => !names.has(key));
}

const JSON_OBJECT_MESSAGE = Symbol('jsonObjectMessage');

/**
 * A DTO read from a JSON body: the body must be a JSON object, else a 400 with `message` (checked
 * by `@JsonBody()` before the DTO: an array, null or a number has no fields to check).
 */
export function JsonObject(message: string) {
  return (target: abstract new (...args: never[]) => unknown): void =>
    Reflect.defineMetadata(JSON_OBJECT_MESSAGE, message, target);
}

/** The message of a DTO's `@JsonObject`, if it has one. */
export function jsonObjectMessageOf(metatype: unknown): string | undefined {
  return typeof metatype === 'function'
    ? (Reflect.getMetadata(JSON_OBJECT_MESSAGE, metatype) as string | undefined)
    : undefined;
}

/** Names `ValidationPipe` deletes at any depth: on an object checked as a class they would hide it. */
const DELETED_NAMES = new Set(['__proto__', 'prototype', 'constructor']);
/**
 * Deeper than any DTO's body; `ValidationPipe` and class-transformer walk a body recursively and
 * overflow the stack (a 500) from about 10,000 levels, which a 20 KB body reaches.
 */
const MAX_DEPTH = 32;

/**
 * What `ValidationPipe` cannot be given, as a 400's message: a body nested deeper than MAX_DEPTH,
 * or a field of a name it would delete (such a field is refused, never dropped without a word: a
 * meta parameter or a setting of that name). Walked without recursion, in document order.
 */
export function unvalidatableProblem(body: unknown): string | undefined {
  const pending: Array<{ value: unknown; path: string; depth: number }> = [
    { value: body, path: '', depth: 0 },
  ];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, path, depth } = next;
    if (typeof value !== 'object' || value === null) {
      continue;
    }
    if (depth > MAX_DEPTH) {
      return `The body nests objects and lists deeper than ${MAX_DEPTH} levels.`;
    }
    const entries = Object.entries(value);
    for (const [key] of entries) {
      if (DELETED_NAMES.has(key)) {
        return `${path === '' ? 'The body' : path} has a field named "${key}", which no field may be named.`;
      }
    }
    for (const [key, item] of entries.reverse()) {
      const inner = Array.isArray(value) ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`;
      pending.push({ value: item, path: inner, depth: depth + 1 });
    }
  }
  return undefined;
}

/**
 * The first problem, in the order of the checks: an object's whole-object checks, then its fields
 * in the order the class declares them, a nested object's problems where that field stands.
 */
export function firstProblem(errors: ValidationError[]): string {
  const first = errors.find((error) => error.property === WHOLE_OBJECT) ?? errors[0];
  if (first === undefined) {
    return 'The body is not valid.';
  }
  const messages = Object.values(first.constraints ?? {});
  return messages.length > 0 ? messages[0] : firstProblem(first.children ?? []);
}

/**
 * Checks a JSON body against its DTO class: one 400 at a time, the first problem's message (as
 * SPEC §4's error, like every other 400), not class-validator's list of all of them. Not global
 * (APP_PIPE): with custom decorators validated it would build every class-typed parameter anew,
 * and `new AbortSignal()` of `@ClientGone()` throws; `@JsonBody()` applies it to bodies only.
 */
export const DTO_VALIDATION = new ValidationPipe({
  validateCustomDecorators: true,
  stopAtFirstError: true,
  transform: true,
  exceptionFactory: (errors) => ApiError.badRequest(firstProblem(errors)),
});
