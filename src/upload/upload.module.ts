import { Module } from '@nestjs/common';
import { JobsModule } from '../jobs/jobs.module';
import { FormJobService } from './form-job.service';
import { UploadPageController } from './upload-page.controller';
import { RootRedirectController } from './root-redirect.controller';

/** The browser client: multipart form submissions and the upload page that sends them. */
@Module({
  imports: [JobsModule],
  controllers: [UploadPageController, RootRedirectController],
  providers: [FormJobService],
  exports: [FormJobService],
})
export class UploadModule {}
