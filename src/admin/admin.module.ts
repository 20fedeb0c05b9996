import { Module } from '@nestjs/common';
import { CatalogModule } from '../catalog/catalog.module';
import { QueueModule } from '../queue/queue.module';
import { ApplicationsDirectory } from './applications-directory.service';
import { CatalogAdminService } from './catalog-admin.service';

/**
 * The admin API's services: catalog management and the effective configuration (SPEC §8).
 * Its AdminController is declared in ApiModule, which orders the routes.
 */
@Module({
  imports: [CatalogModule, QueueModule],
  providers: [CatalogAdminService, ApplicationsDirectory],
  exports: [CatalogAdminService, ApplicationsDirectory],
})
export class AdminModule {}
