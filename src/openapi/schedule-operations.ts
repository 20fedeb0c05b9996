import type {
  JsonSchema,
  MediaTypeObject,
  OperationObject,
  Reference,
  ResponseObject,
  SecurityRequirement,
} from './openapi-objects';

/** What the schedule operations take from the document's builder. */
export interface ScheduleOperationParts {
  baseUrl: string;
  error(status: number, description: string, message: string): ResponseObject;
  authentication(): Record<string, Reference>;
  server(): Record<string, Reference>;
  applicationHeader: Reference;
  security: SecurityRequirement[];
}

const ref = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });
const DATE_TIME = { type: 'string', format: 'date-time' };

/** The JSON schemas of schedules (docs/api.md#schedules), for `components.schemas`. */
export const SCHEDULE_SCHEMAS: Record<string, JsonSchema> = {
  ScheduledJob: {
    description:
      'A catalog script (R_SCRIPTS) with meta parameters, or a function call with its payload.',
    oneOf: [
      {
        type: 'object',
        properties: {
          rScript: { type: 'string', minLength: 1, maxLength: 255, examples: ['report.R'] },
          meta: {
            type: 'object',
            additionalProperties: { type: 'string' },
            description:
              'Meta parameters, as X-SVC-Meta-* headers give them; `scheduleId`, `schedulePlannedTime`, `rScript` and `sweaveFile` are set by the schedule.',
          },
        },
        required: ['rScript'],
        additionalProperties: false,
      },
      {
        type: 'object',
        properties: {
          functionCall: { enum: ['json', 'xml'] },
          payload: { type: 'string', minLength: 1 },
        },
        required: ['functionCall', 'payload'],
        additionalProperties: false,
      },
    ],
  },
  ScheduleEmail: {
    description:
      "Where each run's result goes by e-mail, from the service's EMAIL_FROM: the result files attached (linked when larger than EMAIL_ATTACH_MAX_BYTES), or a failed job's error text. At most 10 addresses in to and cc together; plain addresses only (no display name).",
    type: 'object',
    properties: {
      to: {
        type: 'array',
        minItems: 1,
        maxItems: 10,
        items: { type: 'string', format: 'email' },
        examples: [['team@example.com']],
      },
      cc: { type: 'array', maxItems: 10, items: { type: 'string', format: 'email' } },
      subject: {
        type: 'string',
        minLength: 1,
        maxLength: 200,
        description: 'Default: "Result of schedule <name>".',
      },
    },
    required: ['to'],
    additionalProperties: false,
  },
  ScheduleEmailView: {
    type: 'object',
    properties: {
      to: { type: 'array', items: { type: 'string', format: 'email' } },
      cc: { type: 'array', items: { type: 'string', format: 'email' } },
      subject: { type: 'string' },
    },
    required: ['to', 'cc', 'subject'],
    additionalProperties: false,
  },
  ScheduleDefinition: {
    type: 'object',
    properties: {
      application: {
        type: 'string',
        description: 'Optional; must be the X-SVC-Application-Name when given.',
      },
      name: { type: 'string', minLength: 1, maxLength: 200 },
      cron: {
        type: 'string',
        description:
          'Five fields (minute hour day-of-month month day-of-week), six with seconds first, or a nickname (`@daily`, `@hourly`…).',
        examples: ['0 30 6 * * 1-5'],
      },
      timeZone: { type: 'string', description: 'IANA time zone; default UTC.' },
      job: ref('ScheduledJob'),
      catchUp: {
        enum: ['runOnce', 'skip'],
        description:
          'After the nodes were down past planned times: one job for them (the latest), or none. Default runOnce.',
      },
      callbackUrl: {
        type: ['string', 'null'],
        description: "Each job's callback, under the rules of X-SVC-Callback-Url.",
      },
      email: {
        oneOf: [{ type: 'null' }, ref('ScheduleEmail')],
        description:
          "Each job's result by e-mail; refused (400) when the service has no SMTP_URL or EMAIL_FROM. Default null.",
      },
      paused: { type: 'boolean', description: 'Default false.' },
    },
    required: ['name', 'cron', 'job'],
    additionalProperties: false,
  },
  Schedule: {
    type: 'object',
    properties: {
      id: { type: 'string', format: 'uuid' },
      application: { type: 'string' },
      name: { type: 'string' },
      cron: { type: 'string' },
      timeZone: { type: 'string' },
      job: ref('ScheduledJob'),
      catchUp: { enum: ['runOnce', 'skip'] },
      callbackUrl: { type: ['string', 'null'] },
      email: { oneOf: [{ type: 'null' }, ref('ScheduleEmailView')] },
      paused: { type: 'boolean' },
      nextRunTime: { type: ['string', 'null'], format: 'date-time' },
      lastRun: {
        oneOf: [
          { type: 'null' },
          {
            type: 'object',
            properties: {
              plannedTime: DATE_TIME,
              time: { type: ['string', 'null'], format: 'date-time' },
              jobId: { type: ['string', 'null'], format: 'uuid' },
              jobUri: { type: ['string', 'null'], format: 'uri' },
              error: { type: ['string', 'null'] },
            },
            required: ['plannedTime', 'time', 'jobId', 'jobUri', 'error'],
            additionalProperties: false,
          },
        ],
      },
      createdTime: DATE_TIME,
      updatedTime: DATE_TIME,
      selfUri: { type: 'string', format: 'uri' },
    },
    required: [
      'id',
      'application',
      'name',
      'cron',
      'timeZone',
      'job',
      'catchUp',
      'callbackUrl',
      'email',
      'paused',
      'nextRunTime',
      'lastRun',
      'createdTime',
      'updatedTime',
      'selfUri',
    ],
    additionalProperties: false,
  },
  ScheduleList: {
    type: 'object',
    properties: { schedules: { type: 'array', items: ref('Schedule') } },
    required: ['schedules'],
    additionalProperties: false,
  },
};

