import { Controller, Get, Res } from '@nestjs/common';
import type { Response } from 'express';
import { RawData } from '../common/negotiation.guard';
import { Access } from '../security/access.decorator';

/** The service's root leads a browser to the upload page. */
@Controller()
@Access('public')
export class RootRedirectController {
  @Get()
  @RawData()
  root(@Res() res: Response): void {
    // Relative, so that it stays right behind a proxy that serves the service under a prefix.
    res.redirect(302, 'svc/');
  }
}
