import type { ResolvedPackage } from './environment-resolution';
import type { StoredEnvironment } from './environment.repository';
import type { EnvironmentBuildReport } from './r-environment.entity';

/** Which environments of an application are asked for and in force (ids; null: none). */
export interface EnvironmentPointers {
  requestedId: string | null;
  activeId: string | null;
}

/** An environment as the admin API and the command line show it. */
export interface EnvironmentView {
  id: string;
  application: string;
  /** True for the one the application asks for now. */
  requested: boolean;
  /** True for the one its jobs run in now (the requested one once built). */
  inForce: boolean;
  contentsSha256: string;
  lockfileSha256: string;
  /** The R version the lockfile was made with (R.Version), as recorded. */
  lockfileRVersion: string | null;
  createdBy: string;
  createdTime: string;
  packages: ResolvedPackage[];
  /** When a worker first built it; null: not yet. */
  builtTime: string | null;
  /** What its last build did: per package, built or taken from the cache. */
  build: EnvironmentBuildReport | null;
  /** Why its build failed (the package, the end of its log); null otherwise. */
  buildError: string | null;
}

export function environmentView(
  environment: StoredEnvironment,
  pointers: EnvironmentPointers,
): EnvironmentView {
  return {
    id: environment.id,
    application: environment.applicationName,
    requested: environment.id === pointers.requestedId,
    inForce: environment.id === pointers.activeId,
    contentsSha256: environment.contentsSha256,
    lockfileSha256: environment.lockfileSha256,
    lockfileRVersion: environment.lockfile.rVersion,
    createdBy: environment.createdBy,
    createdTime: environment.createdAt.toISOString(),
    packages: environment.resolved,
    builtTime: environment.builtAt?.toISOString() ?? null,
    build: environment.buildReport,
    buildError: environment.buildError,
  };
}
