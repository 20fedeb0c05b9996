import { Module } from '@nestjs/common';
import { CatalogModule } from '../catalog/catalog.module';
import { PackageRepository } from './package.repository';
import { PackagesService } from './packages.service';

/**
 * R packages managed through the admin API (PUT/GET/DELETE /admin/packages). Its controller is
 * declared in ApiModule; worker nodes install with PackageSyncService (WorkerModule).
 */
@Module({
  imports: [CatalogModule],
  providers: [PackageRepository, PackagesService],
  exports: [PackageRepository, PackagesService],
})
export class PackagesModule {}
