import { Module } from '@nestjs/common';
import { CatalogChanges } from './catalog-changes';
import { CatalogService } from './catalog.service';
import { KnownApplications } from './known-applications';

@Module({
  providers: [CatalogService, CatalogChanges, KnownApplications],
  exports: [CatalogService, CatalogChanges, KnownApplications],
})
export class CatalogModule {}
