import { join } from 'node:path';
import { Module, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { servePageFiles } from '../common/static-page';

/**
 * The operator console (docs/console.md): plain files served by the service itself under the
 * pages' Content-Security-Policy, no build step; the page reads the admin API
 * (/svc/api/rest/admin/…) with the browser's credentials. static/ is copied next to the compiled
 * module by the build. The result preview and fflate come from the upload page's files.
 */
@Module({})
export class ConsoleModule implements OnModuleInit {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  onModuleInit(): void {
    servePageFiles(this.adapterHost.httpAdapter, {
      at: '/svc/console',
      dir: join(__dirname, 'static'),
      index: 'slash',
    });
  }
}
