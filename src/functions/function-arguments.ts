import { ApiError } from '../common/api-error';
import { rStringProblem } from '../common/r-values';
import {
  ArgumentType,
  ExportedFunction,
  isArrayType,
  ScalarType,
} from '../r-engine/exported-functions';

/** The arguments of a call as the body sent them: its JSON text and that text parsed. */
export interface CallArguments {
  json: string;
  values: Record<string, unknown>;
}

/**
 * Checks a call's arguments against what the function's signature and roxygen block already say,
 * before R runs and before a call is queued (docs/functions.md): every argument without a default
 * given, no name the function does not take (unless it takes `...`), each declared type met, and
 * no value R cannot hold. One 400 names every problem.
 */
export function checkArguments(fn: ExportedFunction, args: CallArguments): void {
  const problems = [...signatureProblems(fn, args.values), ...lossyValueProblems(args)];
  if (problems.length > 0) {
    throw ApiError.badRequest(`${fn.name}: ${problems.join('; ')}.`);
  }
}

function signatureProblems(fn: ExportedFunction, values: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const formals = new Map(fn.arguments.map((a) => [a.name, a]));
  const dots = formals.has('...');
  for (const argument of fn.arguments) {
    if (
      argument.name !== '...' &&
      argument.default === null &&
      !Object.hasOwn(values, argument.name)
    ) {
      problems.push(`argument "${argument.name}" is missing (it has no default)`);
    }
  }
  for (const [name, value] of Object.entries(values)) {
    const formal = formals.get(name);
    if (formal === undefined || name === '...') {
      if (!dots || name === '...') {
        problems.push(`argument ${JSON.stringify(name.slice(0, 100))} is not one ${fn.name} takes`);
      }
      continue;
    }
    if (formal.type !== null && !hasType(value, formal.type)) {
      problems.push(`argument "${name}" must be ${typeNoun(formal.type)}, not ${describe(value)}`);
    }
  }
  return problems;
}

function isScalar(value: unknown, type: ScalarType): boolean {
  switch (type) {
    case 'number':
      return typeof value === 'number';
    case 'integer':
      return Number.isInteger(value);
    case 'string':
      return typeof value === 'string';
    case 'boolean':
      return typeof value === 'boolean';
  }
}

function isObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function hasType(value: unknown, type: ArgumentType): boolean {
  if (isArrayType(type)) {
    const item = type.slice(0, -2) as ScalarType;
    return (
      isScalar(value, item) ||
      (Array.isArray(value) && value.every((v) => v === null || isScalar(v, item)))
    );
  }
  switch (type) {
    case 'any':
      return true;
    case 'object':
      return isObject(value);
    case 'array':
      return Array.isArray(value);
    case 'data.frame':
      return Array.isArray(value) && value.every(isObject);
    case 'number':
    case 'integer':
    case 'string':
    case 'boolean':
      return isScalar(value, type);
  }
}

const TYPE_NOUNS: Record<string, string> = {
  number: 'a number',
  integer: 'an integer (a number with no fraction)',
  string: 'a string',
  boolean: 'a boolean',
  object: 'an object',
  array: 'an array',
  'data.frame': 'a data.frame (an array of objects)',
  any: 'anything',
};

function typeNoun(type: ArgumentType): string {
  if (type.endsWith('[]')) {
    const item = type.slice(0, -2);
    return `a ${type} (${item === 'integer' ? 'an integer' : `a ${item}`} or an array of them, null for NA)`;
  }
  return TYPE_NOUNS[type];
}

