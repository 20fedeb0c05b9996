import { Module } from '@nestjs/common';
import { CatalogService } from './catalog.service';
import { KnownApplications } from './known-applications';

@Module({
  providers: [CatalogService, KnownApplications],
  exports: [CatalogService, KnownApplications],
})
export class CatalogModule {}
