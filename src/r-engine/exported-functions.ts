/**
 * Which functions of an application's R_FUNCTIONS files are endpoints (docs/functions.md): those
 * whose roxygen block (`#'` lines right above `name <- function(...)`) has `@export`, as R
 * packages mark theirs. Read from the files' text, never by running them: a listing costs no R
 * session, and what the listing promises is what the call checks.
 */

export interface ExportedArgument {
  name: string;
  /** Its type from `@param name:type` ({@link ARGUMENT_TYPES}), or null when none is declared. */
  type: ArgumentType | null;
  /** The default as written in the function's signature (R code), or null when it has none. */
  default: string | null;
  /** Its `@param` line, or null. */
  description: string | null;
}

export interface ExportedFunction {
  name: string;
  /** The R_FUNCTIONS file that defines it. */
  file: string;
  title: string | null;
  description: string | null;
  arguments: ExportedArgument[];
  /** Its `@return` (or `@returns`) line, or null. */
  returns: string | null;
  /** The value's type from `@return:type`, or null when none is declared. */
  returnType: ArgumentType | null;
}

/**
 * The types `@param name:type` and `@return:type` may declare (docs/functions.md), each with
 * the spellings it is known by (plumber's and R's among them). `T[]` (or `[T]`) of a scalar T is
 * an array of T; a single T stands for an array of one, since R holds both as a vector.
 */
const TYPE_SPELLINGS: Record<string, readonly string[]> = {
  number: ['number', 'numeric', 'double', 'dbl', 'num'],
  integer: ['integer', 'int'],
  string: ['string', 'character', 'chr', 'str'],
  boolean: ['boolean', 'logical', 'bool', 'lgl'],
  object: ['object'],
  array: ['array', 'list'],
  'data.frame': ['data.frame', 'dataframe', 'df'],
  any: ['any'],
};

export const SCALAR_TYPES = ['number', 'integer', 'string', 'boolean'] as const;
export type ScalarType = (typeof SCALAR_TYPES)[number];
export type ArgumentType =
  ScalarType | `${ScalarType}[]` | 'object' | 'array' | 'data.frame' | 'any';

/** The item type of an array type (`number[]`), or null for another type. */
export function isArrayType(type: ArgumentType): type is `${ScalarType}[]` {
  return type.endsWith('[]');
}

/** The type a declaration names, in its one spelling; null for a word that is no type. */
export function argumentTypeOf(declared: string): ArgumentType | null {
  const word = declared.trim().toLowerCase();
  const inner = /^\[(.+)\]$/.exec(word)?.[1] ?? /^(.+)\[\]$/.exec(word)?.[1];
  const type = Object.keys(TYPE_SPELLINGS).find((name) =>
    TYPE_SPELLINGS[name].includes(inner ?? word),
  );
  if (type === undefined) {
    return null;
  }
  if (inner === undefined) {
    return type as ArgumentType;
  }
  return (SCALAR_TYPES as readonly string[]).includes(type) ? (`${type}[]` as ArgumentType) : null;
}

/** A syntactic R name, the only kind an endpoint may have (the path's last segment). */
export const R_FUNCTION_NAME = /^(?:[A-Za-z]|\.(?![0-9]))[A-Za-z0-9._]*$/;

