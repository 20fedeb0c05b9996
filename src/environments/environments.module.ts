import { Module } from '@nestjs/common';
import { PackagesModule } from '../packages/packages.module';
import { EnvironmentRepository } from './environment.repository';
import { EnvironmentsService } from './environments.service';
import { PackageRepositoryReader } from './package-repositories';

/**
 * Applications' R environments from their lockfiles (docs/environments.md). Its controller is
 * declared in ApiModule.
 */
@Module({
  imports: [PackagesModule],
  providers: [EnvironmentRepository, EnvironmentsService, PackageRepositoryReader],
  exports: [EnvironmentsService, EnvironmentRepository, PackageRepositoryReader, PackagesModule],
})
export class EnvironmentsModule {}
