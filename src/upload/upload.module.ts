import { dirname, join } from 'node:path';
import { Module, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { servePageFiles } from '../common/static-page';
import { RootRedirectController } from './root-redirect.controller';
import { SignInController } from './sign-in.controller';
import { SignInService } from './sign-in.service';

/**
 * fflate's browser build (the page opens result ZIPs with it for the preview), served from the
 * installed package; its exports name no path to that file, so it is found from package.json.
 */
const FFLATE_UMD_DIR = join(dirname(require.resolve('fflate/package.json')), 'umd');

/**
 * The browser client: the upload page (SPEC §6; it posts its forms to /jobs, read by JobsModule)
 * and its sign-in with the identity provider. The page is plain files served by the service
 * itself (the machine may have no internet), so it works offline and needs no build step;
 * static/ is copied next to the compiled module by the build.
 */
@Module({
  controllers: [RootRedirectController, SignInController],
  providers: [SignInService],
})
export class UploadModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit(): void {
    servePageFiles(
      this.adapterHost.httpAdapter,
      { at: '/svc', dir: join(__dirname, 'static'), index: 'page' },
      { at: '/svc/vendor', dir: FFLATE_UMD_DIR, only: { 'fflate.js': 'index.js' } },
    );
  }
}