const json = (schema: JsonSchema, example?: unknown): Record<string, MediaTypeObject> => ({
  'application/json': {
    schema,
    ...(example === undefined
      ? {}
      : { examples: { example1: { summary: 'Example', value: example } } }),
  },
});

function example(baseUrl: string): Record<string, unknown> {
  const id = '3f1c2a9e-8d4b-4c1e-9a7f-2b6d5e4c3a10';
  const jobId = '0b7e4b0e-5d0c-4a55-9f0e-6f1d1c0f2a31';
  return {
    id,
    application: 'demo',
    name: 'morning report',
    cron: '0 30 6 * * 1-5',
    timeZone: 'Europe/Berlin',
    job: { rScript: 'report.R', meta: { region: 'north' } },
    catchUp: 'runOnce',
    callbackUrl: null,
    email: { to: ['team@example.com'], cc: [], subject: 'Morning report' },
    paused: false,
    nextRunTime: '2026-11-27T05:30:00.000Z',
    lastRun: {
      plannedTime: '2026-11-26T05:30:00.000Z',
      time: '2026-11-26T05:30:00.004Z',
      jobId,
      jobUri: `${baseUrl}/svc/api/rest/jobs/demo/${jobId}`,
      error: null,
    },
    createdTime: '2026-11-20T09:12:44.310Z',
    updatedTime: '2026-11-20T09:12:44.310Z',
    selfUri: `${baseUrl}/svc/api/rest/admin/schedules/${id}`,
  };
}

