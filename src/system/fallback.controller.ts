import { All, Controller, Req } from '@nestjs/common';
import type { Request } from 'express';
import { Access } from '../security/access.decorator';
import { ApiError } from '../common/api-error';

/** Unknown REST paths: a 404 with the error body rather than Express's HTML page. */
@Controller('svc/api/rest')
@Access('public')
export class FallbackController {
  @All('*path')
  unknown(@Req() req: Request): never {
    throw ApiError.notFound(`No resource at ${req.method} ${req.path}.`);
  }
}
