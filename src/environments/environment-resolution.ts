import { createHash } from 'node:crypto';
import { ApiError } from '../common/api-error';
import { PACKAGE_NAME, PACKAGE_VERSION } from '../packages/package-archive';
import {
  MAX_INDEX_BYTES,
  NotInRepository,
  PackageRepositoryReader,
  readPackagesIndex,
  sourcePackagePath,
} from './package-repositories';
import { type Lockfile, type LockedPackage, shown } from './renv-lockfile';

/** Where a resolved package's source comes from. */
export type PackageOrigin = 'repository' | 'archive' | 'upload';

/** One package of an environment, as resolved: which source builds it. */
export interface ResolvedPackage {
  name: string;
  version: string;
  origin: PackageOrigin;
  /** The repository's URL (one of R_REPOSITORIES); null for an uploaded package. */
  repository: string | null;
  /** SHA-256 of the source package: with the version, what the build cache is keyed by. */
  sourceSha256: string;
  requirements: string[];
}

/** An application's uploaded package (/admin/packages), a source of packages like a repository. */
export interface UploadedSource {
  name: string;
  version: string;
  sha256: string;
}

/** What the operator lets environments use: R_REPOSITORIES and the application's uploads. */
export interface AllowedSources {
  repositories: string[];
  uploads: UploadedSource[];
}

const normalized = (url: string): string => url.replace(/\/+$/, '');

/**
 * The repositories a lockfile's package may come from: the one its Repository names when the
 * operator lists it, else every listed repository in R_REPOSITORIES' order. A repository of the
 * lockfile that the operator does not list is refused, naming it: svc never reads a URL or a
 * directory a lockfile chose.
 */
function repositoriesByName(lockfile: Lockfile, allowed: string[]): Map<string, string> {
  const byName = new Map<string, string>();
  for (const repository of lockfile.repositories) {
    const url = normalized(repository.url);
    if (!allowed.includes(url)) {
      throw ApiError.badRequest(
        `renv.lock: R.Repositories ${repository.name} (${shown(repository.url)}) is not a repository this service takes packages from; ` +
          (allowed.length > 0
            ? `name one of R_REPOSITORIES instead (${allowed.join(', ')}), or ask the operator to list it`
            : 'the operator lists none (R_REPOSITORIES); remove it and upload the packages, or ask the operator to list it'),
      );
    }
    byName.set(repository.name, url);
  }
  return byName;
}

/**
 * Resolves every locked package against the allowed sources before anything is built: an
 * upload of the application with that version first, then the repositories (the current
 * version from `src/contrib/`, an earlier one from `src/contrib/Archive/<package>/`). Packages
 * that no source has fail the whole lockfile at once, all of them named (a 400), so nobody
 * waits on a build to learn of the next one.
 */
export async function resolveLockfile(
  lockfile: Lockfile,
  allowed: AllowedSources,
  reader: PackageRepositoryReader,
): Promise<ResolvedPackage[]> {
  const byName = repositoriesByName(lockfile, allowed.repositories);
  const indexes = new Map<string, Promise<Map<string, string>>>();
  const indexOf = (url: string): Promise<Map<string, string>> => {
    let index = indexes.get(url);
    if (index === undefined) {
      index = reader
        .read(url, 'src/contrib/PACKAGES', MAX_INDEX_BYTES)
        .then((bytes) =>
          readPackagesIndex(
            bytes.toString('utf8'),
            (name, version) => PACKAGE_NAME.test(name) && PACKAGE_VERSION.test(version),
          ),
        )
        .catch((error: unknown) => {
          if (error instanceof NotInRepository) {
            return new Map<string, string>();
          }
          throw ApiError.serviceUnavailable(
            `The repository ${url} could not be read: ${(error as Error).message}`,
            30,
          );
        });
      indexes.set(url, index);
    }
    return index;
  };
  const findOne = async (pkg: LockedPackage): Promise<ResolvedPackage | null> => {
    const upload = allowed.uploads.find(
      (candidate) => candidate.name === pkg.name && candidate.version === pkg.version,
    );
    const base = { name: pkg.name, version: pkg.version, requirements: pkg.requirements };
    if (upload) {
      return { ...base, origin: 'upload', repository: null, sourceSha256: upload.sha256 };
    }
    const named = pkg.repository === null ? undefined : byName.get(pkg.repository);
    const candidates = named === undefined ? allowed.repositories : [named];
    for (const url of candidates) {
      const current = (await indexOf(url)).get(pkg.name) === pkg.version;
      if (current || (await reader.has(url, sourcePackagePath(pkg.name, pkg.version, true)))) {
        const path = sourcePackagePath(pkg.name, pkg.version, !current);
        let sourceSha256: string;
        try {
          sourceSha256 = await reader.digest(url, path);
        } catch (error) {
          if (error instanceof NotInRepository) {
            continue;
          }
          throw ApiError.serviceUnavailable(
            `The source package ${url}/${path} could not be read: ${(error as Error).message}`,
            30,
          );
        }
        return {
          ...base,
          origin: current ? 'repository' : 'archive',
          repository: url,
          sourceSha256,
        };
      }
    }
    return null;
  };
  const resolved: ResolvedPackage[] = [];
  const missing: string[] = [];
  for (const pkg of lockfile.packages) {
    const found = await findOne(pkg);
    if (found) {
      resolved.push(found);
    } else {
      missing.push(`${pkg.name} ${pkg.version}`);
    }
  }
  if (missing.length > 0) {
    const where = [
      ...allowed.repositories,
      ...(allowed.uploads.length > 0 ? ["the application's uploaded packages"] : []),
    ];
    throw ApiError.badRequest(
      `renv.lock: ${missing.length} of ${lockfile.packages.length} packages are in none of the sources this service takes packages from (${where.join(', ') || 'none: R_REPOSITORIES is not set and the application has no uploaded packages'}): ${missing.join(', ')}`,
    );
  }
  return resolved;
}

/** The digest of an environment's resolved contents: equal contents, equal digests. */
export function contentsDigest(resolved: ResolvedPackage[]): string {
  const contents = resolved.map((pkg) => [pkg.name, pkg.version, pkg.sourceSha256]);
  return createHash('sha256').update(JSON.stringify(contents)).digest('hex');
}
