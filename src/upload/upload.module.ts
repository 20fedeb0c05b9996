import { Module } from '@nestjs/common';
import { UploadPageController } from './upload-page.controller';
import { RootRedirectController } from './root-redirect.controller';

/** The browser client: the upload page (it posts its forms to /jobs, read by JobsModule). */
@Module({
  controllers: [UploadPageController, RootRedirectController],
})
export class UploadModule {}
