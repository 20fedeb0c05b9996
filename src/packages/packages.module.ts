import { Module } from '@nestjs/common';
import { PackageRepository } from './package.repository';
import { PackagesService } from './packages.service';

/**
 * R packages managed through the admin API (PUT/GET/DELETE /admin/packages). Its controller is
 * declared in ApiModule; worker nodes install with PackageSyncService (WorkerModule).
 */
@Module({
  providers: [PackageRepository, PackagesService],
  exports: [PackageRepository, PackagesService],
})
export class PackagesModule {}
