import { Module } from '@nestjs/common';
import { JobsModule } from '../jobs/jobs.module';
import { ResultsModule } from '../results/results.module';
import { DropDirectoryService } from './drop-directory.service';
import { DropFileRepository } from './drop-file.repository';

/**
 * Drop directories (docs/operations.md#drop-directory): an intake front end like REST, so it
 * runs on the nodes that take jobs in (roles api and all).
 */
@Module({
  imports: [JobsModule, ResultsModule],
  providers: [DropFileRepository, DropDirectoryService],
})
export class DropDirectoryModule {}
