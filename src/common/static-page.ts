import { posix } from 'node:path';
import type { AbstractHttpAdapter } from '@nestjs/core';
import { static as serveStatic } from 'express';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

/**
 * The service's own browser pages (the upload page, the API page): every file comes from the
 * service itself, no inline script or style, no other origin. So a page works offline, and a
 * script injected into it cannot run or send data anywhere else. blob: images and frames are the
 * upload page's result preview, made by the page from the result ZIP it downloaded.
 */
export const PAGE_CONTENT_SECURITY_POLICY =
  "default-src 'self'; img-src 'self' data: blob:; frame-src blob:; frame-ancestors 'none'; " +
  "form-action 'self'";

/** The headers of every page file; Content-Type (with charset for text) comes from its extension. */
const PAGE_HEADERS: Readonly<Record<string, string>> = {
  // Revalidated on every use (ETag, Last-Modified): a new release is seen at once.
  'Cache-Control': 'no-cache',
  'X-Content-Type-Options': 'nosniff',
  'Content-Security-Policy': PAGE_CONTENT_SECURITY_POLICY,
};

/** Files of one directory, served under one URL path. */
export interface PageFiles {
  /** The URL path, without a trailing slash: `/svc`. */
  at: string;
  /** The directory the files come from. */
  dir: string;
  /**
   * The names served (the URL path below `at` → the file in `dir`): only these, so nothing else
   * of a package's directory is. Absent: every file of `dir` (the service's own pages).
   */
  only?: Readonly<Record<string, string>>;
  /**
   * `at/` answers `dir/index.html`. The bare `at` (no slash) answers it too (`page`: its links
   * are absolute), or redirects to `at/` (`slash`: its links are relative to `at/`).
   */
  index?: 'page' | 'slash';
}

function pageFilesHandler(files: PageFiles): RequestHandler {
  const serve = serveStatic(files.dir, {
    index: false,
    redirect: false,
    // Express's default Cache-Control (public, max-age=0) is replaced by PAGE_HEADERS'.
    cacheControl: false,
    setHeaders: (res: Response) => {
      for (const [name, value] of Object.entries(PAGE_HEADERS)) {
        res.setHeader(name, value);
      }
    },
  });
  return (req: Request, res: Response, next: NextFunction): void => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      next();
      return;
    }
    // Mounted with use(): req.path is below `at`, '/' for both `at` and `at/`.
    if (req.path !== '/' && files.only === undefined) {
      serve(req, res, next);
      return;
    }
    let file: string | undefined;
    if (req.path === '/') {
      if (files.index === 'slash' && !req.originalUrl.split('?', 1)[0].endsWith('/')) {
        // Relative, so that it stays right behind a proxy that serves the service under a prefix.
        res.redirect(302, `${posix.basename(files.at)}/`);
        return;
      }
      file = files.index === undefined ? undefined : 'index.html';
    } else if (files.only !== undefined && Object.hasOwn(files.only, req.path.slice(1))) {
      file = files.only[req.path.slice(1)];
    }
    if (file === undefined) {
      next();
      return;
    }
    // express.static reads the file's path from req.url; when it falls through (to the 404
    // answer), the request has its own URL again.
    const url = req.url;
    req.url = `/${file}`;
    serve(req, res, (error?: unknown) => {
      req.url = url;
      next(error);
    });
  };
}

/**
 * Serves the pages' files with express.static, each file under the pages' headers. Called once
 * per module in onModuleInit, as Nest's ServeStaticModule registers its directories: after the
 * controllers' routes (which win) and the request middlewares (request id, access log, metrics,
 * which see these requests too), before the 404 answer. Nothing to do without an HTTP server.
 */
export function servePageFiles(
  httpAdapter: AbstractHttpAdapter | undefined,
  ...mounts: PageFiles[]
): void {
  for (const files of mounts) {
    httpAdapter?.use(files.at, pageFilesHandler(files));
  }
}
