import 'reflect-metadata';
import { INTERCEPTORS_METADATA, MODULE_METADATA } from '@nestjs/common/constants';
import { ApiModule } from '../api.module';
import { RepresentationInterceptor } from './representation.interceptor';

/** Controllers whose routes answer bytes themselves and never return a RestView. */
const RAW_CONTROLLERS = [
  'ProcessController',
  // R's output as text or as an event stream.
  'JobLogController',
  'MetricsController',
  'FallbackController',
  'SoapController',
  'WsdlController',
  // Renders the representation itself: it also answers CSV, which the interceptor does not know.
  'UsageStatisticsController',
  'OpenApiController',
  // Plain JSON in and out: a schedule's job and meta are nested objects.
  'SchedulesController',
  // Exported R functions: the function's own JSON, the listing and an OpenAPI document.
  'FunctionsController',
  // Admin JSON documents of their own (keys, application settings), and the audit trail's
  // XML, JSON or CSV.
  'ApiKeysController',
  'ApplicationsController',
  'AuditController',
  // The operator console's plain JSON, and its event stream.
  'ConsoleController',
  // Flows: plain JSON in and out, a flow's steps a list of objects.
  'FlowsController',
  // R environments: an renv.lock in, plain JSON out.
  'EnvironmentsController',
];

function rendersRepresentations(controller: object): boolean {
  const interceptors =
    (Reflect.getMetadata(INTERCEPTORS_METADATA, controller) as unknown[] | undefined) ?? [];
  return interceptors.includes(RepresentationInterceptor);
}

describe('RepresentationInterceptor is on every controller that returns representations', () => {
  const controllers = Reflect.getMetadata(MODULE_METADATA.CONTROLLERS, ApiModule) as Array<
    new () => unknown
  >;

  it('wraps every API controller except the raw ones', () => {
    const wrapped = controllers.filter(rendersRepresentations).map((c) => c.name);
    const bare = controllers.filter((c) => !rendersRepresentations(c)).map((c) => c.name);
    expect(wrapped.sort()).toEqual(
      [
        'AdminController',
        'JobsController',
        'PackagesController',
        'ResultsController',
        'SystemController',
      ].sort(),
    );
    expect(bare.sort()).toEqual([...RAW_CONTROLLERS].sort());
  });
});