/** What a JSON value is, in a few words, never echoing it. */
function describe(value: unknown): string {
  if (value === null) {
    return 'null';
  }
  if (Array.isArray(value)) {
    const items = value as unknown[];
    const odd = items.find(
      (v) => v !== null && (typeof v === 'object' || typeof v !== typeof items[0]),
    );
    return odd === undefined ? 'an array' : `an array holding ${describe(odd)}`;
  }
  if (typeof value === 'number') {
    return Number.isInteger(value) ? 'a number' : 'a number with a fraction';
  }
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** A JSON number as the text writes it. */
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
/**
 * Only a literal of 16 digits or more, or with an exponent of three digits, can leave a double's
 * range or precision: a body with none of either is not scanned.
 */
const MAYBE_LOSSY_NUMBER = /\d{16}|[eE][+-]?\d{3}/;
/** A NUL or a surrogate can only be written as a `\u` escape in JSON that is UTF-8 text. */
const MAYBE_BAD_STRING = /\\u(?:0000|[dD][89a-fA-F])/;

/**
 * Values R would not receive as sent: a string or a name with a NUL or an unpaired surrogate
 * (cut or refused by R), a number beyond a double's range (Inf) or a non-zero one below it (0),
 * and an integer a double cannot hold exactly (rounded). Each named by its argument.
 */
function lossyValueProblems({ json, values }: CallArguments): string[] {
  const problems = new Set<string>();
  if (MAYBE_BAD_STRING.test(json)) {
    for (const [name, value] of Object.entries(values)) {
      const nameProblem = rStringProblem(name);
      if (nameProblem !== null) {
        problems.add(`the name of argument ${JSON.stringify(name.slice(0, 100))} ${nameProblem}`);
        continue;
      }
      const problem = stringProblemIn(value);
      if (problem !== null) {
        problems.add(`argument "${name}" ${problem}`);
      }
    }
  }
  if (MAYBE_LOSSY_NUMBER.test(json)) {
    for (const { argument, literal } of numberLiterals(json)) {
      const problem = numberProblem(literal);
      if (problem !== null) {
        problems.add(`argument ${JSON.stringify(argument.slice(0, 100))} ${problem}`);
      }
    }
  }
  return [...problems];
}

/** The first string or name inside a JSON value that R cannot hold, as a problem; or null. */
function stringProblemIn(value: unknown): string | null {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') {
      const problem = rStringProblem(item);
      if (problem !== null) {
        return problem;
      }
    } else if (Array.isArray(item)) {
      pending.push(...(item as unknown[]));
    } else if (typeof item === 'object' && item !== null) {
      for (const [key, child] of Object.entries(item)) {
        const problem = rStringProblem(key);
        if (problem !== null) {
          return `has a name that ${problem}`;
        }
        pending.push(child);
      }
    }
  }
  return null;
}

function numberProblem(literal: string): string | null {
  const value = Number(literal);
  const shown = literal.length > 40 ? `${literal.slice(0, 40)}…` : literal;
  if (!Number.isFinite(value)) {
    return `holds a number beyond the range of R's numbers (doubles): ${shown}`;
  }
  if (value === 0 && /[1-9]/.test(literal.split(/[eE]/)[0])) {
    return `holds a non-zero number beyond the precision of R's numbers (doubles), which would be 0: ${shown}`;
  }
  if (
    /^-?\d+$/.test(literal) &&
    !Number.isSafeInteger(value) &&
    BigInt(literal) !== BigInt(value)
  ) {
    return `holds the integer ${shown}, which R's numbers (doubles) cannot hold exactly; send it as a string`;
  }
  return null;
}

/**
 * The number literals of a JSON object's text (already parsed, so well-formed), each with the
 * top-level name it is under.
 */
function* numberLiterals(json: string): Generator<{ argument: string; literal: string }> {
  let depth = 0;
  let argument = '';
  let expectName = false;
  for (let i = 0; i < json.length;) {
    const ch = json[i];
    if (ch === '"') {
      let end = i + 1;
      while (json[end] !== '"') {
        end += json[end] === '\\' ? 2 : 1;
      }
      if (depth === 1 && expectName) {
        argument = JSON.parse(json.slice(i, end + 1)) as string;
        expectName = false;
      }
      i = end + 1;
    } else if (ch === '{' || ch === '[') {
      depth++;
      expectName = depth === 1;
      i++;
    } else if (ch === '}' || ch === ']') {
      depth--;
      i++;
    } else if (ch === ',') {
      expectName = depth === 1;
      i++;
    } else if (ch === '-' || (ch >= '0' && ch <= '9')) {
      NUMBER.lastIndex = i;
      const literal = NUMBER.exec(json)?.[0] ?? ch;
      yield { argument, literal };
      i += literal.length;
    } else {
      i++;
    }
  }
}
