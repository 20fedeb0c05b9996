import { Module } from '@nestjs/common';
import { UploadPageController } from './upload-page.controller';
import { RootRedirectController } from './root-redirect.controller';
import { SignInController } from './sign-in.controller';
import { SignInService } from './sign-in.service';

/**
 * The browser client: the upload page (it posts its forms to /jobs, read by JobsModule) and its
 * sign-in with the identity provider.
 */
@Module({
  controllers: [UploadPageController, RootRedirectController, SignInController],
  providers: [SignInService],
})
export class UploadModule {}
