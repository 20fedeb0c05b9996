import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Controller, Get, Res } from '@nestjs/common';
import type { Response } from 'express';
import { RawData } from '../common/negotiation.guard';
import { loadStaticFile, sendStaticFile, StaticFile } from '../common/static-page';
import { Access } from '../security/access.decorator';

/** The page's files, copied next to the compiled controller by the build. */
const STATIC_DIR = join(__dirname, 'static');

function load(name: string, type: string): StaticFile {
  return loadStaticFile(join(STATIC_DIR, name), type);
}

/**
 * fflate's browser build (the page opens result ZIPs with it for the preview), served from the
 * installed package; its exports name no path to that file, so it is found from package.json.
 */
function loadFflate(): StaticFile {
  const root = dirname(require.resolve('fflate/package.json'));
  return {
    type: 'text/javascript; charset=utf-8',
    body: readFileSync(join(root, 'umd', 'index.js')),
  };
}

/**
 * The upload page (SPEC §6): plain files served by the service itself (the machine may have no
 * internet), so the page works offline and needs no build step. Accept does not apply.
 */
@Controller('svc')
@Access('public')
export class UploadPageController {
  private readonly page = load('index.html', 'text/html; charset=utf-8');
  private readonly script = load('app.js', 'text/javascript; charset=utf-8');
  private readonly style = load('app.css', 'text/css; charset=utf-8');
  private readonly fflate = loadFflate();

  @Get(['', 'index.html'])
  @RawData()
  index(@Res() res: Response): void {
    sendStaticFile(res, this.page);
  }

  @Get('app.js')
  @RawData()
  appScript(@Res() res: Response): void {
    sendStaticFile(res, this.script);
  }

  @Get('app.css')
  @RawData()
  appStyle(@Res() res: Response): void {
    sendStaticFile(res, this.style);
  }

  @Get('vendor/fflate.js')
  @RawData()
  fflateScript(@Res() res: Response): void {
    sendStaticFile(res, this.fflate);
  }
}