const DEFINITION = /^([A-Za-z.][A-Za-z0-9._]*)\s*(?:<-|=)\s*function\s*\(/;

interface Roxygen {
  export: boolean;
  title: string | null;
  description: string | null;
  params: Map<string, { type: ArgumentType | null; description: string }>;
  returns: string | null;
  returnType: ArgumentType | null;
}

/** The exported functions of the files, in file and line order; the last definition of a name wins. */
export function exportedFunctions(
  files: ReadonlyArray<{ name: string; content: string }>,
): ExportedFunction[] {
  const found = new Map<string, ExportedFunction>();
  for (const file of files) {
    const text = file.content.replace(/\r\n?/g, '\n');
    const lines = text.split('\n');
    let offset = 0;
    let block: string[] = [];
    for (const line of lines) {
      const lineStart = offset;
      offset += line.length + 1;
      const trimmed = line.trim();
      if (trimmed.startsWith("#'")) {
        block.push(trimmed.slice(2).replace(/^ /, ''));
        continue;
      }
      if (block.length === 0) {
        continue;
      }
      const doc = block;
      block = [];
      const match = DEFINITION.exec(trimmed);
      if (!match) {
        continue;
      }
      const roxygen = readRoxygen(doc);
      if (!roxygen.export) {
        found.delete(match[1]);
        continue;
      }
      const open = lineStart + line.indexOf('(', line.indexOf('function'));
      const formals = readFormals(text, open);
      if (formals === null) {
        continue; // an unfinished signature: R would not source the file either
      }
      found.delete(match[1]);
      found.set(match[1], {
        name: match[1],
        file: file.name,
        title: roxygen.title,
        description: roxygen.description,
        arguments: formals.map(({ name, value }) => ({
          name,
          type: roxygen.params.get(name)?.type ?? null,
          default: value,
          description: roxygen.params.get(name)?.description ?? null,
        })),
        returns: roxygen.returns,
        returnType: roxygen.returnType,
      });
    }
  }
  return [...found.values()];
}

function readRoxygen(lines: string[]): Roxygen {
  const result: Roxygen = {
    export: false,
    title: null,
    description: null,
    params: new Map(),
    returns: null,
    returnType: null,
  };
  const untagged: string[] = [];
  let current: { tag: string; text: string[] } | null = null;
  const close = (): void => {
    if (!current) {
      return;
    }
    const text = current.text.join(' ').replace(/\s+/g, ' ').trim();
    if (current.tag === 'param') {
      // `x`, `x:number`, or several: `x,y:number`, each name with its own type.
      const [names, ...rest] = text.split(' ');
      for (const declared of names.split(',')) {
        const colon = declared.indexOf(':');
        const name = colon === -1 ? declared : declared.slice(0, colon);
        if (name) {
          result.params.set(name, {
            type: colon === -1 ? null : argumentTypeOf(declared.slice(colon + 1)),
            description: rest.join(' '),
          });
        }
      }
    } else if (current.tag === 'return' || current.tag === 'returns') {
      // `@return:type description`: the tag's text then starts with the colon.
      const typed = /^:(\S+)\s*(.*)$/.exec(text);
      result.returnType = typed ? argumentTypeOf(typed[1]) : null;
      result.returns = (typed ? typed[2] : text) || null;
    } else if (current.tag === 'title') {
      result.title = text || null;
    } else if (current.tag === 'description') {
      result.description = text || null;
    }
    current = null;
  };
  for (const line of lines) {
    const tag = /^@(\w+)\s*(.*)$/.exec(line);
    if (tag) {
      close();
      if (tag[1] === 'export') {
        result.export = true;
      } else {
        current = { tag: tag[1], text: [tag[2]] };
      }
    } else if (current) {
      current.text.push(line);
    } else {
      untagged.push(line);
    }
  }
  close();
  // Untagged text: its first paragraph is the title, the rest the description (as roxygen).
  const paragraphs = untagged
    .join('\n')
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s+/g, ' ').trim())
    .filter((p) => p !== '');
  result.title ??= paragraphs[0] ?? null;
  result.description ??= paragraphs.slice(1).join('\n\n') || null;
  return result;
}

/**
 * The formal arguments of the signature whose `(` is at `open`: names and default expressions,
 * split at top-level commas (strings, backquoted names, comments and brackets respected).
 */
function readFormals(
  text: string,
  open: number,
): Array<{ name: string; value: string | null }> | null {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (let i = open + 1; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"' || ch === "'" || ch === '`') {
      let j = i + 1;
      while (j < text.length && text[j] !== ch) {
        j += text[j] === '\\' ? 2 : 1;
      }
      current += text.slice(i, j + 1);
      i = j;
      continue;
    }
    if (ch === '#') {
      const end = text.indexOf('\n', i);
      i = end === -1 ? text.length : end;
      current += ' ';
      continue;
    }
    if (ch === '(' || ch === '[' || ch === '{') {
      depth++;
    }
    if (ch === ')' || ch === ']' || ch === '}') {
      if (depth === 0) {
        if (current.trim() !== '') {
          parts.push(current);
        }
        return parts.map((part) => {
          const eq = topLevelEquals(part);
          const name = (eq === -1 ? part : part.slice(0, eq)).trim().replace(/^`(.*)`$/, '$1');
          const value =
            eq === -1
              ? null
              : part
                  .slice(eq + 1)
                  .replace(/\s+/g, ' ')
                  .trim();
          return { name, value };
        });
      }
      depth--;
    }
    if (ch === ',' && depth === 0) {
      parts.push(current);
      current = '';
      continue;
    }
    current += ch;
  }
  return null;
}

/** The index of the `=` that separates a formal's name from its default, or -1. */
function topLevelEquals(part: string): number {
  const match = /^\s*(`[^`]*`|[A-Za-z.][A-Za-z0-9._]*|\.\.\.)\s*=(?!=)/.exec(part);
  return match ? match[0].length - 1 : -1;
}
