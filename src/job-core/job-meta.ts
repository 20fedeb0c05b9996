import { Pair, parseLines, stringify } from 'dot-properties';
import { ApiError } from '../common/api-error';
import { rStringProblem } from '../common/r-values';
import { CONFIGURATION_FILE, WELL_KNOWN_META, type JobMeta } from './job-input';

/** Prefix of meta headers and form fields, compared case-insensitively. */
const META_PREFIX = 'x-svc-meta-';
/** Marks a type B meta parameter (`X-SVC-Meta-#<anything>: name = value`). */
const TYPE_B_MARK = '#';

// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

interface MetaSource {
  /** What the client calls the carrier, for messages: "header" or "form field". */
  what: string;
  /** HTTP header names carry no case, so type A names from headers are lower-cased. */
  lowerCaseTypeA: boolean;
}

const HEADERS: MetaSource = { what: 'header', lowerCaseTypeA: true };
const FORM_FIELDS: MetaSource = { what: 'form field', lowerCaseTypeA: false };

/** `rScript` and `sweaveFile` whatever their case; every other name as given. */
export function normaliseMetaName(name: string): string {
  const lower = name.toLowerCase();
  return WELL_KNOWN_META.find((known) => known.toLowerCase() === lower) ?? name;
}

/**
 * Collects parameters in order, refusing a name given twice. A Map, not an object, so that
 * names like `__proto__` or `constructor` are just names.
 */
class MetaCollector {
  private readonly params = new Map<string, string>();

  add(rawName: string, value: string, where: string): void {
    if (rawName.length === 0) {
      throw ApiError.badRequest(`meta parameter with an empty name in ${where}`);
    }
    if (CONTROL_CHARACTERS.test(rawName)) {
      throw ApiError.badRequest(
        `meta parameter name ${JSON.stringify(rawName)} in ${where} contains control characters`,
      );
    }
    // The job's R code reads names and values (configuration.txt): none it cannot hold.
    const nameProblem = rStringProblem(rawName);
    if (nameProblem !== null) {
      throw ApiError.badRequest(
        `meta parameter name ${JSON.stringify(rawName)} in ${where} ${nameProblem}`,
      );
    }
    const name = normaliseMetaName(rawName);
    const valueProblem = rStringProblem(value);
    if (valueProblem !== null) {
      throw ApiError.badRequest(
        `the value of meta parameter "${name}" in ${where} ${valueProblem}`,
      );
    }
    if (this.params.has(name)) {
      throw ApiError.badRequest(`meta parameter "${name}" is given more than once (in ${where})`);
    }
    this.params.set(name, value);
  }

  toMeta(): JobMeta {
    // fromEntries defines own properties, so even `__proto__` stays a plain key.
    return Object.fromEntries(this.params);
  }
}

function parseMeta(pairs: Array<[name: string, value: string]>, source: MetaSource): JobMeta {
  const collector = new MetaCollector();
  const carriers = new Set<string>();
  for (const [carrier, value] of pairs) {
    if (!carrier.toLowerCase().startsWith(META_PREFIX)) {
      continue;
    }
    const where = `${source.what} "${carrier}"`;
    // Header names carry no case, so `X-A` and `x-a` are the same header; field names do.
    const carrierKey = source.lowerCaseTypeA ? carrier.toLowerCase() : carrier;
    if (carriers.has(carrierKey)) {
      throw ApiError.badRequest(`meta ${source.what} "${carrier}" is given more than once`);
    }
    carriers.add(carrierKey);

    const suffix = carrier.slice(META_PREFIX.length);
    if (suffix.startsWith(TYPE_B_MARK)) {
      const eq = value.indexOf('=');
      if (eq < 0) {
        throw ApiError.badRequest(
          `meta ${source.what} "${carrier}" must have the form "name = value"`,
        );
      }
      collector.add(value.slice(0, eq).trim(), value.slice(eq + 1).trim(), where);
    } else {
      collector.add(source.lowerCaseTypeA ? suffix.toLowerCase() : suffix, value, where);
    }
  }
  return collector.toMeta();
}

