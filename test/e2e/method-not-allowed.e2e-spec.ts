import 'reflect-metadata';
import {
  All,
  Controller,
  Delete,
  Get,
  HttpCode,
  INestApplication,
  Module,
  Param,
  Post,
  RequestMethod,
} from '@nestjs/common';
import { METHOD_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { APP_FILTER, NestFactory } from '@nestjs/core';
import { ApiModule } from '../../src/api.module';
import { ApiError } from '../../src/common/api-error';
import { ApiExceptionFilter } from '../../src/common/api-exception.filter';
import { ADMIN_ENV } from '../support/admin-auth';
import { Answer, parseXml, REST, request } from '../support/rest-client';
import { startTestService, TestService } from '../support/test-service';
import { controllersOf } from '../support/api-controllers';

/** The methods the walk tries on every path, in `Allow` order. */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

function expect405(answer: Answer, method: string, path: string, allow: string): void {
  expect({ method, path, status: answer.status, allow: answer.headers.get('allow') }).toEqual({
    method,
    path,
    status: 405,
    allow,
  });
  if (method !== 'HEAD') {
    const message = `${method} is not allowed on ${path}; allowed: ${allow}.`;
    // The exported functions and the R environments (controllers of JSON routes) speak JSON,
    // their 405s too; the rest keeps the seed's XML default.
    if (path.startsWith(`${REST}/functions/`) || path.startsWith(`${REST}/admin/environment`)) {
      expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(JSON.parse(answer.text)).toEqual({
        status: 405,
        error: 'Method Not Allowed',
        message,
      });
      return;
    }
    const { error } = parseXml(answer.text);
    expect(error).toEqual({ status: '405', error: 'Method Not Allowed', message });
  }
}

// Routes as a feature would add them: none answers other methods by hand.
@Controller('reports')
class ReportsController {
  @Get(':id')
  one(@Param('id') id: string): string {
    if (id === 'missing') {
      throw ApiError.notFound(`No report ${id}.`);
    }
    return `report ${id}`;
  }
}

@Controller('rest/jobs')
class JobsLikeController {
  @Get(':app/:jobId')
  status(): string {
    return 'status';
  }

  @Delete(':app/:jobId')
  @HttpCode(204)
  cancel(): void {}

  @Get(':app/:jobId/log')
  log(): string {
    return 'log';
  }
}

@Controller('shared')
class SharedReadController {
  @Get()
  read(): string {
    return 'read';
  }
}

@Controller('shared')
class SharedWriteController {
  @Post()
  write(): string {
    return 'written';
  }
}

/** A route for every method answers them itself (as the SOAP endpoint does). */
@Controller('own')
class OwnAnswerController {
  @Get()
  read(): string {
    return 'read';
  }

  @All()
  @HttpCode(418)
  other(): string {
    return 'mine';
  }
}

/** Like the REST catch-all: registered last, a 404 for every method on every path below it. */
@Controller('rest')
class CatchAllController {
  @All('*path')
  unknown(): never {
    throw ApiError.notFound('No resource.');
  }
}

@Module({
  controllers: [
    ReportsController,
    JobsLikeController,
    SharedReadController,
    SharedWriteController,
    OwnAnswerController,
    CatchAllController,
  ],
  providers: [{ provide: APP_FILTER, useClass: ApiExceptionFilter }],
})
class RoutesModule {}

describe('405 from the registered routes, with no handler written for it', () => {
  let app: INestApplication;
  let base = '';
  const call = (method: string, path: string): Promise<Answer> =>
    request(`${base}${path}`, { method });

  beforeAll(async () => {
    app = await NestFactory.create(RoutesModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
  });
  afterAll(async () => {
    await app.close();
  });

  it('a route added with only GET answers POST with 405 and Allow: GET, HEAD', async () => {
    expect405(await call('POST', '/reports/7'), 'POST', '/reports/7', 'GET, HEAD');
    expect405(await call('DELETE', '/reports/7'), 'DELETE', '/reports/7', 'GET, HEAD');
    expect((await call('GET', '/reports/7')).text).toBe('report 7');
    expect((await call('HEAD', '/reports/7')).status).toBe(200);
    // The handler's own 404 stays a 404: its route takes GET.
    const missing = await call('GET', '/reports/missing');
    expect([missing.status, parseXml(missing.text).error.message]).toEqual([
      404,
      'No report missing.',
    ]);
  });

  it('lists the methods of the routes that match the path, not of its longer or shorter neighbours', async () => {
    expect405(
      await call('POST', '/rest/jobs/demo/1'),
      'POST',
      '/rest/jobs/demo/1',
      'GET, HEAD, DELETE',
    );
    expect405(
      await call('PUT', '/rest/jobs/demo/1/log'),
      'PUT',
      '/rest/jobs/demo/1/log',
      'GET, HEAD',
    );
    expect((await call('DELETE', '/rest/jobs/demo/1')).status).toBe(204);
    expect((await call('POST', '/rest/jobs/demo')).status).toBe(404);
    expect((await call('POST', '/rest/jobs/demo/1/log/more')).status).toBe(404);
    expect((await call('POST', '/nothing')).status).toBe(404);
  });

  it('joins the methods that several controllers register on one path', async () => {
    expect405(await call('DELETE', '/shared'), 'DELETE', '/shared', 'GET, HEAD, POST');
    expect((await call('POST', '/shared')).text).toBe('written');
  });

  it('leaves a route for every method to answer for itself', async () => {
    const put = await call('PUT', '/own');
    expect([put.status, put.text]).toEqual([418, 'mine']);
  });
});

/** Every path template the API's controllers declare, with the methods declared on it. */
function declaredRoutes(): Map<string, Set<string>> {
  const routes = new Map<string, Set<string>>();
  for (const controller of controllersOf(ApiModule)) {
    const bases = [Reflect.getMetadata(PATH_METADATA, controller) as string | string[]].flat();
    const prototype = controller.prototype as Record<string, unknown>;
    for (const name of Object.getOwnPropertyNames(prototype)) {
      const handler = prototype[name];
      if (name === 'constructor' || typeof handler !== 'function') {
        continue;
      }
      const method = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod | undefined;
      const paths = Reflect.getMetadata(PATH_METADATA, handler) as string | string[] | undefined;
      if (method === undefined || paths === undefined) {
        continue;
      }
      for (const base of bases) {
        for (const path of [paths].flat()) {
          const template = `/${base}/${path}`.replace(/\/{2,}/g, '/').replace(/(.)\/$/, '$1');
          const methods = routes.get(template) ?? new Set<string>();
          methods.add(method === RequestMethod.ALL ? 'ALL' : RequestMethod[method]);
          routes.set(template, methods);
        }
      }
    }
  }
  return routes;
}

const JOB_ID = '6f1b5a52-3f0e-4d7a-9a4e-0c2b7d9e8f10';

/** A path that the template matches; the values never reach a handler. */
/** Whether another route serves `method` at the concrete `path` (a parameter taking its segment). */
function servedElsewhere(
  routes: Map<string, Set<string>>,
  template: string,
  path: string,
  method: string,
): boolean {
  return [...routes].some(([other, declared]) => {
    if (other === template || !declared.has(method)) {
      return false;
    }
    const pattern = other
      .split(/(:\w+|\*\w+)/)
      .map((part) =>
        part.startsWith(':')
          ? '[^/]+'
          : part.startsWith('*')
            ? '.+'
            : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
      )
      .join('');
    return new RegExp(`^${pattern}$`).test(path);
  });
}

function concretePath(template: string): string {
  return template
    .replace(/\*\w+/g, 'dir/file.R')
    .replace('/result/:app/:file', `/result/:app/${JOB_ID}.zip`)
    .replace(/:(\w+)/g, (_, name: string) =>
      name === 'app' ? 'demo' : name === 'jobId' || name === 'id' ? JOB_ID : `some-${name}`,
    );
}

describe('every registered route answers its other methods with 405 and Allow, before authentication', () => {
  let service: TestService;

  beforeAll(async () => {
    service = await startTestService({ ROLE: 'api', AUTH_MODE: 'basic', ...ADMIN_ENV });
  });
  afterAll(async () => {
    await service?.stop();
  });

  it('walks the routes', async () => {
    const routes = declaredRoutes();
    // Not vacuous: the REST API, the sign-in routes, the root and the metrics are in the walk.
    expect([...routes.keys()]).toEqual(
      expect.arrayContaining([
        `${REST}/jobs`,
        `${REST}/jobs/:app/:jobId`,
        `${REST}/jobs/:app/:jobId/log`,
        `${REST}/admin/catalog/:section/*file`,
        '/metrics',
        '/svc/session',
        '/',
      ]),
    );
    // Authentication is on: without credentials, a route's own method is refused.
    expect((await request(`${service.url}${REST}/results/demo`)).status).toBe(401);
    let walked = 0;
    for (const [template, declared] of routes) {
      // A route for every method answers them itself: the REST catch-all (404) and SOAP (its
      // own plain-text 405, soap-wsdl.e2e-spec.ts).
      if (declared.has('ALL')) {
        continue;
      }
      const path = concretePath(template);
      // POST /functions/{app}/openapi.json is the call route's (a function of that name, which
      // no R function can be: its 404), so it is allowed there beside the description's GET.
      const allowed = METHODS.filter(
        (method) =>
          declared.has(method) ||
          (method === 'HEAD' && declared.has('GET')) ||
          servedElsewhere(routes, template, path, method),
      );
      const others = METHODS.filter((other) => !allowed.includes(other));
      for (const method of others) {
        expect405(
          await request(`${service.url}${path}`, { method }),
          method,
          path,
          allowed.join(', '),
        );
        walked += 1;
      }
    }
    expect(walked).toBeGreaterThan(100);
  });
});
