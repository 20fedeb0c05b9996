import { Test } from '@nestjs/testing';
import { getDataSourceToken } from '@nestjs/typeorm';
import { DatabaseConfig } from '../config/config-slices';
import { PackageRepository } from '../packages/package.repository';
import { R_ENGINE } from '../r-engine/r-engine';
import { EnvironmentRuntime, EnvironmentUnavailable } from './environment-runtime';
import { EnvironmentRepository, type ApplicationEnvironments } from './environment.repository';
import { PackageRepositoryReader } from './package-repositories';

/** An environment as the repository answers it (what the runtime reads of it). */
const asked: ApplicationEnvironments = {
  requested: {
    id: '7',
    applicationName: 'risk',
    lockfile: { rVersion: '4.3.2', repositories: [], packages: [] },
    lockfileSha256: 'a'.repeat(64),
    resolved: [],
    contentsSha256: 'b'.repeat(64),
    createdBy: 'user:admin',
    createdAt: new Date(0),
    builtAt: null,
    buildReport: null,
    buildError: null,
  },
  active: null,
};

async function runtimeWith(
  state: ApplicationEnvironments | null,
  engine: { kind: string; environments: null },
): Promise<EnvironmentRuntime> {
  const module = await Test.createTestingModule({
    providers: [
      EnvironmentRuntime,
      // The boundaries: the database's rows and R, replaced.
      { provide: EnvironmentRepository, useValue: { forJobs: () => Promise.resolve(state) } },
      { provide: PackageRepository, useValue: {} },
      { provide: PackageRepositoryReader, useValue: {} },
      { provide: DatabaseConfig, useValue: { embeddedDatabase: true } },
      { provide: R_ENGINE, useValue: engine },
      { provide: getDataSourceToken(), useValue: {} },
    ],
  }).compile();
  return module.get(EnvironmentRuntime);
}

describe('EnvironmentRuntime', () => {
  it('leaves an application without an environment as it is, on any engine', async () => {
    const runtime = await runtimeWith(null, { kind: 'webr', environments: null });
    await expect(runtime.forJob('risk')).resolves.toBeNull();
  });

  it('refuses the job of an application with an environment on webR, saying why and where it runs', async () => {
    const runtime = await runtimeWith(asked, { kind: 'webr', environments: null });
    const refusal = runtime.forJob('risk');
    await expect(refusal).rejects.toBeInstanceOf(EnvironmentUnavailable);
    await expect(refusal).rejects.toThrow(
      'Application risk has an R environment (its renv.lock), which the webr engine cannot build: its jobs run on native R nodes (docs/environments.md).',
    );
  });
});