/**
 * Job meta parameters from HTTP headers (SPEC §3.1), given as raw pairs (`req.rawHeaders`) so
 * that a repeated header is seen. Only `X-SVC-Meta-*` headers are considered. Throws a 400
 * ApiError for an empty name, a type B value without `=`, a parameter given twice or a meta
 * header repeated.
 */
export function parseMetaHeaders(headers: Array<[name: string, value: string]>): JobMeta {
  return parseMeta(headers, HEADERS);
}

/** Job meta parameters from form fields: as {@link parseMetaHeaders}, but type A names keep their case. */
export function parseMetaFields(fields: Array<[name: string, value: string]>): JobMeta {
  return parseMeta(fields, FORM_FIELDS);
}

/**
 * Job meta parameters from SOAP parameter elements: each element is one type A parameter, its
 * name as given (a blank name counts as empty), under the same rules as headers and fields.
 */
export function parseMetaParameters(parameters: Array<{ name: string; value: string }>): JobMeta {
  const collector = new MetaCollector();
  for (const { name, value } of parameters) {
    collector.add(name.trim() === '' ? '' : name, value, `the parameter element "${name}"`);
  }
  return collector.toMeta();
}

/** The text of a configuration file: UTF-8 if it is valid UTF-8, else ISO-8859-1 (Java's default). */
function decodeConfigurationText(content: Buffer): string {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(content);
  } catch {
    text = content.toString('latin1');
  }
  return text.startsWith('\uFEFF') ? text.slice(1) : text;
}

/** A `\u` escape not followed by four hex digits, which Java's Properties.load refuses. */
function hasMalformedUnicodeEscape(raw: string): boolean {
  for (const match of raw.matchAll(/\\([\s\S]?)/g)) {
    if (match[1] === 'u' && !/^[0-9a-fA-F]{4}/.test(raw.slice(match.index + 2))) {
      return true;
    }
  }
  return false;
}

/**
 * Meta parameters from a job's `configuration.txt` (Java properties; names keep their case
 * except the well-known ones). Throws a 400 ApiError for binary content, a malformed `\u`
 * escape, an empty name or a name given twice.
 */
export function parseConfigurationFile(content: Buffer): JobMeta {
  const text = decodeConfigurationText(content);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000e-\u001f\u007f]/.test(text)) {
    throw ApiError.badRequest(`${CONFIGURATION_FILE} is not a text file`);
  }
  const where = CONFIGURATION_FILE;
  const collector = new MetaCollector();
  for (const node of parseLines(text, true)) {
    if (!(node instanceof Pair)) {
      continue;
    }
    // A pair's range is [keyStart, keyEnd, valueStart, valueEnd] in the decoded text.
    if (hasMalformedUnicodeEscape(text.slice(node.range[0], node.range[3]))) {
      throw ApiError.badRequest(
        `${CONFIGURATION_FILE} is not a valid Java properties file: malformed \\uXXXX escape ` +
          `in the entry for ${JSON.stringify(node.key)}`,
      );
    }
    collector.add(node.key, node.value, where);
  }
  return collector.toMeta();
}

/** The meta of a job: `configuration.txt` overlaid by the request's meta (the request wins). */
export function mergeMeta(fromConfigurationFile: JobMeta, fromRequest: JobMeta): JobMeta {
  const merged = new Map(Object.entries(fromConfigurationFile));
  for (const [name, value] of Object.entries(fromRequest)) {
    merged.set(name, value);
  }
  return Object.fromEntries(merged);
}

/**
 * The `configuration.txt` written into a job's working directory. Written as Java's
 * Properties.store(OutputStream) does: pure ASCII, every other character as `\uXXXX`, so a
 * reader gets the same text whether it assumes ISO-8859-1 or UTF-8. Lines are not folded.
 */
export function renderConfigurationFile(meta: JobMeta): Buffer {
  const lines = Object.entries(meta).map(([name, value]) => [name, value]);
  const text = stringify(lines, { lineWidth: null }).replace(
    /[\u0080-\uffff]/g,
    (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return Buffer.from(lines.length > 0 ? `${text}\n` : '', 'ascii');
}
