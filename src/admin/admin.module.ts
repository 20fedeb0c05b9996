import { Module } from '@nestjs/common';
import { CatalogModule } from '../catalog/catalog.module';
import { CatalogAdminService } from './catalog-admin.service';

/**
 * The admin API's services: catalog management and the effective configuration (SPEC §8).
 * Its AdminController is declared in ApiModule, which orders the routes.
 */
@Module({
  imports: [CatalogModule],
  providers: [CatalogAdminService],
  exports: [CatalogAdminService],
})
export class AdminModule {}
