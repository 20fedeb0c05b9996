import { createHash } from 'node:crypto';
import { ApiError } from '../common/api-error';
import {
  MAX_PACKAGE_NAME_LENGTH,
  PACKAGE_NAME,
  PACKAGE_VERSION,
} from '../packages/package-archive';

/** The largest lockfile taken: renv's lockfile of a project with 2,000 packages is about 600 KiB. */
export const MAX_LOCKFILE_BYTES = 1_048_576;
/** The most packages one lockfile may lock. */
export const MAX_LOCKED_PACKAGES = 2000;
/** The most repositories one lockfile may name. */
export const MAX_LOCKFILE_REPOSITORIES = 32;
/** The most Requirements of one package. */
export const MAX_REQUIREMENTS = 500;
const MAX_VERSION_LENGTH = 64;
const MAX_REPOSITORY_NAME_LENGTH = 64;
const MAX_URL_LENGTH = 2048;

/** The packages that come with R itself: never locked, always there. */
export const BASE_PACKAGES: ReadonlySet<string> = new Set([
  'base',
  'compiler',
  'datasets',
  'graphics',
  'grDevices',
  'grid',
  'methods',
  'parallel',
  'splines',
  'stats',
  'stats4',
  'tcltk',
  'tools',
  'utils',
]);

/** R's recommended packages: installed with R, so a lockfile need not lock them. */
export const RECOMMENDED_PACKAGES: ReadonlySet<string> = new Set([
  'KernSmooth',
  'MASS',
  'Matrix',
  'boot',
  'class',
  'cluster',
  'codetools',
  'foreign',
  'lattice',
  'mgcv',
  'nlme',
  'nnet',
  'rpart',
  'spatial',
  'survival',
]);

/** renv's `Source` values that name a CRAN-like repository; every other source is refused. */
const REPOSITORY_SOURCES = new Set(['Repository', 'CRAN']);

/** One repository a lockfile names (`R.Repositories`). */
export interface LockfileRepository {
  name: string;
  url: string;
}

/** One locked package, as far as svc uses it. */
export interface LockedPackage {
  name: string;
  version: string;
  /** The `Repository` field: a name of `R.Repositories`, or null (any allowed repository). */
  repository: string | null;
  /** renv's hash of the package's DESCRIPTION, kept for the record; null when absent. */
  hash: string | null;
  requirements: string[];
}

/** A lockfile as svc keeps it: the fields it uses, checked; every other field dropped. */
export interface Lockfile {
  /** `R.Version`: the R the lockfile was made with (recorded; the node's R builds). */
  rVersion: string | null;
  repositories: LockfileRepository[];
  /** By name. */
  packages: LockedPackage[];
}

function refuse(message: string): never {
  throw ApiError.badRequest(`renv.lock: ${message}`);
}