/** The schedule operations, path and method first. */
export function scheduleOperations(
  parts: ScheduleOperationParts,
): Array<{ method: 'get' | 'post' | 'put' | 'delete'; path: string; operation: OperationObject }> {
  const sample = example(parts.baseUrl);
  const idParameter = {
    name: 'id',
    in: 'path' as const,
    required: true,
    description: 'The schedule id, a UUID (else 400).',
    schema: { type: 'string', format: 'uuid' },
  };
  const common = {
    ...parts.authentication(),
    '403': parts.error(403, 'The caller is no admin of the application.', 'Access is denied.'),
    ...parts.server(),
  };
  const missing = parts.error(
    404,
    'No such schedule in this application.',
    'Application demo has no schedule 3f1c2a9e-8d4b-4c1e-9a7f-2b6d5e4c3a10.',
  );
  const badId = parts.error(
    400,
    'No or a bad X-SVC-Application-Name, or `{id}` not a UUID.',
    '"42" is not a schedule id (a UUID).',
  );
  const definitionBody = {
    description: 'The schedule, as JSON (at most 1 MiB).',
    required: true,
    content: json(ref('ScheduleDefinition'), {
      name: 'morning report',
      cron: '0 30 6 * * 1-5',
      timeZone: 'Europe/Berlin',
      job: { rScript: 'report.R', meta: { region: 'north' } },
      catchUp: 'runOnce',
      email: { to: ['team@example.com'], subject: 'Morning report' },
    }),
  };
  const badDefinition = parts.error(
    400,
    'A body that is not JSON or not a schedule: an unknown or missing field, a bad cron expression or time zone (named), a catalog script the application does not have, a callback URL the application does not take, an e-mail address that is not one or too many (named), `email` on a service that sends no e-mail.',
    'cron "61 * * * *" is not a valid cron expression: Invalid value for minute: 61.',
  );
  const definitionErrors = {
    '400': badDefinition,
    ...common,
    '413': parts.error(
      413,
      'The body is over 1 MiB.',
      'A schedule may have at most 1048576 bytes.',
    ),
    '415': parts.error(
      415,
      'The body is not application/json.',
      'A schedule is sent as application/json.',
    ),
  };
  const one = (description: string): ResponseObject => ({
    description,
    content: json(ref('Schedule'), sample),
  });
  const operation = (
    fields: Omit<OperationObject, 'tags' | 'security' | 'parameters'>,
    withId: boolean,
  ): OperationObject => ({
    ...fields,
    tags: ['admin'],
    parameters: withId ? [parts.applicationHeader, idParameter] : [parts.applicationHeader],
    security: parts.security,
  });
  return [
    {
      method: 'get',
      path: '/admin/schedules',
      operation: operation(
        {
          operationId: 'getSchedules',
          summary: "An application's schedules",
          description:
            'Every schedule of the application with its next planned time (null while paused) and its last run: the planned time, when it ran, and its job (or why the intake refused it). JSON only. For admins of the application and global admins.',
          responses: {
            '200': { description: 'The schedules.', content: json(ref('ScheduleList')) },
            '400': badId,
            ...common,
          },
        },
        false,
      ),
    },
    {
      method: 'post',
      path: '/admin/schedules',
      operation: operation(
        {
          operationId: 'createSchedule',
          summary: 'Create a schedule',
          description:
            'A job that runs on a cron expression in a time zone: a catalog script with meta parameters, or a function call with its payload. Each planned time makes one job (source `schedule`, meta `scheduleId` and `schedulePlannedTime`) across all nodes. Its clock starts now: earlier planned times are not caught up. An application none knows (no catalog files, no settings) is a 404.',
          requestBody: definitionBody,
          responses: {
            '201': {
              ...one('Created; Location is its selfUri.'),
              headers: {
                Location: {
                  description: "The schedule's selfUri.",
                  schema: { type: 'string', format: 'uri' },
                },
              },
            },
            ...definitionErrors,
            '404': parts.error(
              404,
              'The application is unknown.',
              'Application nowhere is unknown: it has no catalog files and no settings.',
            ),
          },
        },
        false,
      ),
    },
    {
      method: 'get',
      path: '/admin/schedules/{id}',
      operation: operation(
        {
          operationId: 'getSchedule',
          summary: 'A schedule',
          description: 'As listed.',
          responses: { '200': one('The schedule.'), '400': badId, ...common, '404': missing },
        },
        true,
      ),
    },
    {
      method: 'put',
      path: '/admin/schedules/{id}',
      operation: operation(
        {
          operationId: 'replaceSchedule',
          summary: 'Replace a schedule',
          description:
            'The whole definition, checked as for POST. A changed cron expression or time zone (or `paused` turned false) starts its clock again at now.',
          requestBody: definitionBody,
          responses: {
            '200': one('The schedule as replaced.'),
            ...definitionErrors,
            '404': missing,
          },
        },
        true,
      ),
    },
    {
      method: 'delete',
      path: '/admin/schedules/{id}',
      operation: operation(
        {
          operationId: 'deleteSchedule',
          summary: 'Delete a schedule',
          description: 'No further jobs; jobs it made stay.',
          responses: {
            '204': { description: 'Deleted.' },
            '400': badId,
            ...common,
            '404': missing,
          },
        },
        true,
      ),
    },
    ...(['pause', 'resume'] as const).map((action) => ({
      method: 'post' as const,
      path: `/admin/schedules/{id}/${action}`,
      operation: operation(
        {
          operationId: `${action}Schedule`,
          summary: action === 'pause' ? 'Pause a schedule' : 'Resume a schedule',
          description:
            action === 'pause'
              ? 'No jobs while paused, on any node.'
              : 'Runs again from now on; the times planned while it was paused are not caught up.',
          responses: {
            '200': one(`The schedule, ${action === 'pause' ? 'paused' : 'resumed'}.`),
            '400': badId,
            ...common,
            '404': missing,
          },
        },
        true,
      ),
    })),
  ];
}
