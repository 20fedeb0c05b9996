import { Controller, Get, Redirect } from '@nestjs/common';
import { RawData } from '../common/negotiation.guard';
import { Access } from '../security/access.decorator';

/** The service's root leads a browser to the upload page. */
@Controller()
@Access('public')
export class RootRedirectController {
  // Relative, so that it stays right behind a proxy that serves the service under a prefix.
  @Get()
  @RawData()
  @Redirect('svc/', 302)
  root(): void {}
}