/** A value for a message: short, on one line, its control characters escaped. */
export function shown(value: unknown): string {
  const text = typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkName(name: unknown, where: string): string {
  if (
    typeof name !== 'string' ||
    name.length > MAX_PACKAGE_NAME_LENGTH ||
    !PACKAGE_NAME.test(name)
  ) {
    refuse(
      `${where}: ${shown(name)} is not an R package name (letters, digits and dots, at least two characters, starting with a letter and not ending with a dot)`,
    );
  }
  return name;
}

function optionalString(
  entry: Record<string, unknown>,
  field: string,
  where: string,
): string | null {
  const value = entry[field];
  if (value === undefined || value === null) {
    return null;
  }
  if (typeof value !== 'string') {
    refuse(`${where}: ${field} must be a string`);
  }
  return value;
}

function readRepositories(r: Record<string, unknown>): LockfileRepository[] {
  const list = r.Repositories;
  if (list === undefined) {
    return [];
  }
  if (!Array.isArray(list)) {
    refuse('R.Repositories must be a list of {"Name", "URL"}');
  }
  if (list.length > MAX_LOCKFILE_REPOSITORIES) {
    refuse(
      `R.Repositories names ${list.length} repositories; at most ${MAX_LOCKFILE_REPOSITORIES}`,
    );
  }
  const names = new Set<string>();
  return list.map((item: unknown, index): LockfileRepository => {
    const where = `R.Repositories[${index}]`;
    if (!isObject(item) || typeof item.Name !== 'string' || typeof item.URL !== 'string') {
      refuse(`${where} must be {"Name": "...", "URL": "..."}`);
    }
    if (!/^[\w.-]{1,64}$/.test(item.Name) || item.Name.length > MAX_REPOSITORY_NAME_LENGTH) {
      refuse(`${where}: ${shown(item.Name)} is not a repository name (letters, digits, _ . -)`);
    }
    if (names.has(item.Name)) {
      refuse(`${where}: the repository ${item.Name} is named twice`);
    }
    names.add(item.Name);
    if (item.URL.length > MAX_URL_LENGTH || !/^(https?|file):\/\/[^\s]+$/.test(item.URL)) {
      refuse(`${where} (${item.Name}): ${shown(item.URL)} is not an http(s):// or file:// URL`);
    }
    return { name: item.Name, url: item.URL };
  });
}

function readPackage(name: string, entry: unknown, repositoryNames: Set<string>): LockedPackage {
  const where = `Packages.${name}`;
  if (!isObject(entry)) {
    refuse(`${where} must be an object`);
  }
  if (entry.Package !== undefined && entry.Package !== name) {
    refuse(`${where}: its Package field says ${shown(entry.Package)}`);
  }
  if (BASE_PACKAGES.has(name)) {
    refuse(`${where}: ${name} is part of R itself and cannot be locked`);
  }
  const version = entry.Version;
  if (
    typeof version !== 'string' ||
    version.length > MAX_VERSION_LENGTH ||
    !PACKAGE_VERSION.test(version)
  ) {
    refuse(
      `${where}: Version ${shown(version)} is not an R package version (numbers separated by . or -, at least two)`,
    );
  }
  const source = optionalString(entry, 'Source', where);
  if (source !== null && !REPOSITORY_SOURCES.has(source)) {
    refuse(
      `${where}: Source ${shown(source)} is not taken; packages come from the repositories the operator lists (Source "Repository")`,
    );
  }
  const repository = optionalString(entry, 'Repository', where);
  if (repository !== null && !repositoryNames.has(repository)) {
    refuse(`${where}: Repository ${shown(repository)} is not one of R.Repositories' names`);
  }
  const hash = optionalString(entry, 'Hash', where);
  if (hash !== null && !/^[0-9a-f]{32,64}$/.test(hash)) {
    refuse(`${where}: Hash ${shown(hash)} is not a hexadecimal digest`);
  }
  const requirements = entry.Requirements ?? [];
  if (!Array.isArray(requirements)) {
    refuse(`${where}: Requirements must be a list of package names`);
  }
  if (requirements.length > MAX_REQUIREMENTS) {
    refuse(`${where}: ${requirements.length} Requirements; at most ${MAX_REQUIREMENTS}`);
  }
  return {
    name,
    version,
    repository,
    hash,
    requirements: [
      ...new Set(requirements.map((req: unknown) => checkName(req, `${where}.Requirements`))),
    ].sort(),
  };
}

/**
 * Reads an renv.lock as hostile input: its size bounded before it is parsed, every field svc
 * uses checked against R's rules, unknown fields ignored. Every refusal is a 400 whose message
 * names the entry. A lockfile must be complete: each package's Requirements are locked too, or
 * are part of R (base and recommended packages).
 */
export function parseLockfile(bytes: Buffer): Lockfile {
  if (bytes.length > MAX_LOCKFILE_BYTES) {
    throw ApiError.payloadTooLarge(`An renv.lock may have at most ${MAX_LOCKFILE_BYTES} bytes.`);
  }
  let document: unknown;
  try {
    document = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    refuse(`not JSON (${(error as Error).message.slice(0, 120)})`);
  }
  if (!isObject(document)) {
    refuse('must be a JSON object with "R" and "Packages"');
  }
  const r = document.R ?? {};
  if (!isObject(r)) {
    refuse('R must be an object');
  }
  const rVersion = optionalString(r, 'Version', 'R');
  if (rVersion !== null && !/^\d{1,3}\.\d{1,3}(\.\d{1,3})?$/.test(rVersion)) {
    refuse(`R.Version ${shown(rVersion)} is not an R version such as 4.3.2`);
  }
  const repositories = readRepositories(r);
  const packagesField = document.Packages ?? {};
  if (!isObject(packagesField)) {
    refuse('Packages must be an object of packages by name');
  }
  const names = Object.keys(packagesField);
  if (names.length > MAX_LOCKED_PACKAGES) {
    refuse(`Packages locks ${names.length} packages; at most ${MAX_LOCKED_PACKAGES}`);
  }
  const repositoryNames = new Set(repositories.map((repo) => repo.name));
  const packages = names
    .map((name) => readPackage(checkName(name, 'Packages'), packagesField[name], repositoryNames))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const locked = new Set(names);
  for (const pkg of packages) {
    const missing = pkg.requirements.filter(
      (req) => !locked.has(req) && !BASE_PACKAGES.has(req) && !RECOMMENDED_PACKAGES.has(req),
    );
    if (missing.length > 0) {
      refuse(
        `Packages.${pkg.name} requires ${missing.join(', ')}, which the lockfile does not lock (a lockfile is complete: every requirement locked, or part of R)`,
      );
    }
  }
  return { rVersion, repositories, packages };
}

/** A digest of what svc keeps of a lockfile: equal lockfiles, equal digests. */
export function lockfileDigest(lockfile: Lockfile): string {
  return createHash('sha256').update(JSON.stringify(lockfile)).digest('hex');
}
