import type { ResolvedPackage } from './environment-resolution';
import type { StoredEnvironment } from './environment.repository';

/** An environment as the admin API and the command line show it. */
export interface EnvironmentView {
  id: string;
  application: string;
  /** True for the one the application asks for now. */
  requested: boolean;
  contentsSha256: string;
  lockfileSha256: string;
  /** The R version the lockfile was made with (R.Version), as recorded. */
  lockfileRVersion: string | null;
  createdBy: string;
  createdTime: string;
  packages: ResolvedPackage[];
}

export function environmentView(
  environment: StoredEnvironment,
  requestedId: string | null,
): EnvironmentView {
  return {
    id: environment.id,
    application: environment.applicationName,
    requested: environment.id === requestedId,
    contentsSha256: environment.contentsSha256,
    lockfileSha256: environment.lockfileSha256,
    lockfileRVersion: environment.lockfile.rVersion,
    createdBy: environment.createdBy,
    createdTime: environment.createdAt.toISOString(),
    packages: environment.resolved,
  };
}
