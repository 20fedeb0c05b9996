import { AUDIT_ACTIONS } from '../audit/audit.service';
import { REST_PREFIX } from '../common/public-uri';
import { REST_TYPES_NAMESPACE } from '../common/representation/rest-representation';
import type {
  HeaderObject,
  HttpMethod,
  JsonSchema,
  MediaTypeObject,
  OpenApiDocument,
  OperationObject,
  ParameterObject,
  Reference,
  ResponseObject,
  SecurityRequirement,
} from './openapi-objects';
import {
  RepresentationExample,
  RepresentationExamples,
  renderedExamples,
} from './representation-examples';
import {
  APPLICATION_NAME_PATTERN,
  jsonSchemaName,
  RepresentationName,
  representationSchemas,
  schemaRef,
  xmlSchemaName,
} from './representation-schemas';
import { SCHEDULE_SCHEMAS, scheduleOperations } from './schedule-operations';

/**
 * The OpenAPI 3.1 description of the REST API (docs/api.md), built per request because its links
 * are absolute like every link the API gives (PUBLIC_BASE_URL, else the request's host).
 */
export interface OpenApiDocumentOptions {
  /** The service's public base URL, without the /svc/... path. */
  baseUrl: string;
  version: string;
  /** RESULT_WAIT_MAX_SECONDS: the largest `wait` this node takes. */
  waitMaxSeconds: number;
  /** OIDC_ISSUER when AUTH_MODE includes oidc: the openIdConnect scheme points at its discovery. */
  oidcIssuer?: string | null;
}

/** One REST operation: where it is, and its OpenAPI operation object. */
export interface OperationEntry {
  method: HttpMethod;
  path: string;
  operation: OperationObject;
}

const XML_TYPES = ['application/vnd.svc+xml', 'application/xml'];
const JSON_TYPES = ['application/vnd.svc+json', 'application/json'];

const componentRef = (kind: 'headers' | 'parameters' | 'responses', name: string): Reference => ({
  $ref: `#/components/${kind}/${name}`,
});

/** Any of the credentials an admin can send; openIdConnect only where an issuer is configured. */
function adminSecurity(options: OpenApiDocumentOptions): SecurityRequirement[] {
  return [
    { basic: [] },
    { apiKey: [] },
    { bearerApiKey: [] },
    ...(options.oidcIssuer ? [{ openIdConnect: [] }] : []),
  ];
}
/** Anonymous callers are let in with AUTH_MODE=none; otherwise any of the credentials. */
function callerSecurity(options: OpenApiDocumentOptions): SecurityRequirement[] {
  return [{}, ...adminSecurity(options)];
}
const PUBLIC: SecurityRequirement[] = [];

/** Builds the responses of the operations; the examples carry the request's base URL. */
class Responses {
  readonly examples: RepresentationExamples;

  constructor(baseUrl: string) {
    this.examples = new RepresentationExamples(baseUrl);
  }

  /** A representation in all four negotiated media types, with examples rendered by the service. */
  representation(
    name: RepresentationName,
    samples: RepresentationExample[],
    description: string,
    headers: Record<string, HeaderObject | Reference> = {},
  ): ResponseObject {
    const xml: MediaTypeObject = {
      schema: schemaRef(xmlSchemaName(name)),
      examples: renderedExamples(samples, 'xml'),
    };
    const json: MediaTypeObject = {
      schema: schemaRef(jsonSchemaName(name)),
      examples: renderedExamples(samples, 'json'),
    };
    return {
      description,
      headers,
      content: {
        ...Object.fromEntries(XML_TYPES.map((type) => [type, xml])),
        ...Object.fromEntries(JSON_TYPES.map((type) => [type, json])),
      },
    };
  }

  /** The `error` body: in the negotiated format, XML when Accept allows neither. */
  error(
    status: number,
    description: string,
    message: string,
    headers: Record<string, HeaderObject | Reference> = {},
  ): ResponseObject {
    return this.representation('Error', this.examples.error(status, message), description, headers);
  }

  /** The error answers many operations share, kept once in `components.responses`. */
  shared(): Record<string, ResponseObject> {
    return {
      Unauthorized: this.error(
        401,
        'Missing or wrong credentials (AUTH_MODE with basic, apiKey or oidc). A refused bearer token (API key or access token) says why: `WWW-Authenticate: Bearer realm="svc", error="invalid_token", error_description="…"` (RFC 6750).',
        'Authentication is required.',
        { 'WWW-Authenticate': componentRef('headers', 'WWWAuthenticate') },
      ),
      TooManyAuthenticationFailures: this.error(
        429,
        'Too many failed authentications from this address.',
        'Too many failed authentications; try again later.',
        { 'Retry-After': componentRef('headers', 'RetryAfter') },
      ),
      NotAcceptable: this.error(
        406,
        'Accept allows none of the four representation types; the error body is XML.',
        'Cannot answer in any type that Accept allows (text/html); use application/vnd.svc+xml or application/vnd.svc+json.',
      ),
      InternalError: this.error(
        500,
        'An internal error; it is logged.',
        'Internal error; it has been logged.',
      ),
      DatabaseUnavailable: this.error(
        503,
        'The database is unavailable; nothing was stored. Repeat the request later.',
        'The database is unavailable; nothing was stored. Try again shortly.',
        { 'Retry-After': componentRef('headers', 'RetryAfter') },
      ),
    };
  }

  /** 401 and 429: only when AUTH_MODE is not none. */
  authentication(): Record<string, Reference> {
    return {
      '401': componentRef('responses', 'Unauthorized'),
      '429': componentRef('responses', 'TooManyAuthenticationFailures'),
    };
  }

  /** 406: Accept allows neither XML nor JSON. */
  notAcceptable(): Record<string, Reference> {
    return { '406': componentRef('responses', 'NotAcceptable') };
  }

  /** 500 and 503: an internal error, or a database that cannot be reached. */
  server(): Record<string, Reference> {
    return {
      '500': componentRef('responses', 'InternalError'),
      '503': componentRef('responses', 'DatabaseUnavailable'),
    };
  }

  /** A body of one plain type, described by a schema. */
  plain(
    description: string,
    content: Record<string, MediaTypeObject>,
    headers: Record<string, HeaderObject | Reference> = {},
  ): ResponseObject {
    return { description, headers, content };
  }

  /** No body. */
  empty(
    description: string,
    headers: Record<string, HeaderObject | Reference> = {},
  ): ResponseObject {
    return { description, headers };
  }
}

const text = (example: string): MediaTypeObject => ({
  schema: { type: 'string' },
  examples: { example1: { summary: 'Example', value: example } },
});

const BINARY: JsonSchema = { type: 'string', format: 'binary' };

const NAME_SCHEMA: JsonSchema = { type: 'string', pattern: '^[^\\s:]{1,128}$' };
const TIME_SCHEMA: JsonSchema = { type: 'string', format: 'date-time' };

/** A run-time API key as the admin API shows it: never its secret or hash. */
const API_KEY_SCHEMA = {
  type: 'object',
  required: ['id', 'principal', 'roles', 'createdAt', 'createdBy', 'expiresAt', 'lastUsedAt'],
  properties: {
    id: { type: 'string', description: 'The part of the key before the dot.' },
    principal: NAME_SCHEMA,
    roles: { type: 'array', items: NAME_SCHEMA },
    createdAt: TIME_SCHEMA,
    createdBy: { type: ['string', 'null'], description: 'Who made it; null: `svc keys`.' },
    expiresAt: { oneOf: [TIME_SCHEMA, { type: 'null' }] },
    lastUsedAt: { oneOf: [TIME_SCHEMA, { type: 'null' }] },
  },
  additionalProperties: false,
} satisfies JsonSchema & { required: string[]; properties: Record<string, JsonSchema> };

const APP_PATH_PARAMETER: ParameterObject = {
  name: 'app',
  in: 'path',
  required: true,
  description: 'The application.',
  schema: { type: 'string', pattern: APPLICATION_NAME_PATTERN },
};

/** An application's rights and settings as the admin API shows them. */
const APPLICATION_VIEW_SCHEMA = {
  type: 'object',
  required: [
    'application',
    'source',
    'version',
    'updatedAt',
    'updatedBy',
    'security',
    'settings',
    'slots',
  ],
  properties: {
    application: { type: 'string' },
    source: { enum: ['stored', 'configuration'] },
    version: { type: 'integer', minimum: 0 },
    updatedAt: { oneOf: [TIME_SCHEMA, { type: 'null' }] },
    updatedBy: { type: ['string', 'null'] },
    security: { type: 'object', description: 'As an APPLICATION_SECURITY entry.' },
    settings: {
      type: 'object',
      description:
        'As an APPLICATION_SETTINGS entry, without callbackSecret; callbackSecretSet says whether one is set.',
      required: ['callbackSecretSet'],
      properties: { callbackSecretSet: { type: 'boolean' } },
    },
    slots: { type: ['integer', 'null'], description: 'As an APPLICATION_SLOTS entry.' },
  },
  additionalProperties: false,
} satisfies JsonSchema & { required: string[]; properties: Record<string, JsonSchema> };

const APPLICATION_ENTRY_SCHEMA: JsonSchema = {
  type: 'object',
  properties: {
    security: { type: 'object', description: 'As an APPLICATION_SECURITY entry; absent: {}.' },
    settings: { type: 'object', description: 'As an APPLICATION_SETTINGS entry; absent: {}.' },
    slots: { type: ['integer', 'null'], minimum: 1, maximum: 256 },
  },
};

/** One row of the audit trail as GET /admin/audit answers it in JSON (CSV has the same columns). */
const AUDIT_EVENT_SCHEMA: JsonSchema = {
  type: 'object',
  required: [
    'id',
    'time',
    'principal',
    'authMethod',
    'clientAddress',
    'requestId',
    'action',
    'application',
    'jobId',
    'outcome',
    'details',
  ],
  properties: {
    id: { type: 'string' },
    time: TIME_SCHEMA,
    principal: {
      type: ['string', 'null'],
      description: 'The name, or `h:<hash>` with AUDIT_PSEUDONYMIZE.',
    },
    authMethod: { type: ['string', 'null'] },
    clientAddress: { type: ['string', 'null'] },
    requestId: { type: ['string', 'null'] },
    action: { enum: [...AUDIT_ACTIONS] },
    application: { type: ['string', 'null'] },
    jobId: { type: ['string', 'null'] },
    outcome: { enum: ['success', 'failure'] },
    details: { type: ['string', 'null'], description: 'JSON text.' },
  },
  additionalProperties: false,
};

const AUDIT_PAGE_SCHEMA: JsonSchema = {
  type: 'object',
  required: ['auditEvents', 'more'],
  properties: {
    auditEvents: { type: 'array', items: AUDIT_EVENT_SCHEMA },
    more: { type: 'boolean', description: 'Whether a next page exists.' },
  },
  additionalProperties: false,
};

const API_KEY_REQUEST_SCHEMA: JsonSchema = {
  type: 'object',
  required: ['principal'],
  properties: {
    principal: NAME_SCHEMA,
    roles: { type: 'array', items: NAME_SCHEMA, maxItems: 100 },
    expiresAt: {
      ...TIME_SCHEMA,
      description: 'ISO 8601 with a zone, in the future; absent: never.',
    },
  },
  additionalProperties: false,
};

function waitParameter(maxSeconds: number, what: string): ParameterObject {
  return {
    name: 'wait',
    in: 'query',
    required: false,
    description: `Hold the request open up to this many seconds ${what}. A whole number from 1 to RESULT_WAIT_MAX_SECONDS (${maxSeconds} on this node); anything else is a 400.`,
    schema: { type: 'integer', minimum: 1, maximum: maxSeconds },
  };
}

const JOB_PATH_PARAMETERS = [
  componentRef('parameters', 'app'),
  componentRef('parameters', 'jobId'),
];

const META_HEADERS: ParameterObject[] = [
  {
    name: 'X-SVC-Meta-rScript',
    in: 'header',
    description:
      'The catalog script to run (meta parameter rScript, recognised whatever its case). Any header `X-SVC-Meta-<name>` sets the meta parameter `<name>`, lower-cased.',
    schema: { type: 'string' },
  },
  {
    name: 'X-SVC-Meta-sweaveFile',
    in: 'header',
    description: 'The catalog Sweave file to run (meta parameter sweaveFile).',
    schema: { type: 'string' },
  },
  {
    name: 'X-SVC-Meta-#1',
    in: 'header',
    description:
      'A meta parameter written `name = value`; the name keeps its case. Any header `X-SVC-Meta-#<anything>` works the same. An empty name, a missing `=`, a parameter given twice or a repeated meta header: 400.',
    schema: { type: 'string', pattern: '=' },
    example: 'colour = blue',
  },
];

function applicationHeader(required: boolean, description: string): ParameterObject {
  return {
    name: 'X-SVC-Application-Name',
    in: 'header',
    required,
    description,
    schema: { type: 'string', pattern: APPLICATION_NAME_PATTERN },
    example: 'demo',
  };
}

const LOG_LINE_EXAMPLE =
  '2026-11-23T23:42:37.108Z stdout first line\n2026-11-23T23:42:37.203Z stderr to stderr\n';
const LOG_EVENTS_EXAMPLE = [
  'id: 0',
  'event: line',
  'data: {"stream":"stdout","time":"2026-11-23T23:42:37.108Z","line":"first line"}',
  '',
  'event: progress',
  'data: {"fraction":0.4,"message":"fitting the model","time":"2026-11-23T23:42:37.150Z"}',
  '',
  'event: end',
  'data: {"success":false,"type":"txt","cancelled":true}',
  '',
  '',
].join('\n');

/** Every REST operation, one entry each, in the order of docs/api.md. */
function operations(r: Responses, options: OpenApiDocumentOptions): OperationEntry[] {
  const x = r.examples;
  const CALLER = callerSecurity(options);
  const ADMIN = adminSecurity(options);
  const badJobPath = r.error(
    400,
    '`{app}` is not `^\\w{1,64}$`, or `{jobId}` is not a UUID.',
    '"42" is not a job id (a UUID).',
  );
  const catalogFileParameters = [
    componentRef('parameters', 'applicationNameHeader'),
    componentRef('parameters', 'section'),
    componentRef('parameters', 'file'),
  ];
  const catalogFileErrors = {
    '400': r.error(
      400,
      'No or a bad X-SVC-Application-Name, `{section}` not one of the five, or `{file}` not a plain name.',
      '"SCRIPTS" is not a catalog section; use one of R_SCRIPTS, SWEAVE_FILES, JOB_CONFIGURATIONS, R_FUNCTIONS, EMAIL_REPLIES.',
    ),
    ...r.authentication(),
    '403': r.error(403, 'The caller is no admin of the application.', 'Access is denied.'),
  };
  const packageParameters = [
    componentRef('parameters', 'applicationNameHeader'),
    componentRef('parameters', 'packageName'),
  ];
  const packageErrors = {
    '400': r.error(
      400,
      'No or a bad X-SVC-Application-Name, `{name}` not an R package name, or (PUT) a body that is not a source package of that name.',
      "The archive holds package mytools (its DESCRIPTION's Package field), not mytool.",
    ),
    ...r.authentication(),
    '403': catalogFileErrors['403'],
  };
  return [
    {
      method: 'post',
      path: '/jobs',
      operation: {
        operationId: 'submitJob',
        summary: 'Submit a job',
        tags: ['jobs'],
        description:
          "A ZIP of the job files (at most one `.R` file, flat, within the ZIP limits), a function call (an XML or JSON body for the application's `svcXmlService` / `svcJsonService`), or a form (`multipart/form-data`, whose field names are the header names). Everything is checked and stored before the 202; the result is at the `Location`. A form post is answered in `application/xml` or `application/json` (JSON when Accept prefers it) and never 406.",
        parameters: [
          applicationHeader(
            false,
            'The application; required, once, unless the body is a form (then it is the form field of the same name).',
          ),
          ...META_HEADERS,
          {
            name: 'X-SVC-Callback-Url',
            in: 'header',
            required: false,
            description:
              "When the job ends, its result (the JSON of getResult) is POSTed here, signed in X-SVC-Signature (HMAC-SHA256 with the application's callbackSecret), retried with back-off; jobStatus shows the delivery. An absolute http(s) URL whose host is on the application's callbackHosts; loopback, link-local and private addresses only when listed exactly (else 400).",
            schema: { type: 'string', format: 'uri' },
          },
          {
            name: 'X-SVC-Priority',
            in: 'header',
            required: false,
            description:
              "The job's priority: within its application, higher runs first. A whole number within the application's minPriority and maxPriority (APPLICATION_SETTINGS; both 0 unless set), else 400. Without it: the application's defaultPriority.",
            schema: { type: 'integer', minimum: -1000, maximum: 1000 },
          },
        ],
        requestBody: {
          description: 'The job.',
          required: true,
          content: {
            'application/zip': { schema: { ...BINARY, contentMediaType: 'application/zip' } },
            'application/x-zip': { schema: { ...BINARY, contentMediaType: 'application/zip' } },
            'application/x-zip-compressed': {
              schema: { ...BINARY, contentMediaType: 'application/zip' },
            },
            'application/xml': {
              schema: { type: 'string', description: 'The payload of svcXmlService.' },
              examples: {
                describe: {
                  summary: 'demo: describe',
                  value: '<call RFunction="describe"><x>3</x><x>5</x></call>',
                },
              },
            },
            'application/json': {
              schema: { description: 'The payload of svcJsonService, any JSON.' },
              examples: {
                combn: { summary: 'demo: combn', value: { RFunction: 'combn', n: 5, k: 2 } },
              },
            },
            'multipart/form-data': {
              schema: {
                type: 'object',
                properties: {
                  'X-SVC-Application-Name': { type: 'string', pattern: APPLICATION_NAME_PATTERN },
                  'X-SVC-JobFile[]': {
                    type: 'array',
                    items: BINARY,
                    description:
                      'The job files; a ZIP (by type or a .zip name) is unpacked into the job.',
                  },
                  'X-SVC-Meta-rScript': { type: 'string' },
                  'X-SVC-Callback-Url': {
                    type: 'string',
                    format: 'uri',
                    description: 'As the header of the same name.',
                  },
                  'X-SVC-Priority': {
                    type: 'string',
                    pattern: '^\\s*([+-]?\\d{1,6})?\\s*$',
                    description: 'As the header of the same name; empty: none.',
                  },
                },
                required: ['X-SVC-Application-Name'],
                additionalProperties: {
                  type: 'string',
                  description: 'Further `X-SVC-Meta-<name>` and `X-SVC-Meta-#<anything>` fields.',
                },
              },
            },
          },
        },
        responses: {
          '202': r.representation('JobToken', x.jobToken(), 'The job is stored and queued.', {
            Location: componentRef('headers', 'ResultLocation'),
          }),
          '400': r.error(
            400,
            'No or a bad X-SVC-Application-Name, a bad meta header, an empty body, a ZIP that breaks a rule (nested folders, bad names, two .R files, not a ZIP), a body that is not UTF-8, a form without file or rScript, or a callback URL that is not allowed.',
            'The X-SVC-Application-Name header is missing or empty.',
          ),
          ...r.authentication(),
          // Beside the authentication failures, the application's submission limits.
          '429': r.error(
            429,
            "Too many failed authentications from this client, or a limit of the application's (APPLICATION_SETTINGS) reached: maxQueuedJobs, maxSubmissionsPerMinute or maxSubmissionsPerMinutePerPrincipal; the message names it. Repeat after Retry-After seconds.",
            'The application "reports" has 500 jobs queued, its limit (maxQueuedJobs: 500); submit again once some have started.',
            { 'Retry-After': componentRef('headers', 'RetryAfter') },
          ),
          '403': r.error(
            403,
            'The caller may not submit this kind of job to the application.',
            'Access is denied.',
          ),
          ...r.notAcceptable(),
          '413': r.error(
            413,
            "The body is over MAX_REQUEST_BYTES or the application's maxJobSizeBytes, or the ZIP or form over one of its limits.",
            'The request body is larger than the configured limit.',
          ),
          '415': r.error(
            415,
            'A Content-Type other than the ones of the request body.',
            'Content-Type text/plain is not supported; send application/zip, application/xml or application/json.',
          ),
          ...r.server(),
        },
        security: CALLER,
      },
    },
    {
      method: 'get',
      path: '/jobs/{app}/{jobId}',
      operation: {
        operationId: 'getJobStatus',
        summary: "A job's state",
        tags: ['jobs'],
        description:
          'Where the job is: QUEUED, RUNNING or DONE (a cancelled job is DONE with a `cancellation`), and its last `progress` report. With `wait` the answer comes as soon as the state differs from `while` (or, without it, from what it was when the request came), or unchanged after `wait` seconds; a DONE job is answered at once.',
        parameters: [
          ...JOB_PATH_PARAMETERS,
          waitParameter(options.waitMaxSeconds, 'for the state to change'),
          {
            name: 'while',
            in: 'query',
            required: false,
            description:
              'With `wait`: the state the client saw last. The request holds only while the job is in this state and answers at once when it is not, so a change between two requests is not missed. Without `wait`, or another value, a 400.',
            schema: { type: 'string', enum: ['QUEUED', 'RUNNING', 'DONE'] },
          },
        ],
        responses: {
          '200': r.representation('JobStatus', x.jobStatus(), 'The job status.'),
          '400': r.error(
            400,
            '`{app}` or `{jobId}` malformed, or a bad `wait` or `while`.',
            'wait must be a whole number of seconds from 1 to 60.',
          ),
          ...r.authentication(),
          '404': r.error(
            404,
            'No such job, or not visible to the caller.',
            'Application demo has no job 3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10.',
          ),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: CALLER,
      },
    },
    {
      method: 'delete',
      path: '/jobs/{app}/{jobId}',
      operation: {
        operationId: 'cancelJob',
        summary: 'Cancel a job',
        tags: ['jobs'],
        description:
          'Ends the job at once: it becomes DONE with a failed `txt` result saying who cancelled it and when. For whoever may submit jobs to the application, its admins and the global admins.',
        parameters: JOB_PATH_PARAMETERS,
        responses: {
          '202': r.representation(
            'JobStatus',
            x.jobStatus().slice(2),
            'The job was running: its result is stored, and its node is stopping R.',
          ),
          '204': r.empty('The job was queued; it will never run.'),
          '400': badJobPath,
          ...r.authentication(),
          '403': r.error(
            403,
            'A user of the application who may submit nothing.',
            'Access is denied.',
          ),
          '404': r.error(
            404,
            'No such job, or not visible to the caller.',
            'Application demo has no job 3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10.',
          ),
          ...r.notAcceptable(),
          '409': r.error(
            409,
            'The job had finished already; its result stays (delete it with DELETE /results/...).',
            'Job 3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10 of application demo has finished already; delete its result instead.',
          ),
          ...r.server(),
        },
        security: CALLER,
      },
    },
    {
      method: 'get',
      path: '/jobs/{app}/{jobId}/log',
      operation: {
        operationId: 'getJobLog',
        summary: "A job's log",
        tags: ['jobs'],
        description:
          'The lines R printed, while the job runs and after, until its result is deleted. Without `text/event-stream` in Accept: what is stored now, one line each: `<time> <stream> <text>`. With it: Server-Sent Events, one `line` event per line (`id` the line number, data `{"stream","time","line"}`), a `progress` event per progress report (data `{"fraction","message","time"}`), and when the job is done an `end` event (data `{"success","type","cancelled"}`, or `{"deleted":true}`); then the stream closes.',
        parameters: [
          ...JOB_PATH_PARAMETERS,
          {
            name: 'Last-Event-ID',
            in: 'header',
            description:
              'Server-Sent Events only: the last line number received; the stream goes on after it.',
            schema: { type: 'string', pattern: '^\\d+$' },
          },
        ],
        responses: {
          '200': r.plain('The log.', {
            'text/plain': text(LOG_LINE_EXAMPLE),
            'text/event-stream': text(LOG_EVENTS_EXAMPLE),
          }),
          '400': r.error(
            400,
            '`{app}` or `{jobId}` malformed, or a Last-Event-ID that is not a number.',
            'Last-Event-ID must be the id of an event of this stream.',
          ),
          ...r.authentication(),
          '404': r.error(
            404,
            'No such job, or not visible to the caller.',
            'Application demo has no job 3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10.',
          ),
          ...r.server(),
        },
        security: CALLER,
      },
    },
    {
      method: 'get',
      path: '/results/{app}',
      operation: {
        operationId: 'listResults',
        summary: "An application's results",
        tags: ['results'],
        description:
          'Newest first. Without `limit` and `offset` the whole list is streamed. In JSON, no result is `{"results":""}`, one an object, several an array.',
        parameters: [
          componentRef('parameters', 'app'),
          {
            name: 'limit',
            in: 'query',
            description: 'At most this many results.',
            schema: { type: 'integer', minimum: 0, maximum: 999999999 },
          },
          {
            name: 'offset',
            in: 'query',
            description: 'Skip this many results first.',
            schema: { type: 'integer', minimum: 0, maximum: 999999999 },
          },
        ],
        responses: {
          '200': r.representation('Results', x.results(), 'The results.'),
          '400': r.error(
            400,
            '`{app}` malformed, or `limit`/`offset` not a non-negative whole number.',
            'limit must be a non-negative whole number.',
          ),
          ...r.authentication(),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: CALLER,
      },
    },
    {
      method: 'get',
      path: '/results/{app}/{jobId}',
      operation: {
        operationId: 'getResult',
        summary: "A job's result",
        tags: ['results'],
        description:
          '404 until the result is ready. With `wait` the answer comes as soon as the result is stored, or 404 after `wait` seconds.',
        parameters: [
          ...JOB_PATH_PARAMETERS,
          waitParameter(options.waitMaxSeconds, 'for the result'),
        ],
        responses: {
          '200': r.representation('Result', x.result(), 'The result; its data is at `dataUri`.'),
          '400': r.error(
            400,
            '`{app}` or `{jobId}` malformed, or a bad `wait`.',
            'wait must be a whole number of seconds from 1 to 60.',
          ),
          ...r.authentication(),
          '404': r.error(
            404,
            'No result (yet), or not visible to the caller.',
            'No result for job 3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10 of application demo (not ready, or unknown).',
          ),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: CALLER,
      },
    },
    {
      method: 'delete',
      path: '/results/{app}/{jobId}',
      operation: {
        operationId: 'deleteResult',
        summary: 'Delete a result and its job',
        tags: ['results'],
        description: 'The result, its job and its log go together.',
        parameters: JOB_PATH_PARAMETERS,
        responses: {
          '204': r.empty('Deleted.'),
          '400': badJobPath,
          ...r.authentication(),
          '404': r.error(
            404,
            'No result (yet), or not visible to the caller.',
            'No result for job 3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10 of application demo.',
          ),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: CALLER,
      },
    },
    ...(['get', 'head'] as const).map((method): OperationEntry => ({
      method,
      path: '/result/{app}/{jobId}.{type}',
      operation: {
        operationId: method === 'get' ? 'getResultData' : 'headResultData',
        summary: method === 'get' ? "A result's data" : "A result's data: the headers only",
        tags: ['results'],
        description:
          'The bytes of the result, in their own type (a ZIP, or text); Accept does not apply. A strong ETag (the SHA-256), conditional GET and one byte range.',
        parameters: [
          ...JOB_PATH_PARAMETERS,
          {
            name: 'type',
            in: 'path',
            required: true,
            description: "The result's `type`, as in its `dataUri`.",
            schema: { type: 'string' },
            example: 'zip',
          },
          {
            name: 'Range',
            in: 'header',
            description: 'One byte range: 206. Several: the whole body (200).',
            schema: { type: 'string' },
            example: 'bytes=0-99',
          },
          {
            name: 'If-None-Match',
            in: 'header',
            description: 'The ETag the caller has: 304 when it still matches.',
            schema: { type: 'string' },
          },
          {
            name: 'If-Range',
            in: 'header',
            description: 'Range applies only while the ETag is still this one.',
            schema: { type: 'string' },
          },
        ],
        responses: {
          '200': r.plain('The data.', method === 'get' ? { '*/*': { schema: BINARY } } : {}, {
            ETag: componentRef('headers', 'ETag'),
            'Content-Length': componentRef('headers', 'ContentLength'),
            'Content-Disposition': componentRef('headers', 'ContentDisposition'),
            'Accept-Ranges': componentRef('headers', 'AcceptRanges'),
          }),
          '206': r.plain(
            'The range asked for.',
            method === 'get' ? { '*/*': { schema: BINARY } } : {},
            {
              ETag: componentRef('headers', 'ETag'),
              'Content-Range': componentRef('headers', 'ContentRange'),
              'Content-Length': componentRef('headers', 'ContentLength'),
            },
          ),
          '304': r.empty('The ETag in If-None-Match still matches.', {
            ETag: componentRef('headers', 'ETag'),
          }),
          '400': r.error(
            400,
            '`{app}` malformed, or `{jobId}` not a UUID.',
            '"x.zip" is not {jobId}.{extension}.',
          ),
          ...r.authentication(),
          '404': r.error(
            404,
            'No result, another `{type}`, or not visible to the caller.',
            'No result data at /svc/api/rest/result/demo/3f6c1a52-8d0e-4b7a-9c1e-2b5d7f4e9a10.zip.',
          ),
          '416': r.empty('The range lies outside the data; no body.', {
            'Content-Range': componentRef('headers', 'ContentRange'),
          }),
          ...r.server(),
        },
        security: CALLER,
      },
    })),
    {
      method: 'post',
      path: '/process',
      operation: {
        operationId: 'callFunction',
        summary: 'Call a function at once',
        tags: ['functions'],
        description:
          "The body, as one UTF-8 string, goes to the application's `svcXmlService` (XML) or `svcJsonService` (JSON); the string it returns is the answer, in the type of the request whatever Accept says. Nothing is stored. At most PROCESS_MAX_CONCURRENT calls run per node and PROCESS_MAX_QUEUED wait; beyond that 503 at once.",
        parameters: [applicationHeader(true, 'The application whose function is called; once.')],
        requestBody: {
          description: 'The payload.',
          required: true,
          content: {
            'application/xml': {
              schema: { type: 'string' },
              examples: {
                describe: {
                  summary: 'demo: describe',
                  value: '<call RFunction="describe"><x>3</x><x>5</x></call>',
                },
              },
            },
            'application/json': {
              schema: { description: 'Any JSON.' },
              examples: {
                combn: { summary: 'demo: combn', value: { RFunction: 'combn', n: 5, k: 2 } },
              },
            },
          },
        },
        responses: {
          '200': r.plain("The function's string.", {
            'application/xml': { schema: { type: 'string' } },
            'application/json': { schema: { description: 'Whatever JSON the function wrote.' } },
          }),
          '400': {
            description:
              'The function failed (R error, no such function, not one string, over FUNCTION_TIMEOUT_SECONDS, R died): `errorResult` in the type of the request (JSON: the flat object). A request error (no or a bad X-SVC-Application-Name, an empty or non-UTF-8 body): the `error` body in the negotiated format.',
            headers: {},
            content: {
              'application/xml': {
                schema: {
                  oneOf: [
                    schemaRef(xmlSchemaName('ErrorResult')),
                    schemaRef(xmlSchemaName('Error')),
                  ],
                },
                examples: renderedExamples(x.errorResult(), 'xml'),
              },
              'application/json': {
                schema: {
                  oneOf: [
                    schemaRef(jsonSchemaName('ErrorResult')),
                    schemaRef(jsonSchemaName('Error')),
                  ],
                },
                examples: renderedExamples(x.errorResult(), 'json'),
              },
              'application/vnd.svc+xml': { schema: schemaRef(xmlSchemaName('Error')) },
              'application/vnd.svc+json': { schema: schemaRef(jsonSchemaName('Error')) },
            },
          },
          ...r.authentication(),
          '403': r.error(
            403,
            'The caller may not call functions of the application.',
            'Access is denied.',
          ),
          '413': r.error(
            413,
            'The body is over MAX_REQUEST_BYTES.',
            'The request body is larger than the configured limit.',
          ),
          '415': r.error(
            415,
            'Not application/xml or application/json.',
            'Content-Type must be application/xml or application/json for a function call.',
          ),
          '500': r.server()['500'],
          '503': r.error(
            503,
            'Too many calls on this node, or R cannot be reached.',
            'Too many function calls at once (4 running, 16 waiting); try again shortly.',
            { 'Retry-After': componentRef('headers', 'RetryAfter') },
          ),
        },
        security: CALLER,
      },
    },
    {
      method: 'get',
      path: '/admin/catalog',
      operation: {
        operationId: 'getCatalog',
        summary: "An application's catalog",
        tags: ['admin'],
        description:
          'One `directory` per section, each with its files. For admins of the application and global admins.',
        parameters: [componentRef('parameters', 'applicationNameHeader')],
        responses: {
          '200': r.representation('Catalog', x.catalog(), 'The catalog.'),
          '400': r.error(
            400,
            'No or a bad X-SVC-Application-Name.',
            'The X-SVC-Application-Name header is missing or empty.',
          ),
          ...r.authentication(),
          '403': catalogFileErrors['403'],
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'get',
      path: '/admin/catalog/{section}/{file}',
      operation: {
        operationId: 'getCatalogFile',
        summary: 'A catalog file',
        tags: ['admin'],
        description: 'Text files (`.R`, `.Rnw`, `.txt`, ...) as text/plain, others as bytes.',
        parameters: catalogFileParameters,
        responses: {
          '200': r.plain('The file.', {
            'text/plain': { schema: { type: 'string' } },
            'application/octet-stream': { schema: BINARY },
          }),
          ...catalogFileErrors,
          '404': r.error(
            404,
            'No such file.',
            'Application demo has no catalog file R_SCRIPTS/summary.R.',
          ),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'put',
      path: '/admin/catalog/{section}/{file}',
      operation: {
        operationId: 'putCatalogFile',
        summary: 'Store a catalog file',
        tags: ['admin'],
        description:
          'The body is the file, stored as sent; every node uses it from the next job on.',
        parameters: catalogFileParameters,
        requestBody: {
          description: 'The file.',
          required: true,
          content: { '*/*': { schema: BINARY } },
        },
        responses: {
          '201': r.empty('Created.', { Location: componentRef('headers', 'CatalogFileLocation') }),
          '204': r.empty('Replaced.'),
          ...catalogFileErrors,
          '413': r.error(
            413,
            'The file is over CATALOG_MAX_FILE_BYTES.',
            'A catalog file may have at most 1048576 bytes (CATALOG_MAX_FILE_BYTES).',
          ),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'delete',
      path: '/admin/catalog/{section}/{file}',
      operation: {
        operationId: 'deleteCatalogFile',
        summary: 'Delete a catalog file',
        tags: ['admin'],
        description: 'Every node stops using it at once.',
        parameters: catalogFileParameters,
        responses: {
          '204': r.empty('Deleted.'),
          ...catalogFileErrors,
          '404': r.error(
            404,
            'No such file.',
            'Application demo has no catalog file R_SCRIPTS/summary.R.',
          ),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'get',
      path: '/admin/packages',
      operation: {
        operationId: 'getPackages',
        summary: "An application's R packages",
        tags: ['admin'],
        description:
          "Every uploaded package with its version, who uploaded it and when, and per worker node whether its install succeeded (`installed`), failed (`failed`, with R's output; the node keeps the version it had), cannot happen there (`unsupported`: webR nodes) or has not happened yet (`pending`). For admins of the application and global admins.",
        parameters: [componentRef('parameters', 'applicationNameHeader')],
        responses: {
          '200': r.representation('Packages', x.packages(), 'The packages.'),
          '400': packageErrors['400'],
          ...r.authentication(),
          '403': packageErrors['403'],
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'put',
      path: '/admin/packages/{name}',
      operation: {
        operationId: 'putPackage',
        summary: 'Upload an R source package',
        tags: ['admin'],
        description:
          "The body is a source package as `R CMD build` makes it (`<name>_<version>.tar.gz`); its DESCRIPTION's Package must be `{name}`. It is stored, and every native worker node installs it into the application's library (`R CMD INSTALL`, in the sandbox, no network) at once, and nodes that start later at start-up. A build that fails leaves a node's previous version in place. Dependencies must be installed on the nodes or uploaded first. See GET /admin/packages for each node's outcome.",
        parameters: packageParameters,
        requestBody: {
          description: 'The source package (.tar.gz), at most 64 MiB.',
          required: true,
          content: {
            'application/gzip': { schema: BINARY },
            'application/x-gzip': { schema: BINARY },
            'application/octet-stream': { schema: BINARY },
          },
        },
        responses: {
          '201': r.empty('Created.', { Location: componentRef('headers', 'PackageLocation') }),
          '204': r.empty('Replaced.'),
          ...packageErrors,
          '413': r.error(
            413,
            'The archive is over 64 MiB.',
            'A source package may have at most 67108864 bytes.',
          ),
          '415': r.error(
            415,
            'The body is not sent as application/gzip, application/x-gzip or application/octet-stream.',
            'Send the source package as application/gzip, application/x-gzip, application/octet-stream (got "text/plain").',
          ),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'delete',
      path: '/admin/packages/{name}',
      operation: {
        operationId: 'deletePackage',
        summary: 'Delete an R package',
        tags: ['admin'],
        description: "Every worker node removes it from the application's library at once.",
        parameters: packageParameters,
        responses: {
          '204': r.empty('Deleted.'),
          ...packageErrors,
          '404': r.error(404, 'No such package.', 'Application demo has no R package mytools.'),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    ...scheduleOperations({
      baseUrl: options.baseUrl,
      error: (status, description, message) => r.error(status, description, message),
      authentication: () => r.authentication(),
      server: () => r.server(),
      applicationHeader: componentRef('parameters', 'applicationNameHeader'),
      security: ADMIN,
    }),
    {
      method: 'get',
      path: '/admin/system/configuration',
      operation: {
        operationId: 'getConfiguration',
        summary: "The node's configuration",
        tags: ['admin'],
        description:
          'The effective configuration, secrets masked as `********` (unset: null). Global admins only.',
        responses: {
          '200': r.plain('The configuration, by setting.', {
            'application/json': {
              schema: { type: 'object', additionalProperties: true },
            },
          }),
          ...r.authentication(),
          '403': r.error(403, 'The caller is no global admin.', 'Access is denied.'),
        },
        security: ADMIN,
      },
    },
    {
      method: 'post',
      path: '/admin/api-keys',
      operation: {
        operationId: 'createApiKey',
        summary: 'Create an API key',
        tags: ['admin'],
        description:
          'Makes an API key kept in the database (AUTH_MODE=apiKey uses it at once on every node). The answer holds the key, `<keyId>.<secret>`, this once: only a hash of the secret is stored. Global admins only.',
        requestBody: {
          description: 'Who the key is for, its roles and when it expires.',
          required: true,
          content: { 'application/json': { schema: API_KEY_REQUEST_SCHEMA } },
        },
        responses: {
          '201': r.plain(
            'Created; `key` is shown this once.',
            {
              'application/json': {
                schema: {
                  ...API_KEY_SCHEMA,
                  required: ['key', ...API_KEY_SCHEMA.required],
                  properties: {
                    key: { type: 'string', description: '`<keyId>.<secret>`, for the client.' },
                    ...API_KEY_SCHEMA.properties,
                  },
                },
              },
            },
            { Location: { description: 'The key, for DELETE.', schema: { type: 'string' } } },
          ),
          '400': r.error(
            400,
            'A field is missing or wrong; the message names it.',
            'expiresAt: must be in the future',
          ),
          ...r.authentication(),
          '403': r.error(403, 'The caller is no global admin.', 'Access is denied.'),
          '413': r.error(413, 'The body is over 64 KiB.', 'The JSON body may have at most 64 KiB.'),
          '415': r.error(
            415,
            'The body is not JSON.',
            'The body must be JSON (Content-Type: application/json).',
          ),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'get',
      path: '/admin/api-keys',
      operation: {
        operationId: 'listApiKeys',
        summary: 'List the API keys made at run time',
        tags: ['admin'],
        description:
          'Every key made through this API or `svc keys create`, never its secret or hash (keys of API_KEYS are not listed). `lastUsedAt` is written at most once a minute per key and node. Global admins only.',
        responses: {
          '200': r.plain('The keys, oldest first.', {
            'application/json': {
              schema: {
                type: 'object',
                required: ['apiKeys'],
                properties: { apiKeys: { type: 'array', items: API_KEY_SCHEMA } },
                additionalProperties: false,
              },
            },
          }),
          ...r.authentication(),
          '403': r.error(403, 'The caller is no global admin.', 'Access is denied.'),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'delete',
      path: '/admin/api-keys/{keyId}',
      operation: {
        operationId: 'revokeApiKey',
        summary: 'Revoke an API key',
        tags: ['admin'],
        description:
          'Deletes the key; every node refuses it within a second. Keys of API_KEYS cannot be revoked here (404). Global admins only.',
        parameters: [
          {
            name: 'keyId',
            in: 'path',
            required: true,
            description: 'The part of the key before the dot.',
            schema: { type: 'string' },
          },
        ],
        responses: {
          '204': r.empty('Revoked.'),
          ...r.authentication(),
          '403': r.error(403, 'The caller is no global admin.', 'Access is denied.'),
          '404': r.error(404, 'No such key in the database.', 'No API key k1234.'),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'get',
      path: '/admin/applications/{app}',
      operation: {
        operationId: 'getApplicationSettings',
        summary: "An application's rights and settings",
        tags: ['admin'],
        description:
          'What is in force for the application: the stored entry (`source: stored`), else the configured APPLICATION_SECURITY, APPLICATION_SETTINGS and APPLICATION_SLOTS entries (`source: configuration`, version 0). The callback secret is never shown, only `callbackSecretSet`. The ETag is the version, for If-Match on PUT. Global admins only.',
        parameters: [APP_PATH_PARAMETER],
        responses: {
          '200': r.plain(
            'The rights and settings.',
            { 'application/json': { schema: APPLICATION_VIEW_SCHEMA } },
            { ETag: { description: 'The version, `"<n>"`.', schema: { type: 'string' } } },
          ),
          '400': r.error(
            400,
            'Not an application name.',
            'The application name in the path "a-b" is invalid: use ASCII letters, digits and underscores only.',
          ),
          ...r.authentication(),
          '403': r.error(403, 'The caller is no global admin.', 'Access is denied.'),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'put',
      path: '/admin/applications/{app}',
      operation: {
        operationId: 'putApplicationSettings',
        summary: "Replace an application's rights and settings",
        tags: ['admin'],
        description:
          'Stores the entry, which replaces the configured ones of the application on every node within a second. `settings.callbackSecret`: absent keeps the current secret, null removes it. Fields of the GET answer other than the three parts are ignored, so a GET answer can be changed and sent back. A changed `slots` applies when the worker nodes start again (`restartRequired`). Global admins only.',
        parameters: [
          APP_PATH_PARAMETER,
          {
            name: 'If-Match',
            in: 'header',
            required: true,
            description: 'The ETag of the GET this change is based on.',
            schema: { type: 'string' },
          },
        ],
        requestBody: {
          description: 'The three parts, each as its configuration entry.',
          required: true,
          content: { 'application/json': { schema: APPLICATION_ENTRY_SCHEMA } },
        },
        responses: {
          '200': r.plain(
            'Stored and in force.',
            {
              'application/json': {
                schema: {
                  ...APPLICATION_VIEW_SCHEMA,
                  required: [...APPLICATION_VIEW_SCHEMA.required, 'restartRequired'],
                  properties: {
                    ...APPLICATION_VIEW_SCHEMA.properties,
                    restartRequired: {
                      type: 'array',
                      items: { type: 'string' },
                      description: 'Changes that apply only when the workers start again.',
                    },
                  },
                },
              },
            },
            { ETag: { description: 'The new version.', schema: { type: 'string' } } },
          ),
          '400': r.error(
            400,
            'A part or field is wrong; the message names it.',
            'settings: networkAllowed must be true or false',
          ),
          ...r.authentication(),
          '403': r.error(403, 'The caller is no global admin.', 'Access is denied.'),
          '412': r.error(
            412,
            'The version changed since that ETag.',
            'The settings of demo have changed since that ETag: GET them again, then repeat the change.',
          ),
          '413': r.error(413, 'The body is over 64 KiB.', 'The JSON body may have at most 64 KiB.'),
          '415': r.error(
            415,
            'The body is not JSON.',
            'The body must be JSON (Content-Type: application/json).',
          ),
          '428': r.error(
            428,
            'If-Match is missing.',
            'If-Match is required: send the ETag of a GET of this application.',
          ),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'get',
      path: '/admin/audit',
      operation: {
        operationId: 'listAuditEvents',
        summary: 'The audit trail',
        tags: ['admin'],
        description:
          'Who did what, newest first: jobs submitted and cancelled, results deleted, catalog files and packages changed, API keys created and revoked, application settings changed (before and after, without secrets), failed authentications counted per client address. Filters combine; `Link: <…>; rel="next"` when there are more. XML, JSON or CSV (`Accept: text/csv` or `format=csv`). Global admins only.',
        parameters: [
          {
            name: 'from',
            in: 'query',
            required: false,
            description: 'Rows at or after this time (ISO 8601 with a zone).',
            schema: TIME_SCHEMA,
          },
          {
            name: 'to',
            in: 'query',
            required: false,
            description: 'Rows before this time (ISO 8601 with a zone).',
            schema: TIME_SCHEMA,
          },
          {
            name: 'principal',
            in: 'query',
            required: false,
            description: 'Rows of this principal (its name, also with AUDIT_PSEUDONYMIZE).',
            schema: { type: 'string', maxLength: 128 },
          },
          {
            name: 'application',
            in: 'query',
            required: false,
            description: 'Rows of this application.',
            schema: { type: 'string', pattern: APPLICATION_NAME_PATTERN },
          },
          {
            name: 'action',
            in: 'query',
            required: false,
            description: 'Rows of this action.',
            schema: { enum: [...AUDIT_ACTIONS] },
          },
          {
            name: 'limit',
            in: 'query',
            required: false,
            description: 'Rows per page, 1 to 1000; default 100.',
            schema: { type: 'integer', minimum: 1, maximum: 1000 },
          },
          {
            name: 'offset',
            in: 'query',
            required: false,
            description: 'Rows to skip.',
            schema: { type: 'integer', minimum: 0, maximum: 1000000 },
          },
          {
            name: 'format',
            in: 'query',
            required: false,
            description: 'Overrides Accept, for tools that cannot set headers.',
            schema: { enum: ['xml', 'json', 'csv'] },
          },
        ],
        responses: {
          '200': r.plain(
            'One page of rows.',
            {
              'application/vnd.svc+json': { schema: AUDIT_PAGE_SCHEMA },
              'application/json': { schema: AUDIT_PAGE_SCHEMA },
              'application/vnd.svc+xml': { schema: { type: 'string' } },
              'application/xml': { schema: { type: 'string' } },
              'text/csv': text(
                'id,time,principal,authMethod,clientAddress,requestId,action,application,jobId,outcome,details\r\n41,2026-11-26T17:02:11.201Z,alice,user,127.0.0.1,3f0c…,job.submitted,demo,5b1e…,success,"{""kind"":""SCRIPT"",""source"":""rest""}"\r\n',
              ),
            },
            {
              Link: {
                description: 'The next page, when there is one: `<…>; rel="next"`.',
                schema: { type: 'string' },
              },
            },
          ),
          '400': r.error(
            400,
            'A bad time, action, application name, limit, offset or format; the message names it.',
            'limit must be a whole number from 1 to 1000.',
          ),
          ...r.authentication(),
          '403': r.error(403, 'The caller is no global admin.', 'Access is denied.'),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'get',
      path: '/admin/statistics',
      operation: {
        operationId: 'getUsageStatistics',
        summary: 'Usage statistics per application and month',
        tags: ['admin'],
        description:
          'Per application and calendar month (UTC): jobs submitted, their outcomes, run time (total, p50, p95), R CPU time and bytes in and out, from the record each finished job leaves (kept when results are deleted). Without `application`: every application, global admins only; with it: that application, for its admins too. CSV with `Accept: text/csv` or `format=csv`.',
        parameters: [
          {
            name: 'application',
            in: 'query',
            required: false,
            description: 'One application; absent: every application (global admins only).',
            schema: { type: 'string', pattern: APPLICATION_NAME_PATTERN },
          },
          {
            name: 'from',
            in: 'query',
            required: false,
            description: 'First month, inclusive (YYYY-MM); default: eleven months before `to`.',
            schema: { type: 'string', pattern: '^[0-9]{4}-(0[1-9]|1[0-2])$' },
          },
          {
            name: 'to',
            in: 'query',
            required: false,
            description:
              'Last month, inclusive (YYYY-MM); default: the current month. At most 120 months.',
            schema: { type: 'string', pattern: '^[0-9]{4}-(0[1-9]|1[0-2])$' },
          },
          {
            name: 'format',
            in: 'query',
            required: false,
            description: 'Overrides Accept, for tools that cannot set headers.',
            schema: { enum: ['xml', 'json', 'csv'] },
          },
        ],
        responses: {
          '200': (() => {
            const answer = r.representation(
              'UsageStatistics',
              x.usageStatistics(),
              'The usage, oldest month first, then by application.',
            );
            return {
              ...answer,
              content: {
                ...answer.content,
                'text/csv': text(
                  'application,month,submitted,succeeded,failed,cancelled,runTimeTotalMs,runTimeP50Ms,runTimeP95Ms,waitTimeP50Ms,waitTimeP95Ms,rCpuTotalMs,rCpuJobs,bytesIn,bytesOut\r\ndemo,2026-11,4,2,1,1,1371,68,1019,12,240,312,3,10975,1234\r\n',
                ),
              },
            };
          })(),
          '400': r.error(
            400,
            'A bad month, `from` after `to`, more than 120 months, a bad `format` or application name.',
            'from must be a month, YYYY-MM (got "2026-13").',
          ),
          ...r.authentication(),
          '403': r.error(
            403,
            'The caller is no admin of the application (or, without `application`, no global admin).',
            'Access is denied.',
          ),
          ...r.notAcceptable(),
          ...r.server(),
        },
        security: ADMIN,
      },
    },
    {
      method: 'get',
      path: '/system/health/check',
      operation: {
        operationId: 'checkHealth',
        summary: 'Health: database and R',
        tags: ['system'],
        description: 'Whether the database answers and R evaluates `1+1`.',
        responses: {
          '200': r.plain('Healthy.', { 'text/plain': { schema: { const: 'OK' } } }),
          '500': r.plain('Unhealthy.', { 'text/plain': { schema: { const: 'ERROR' } } }),
        },
        security: PUBLIC,
      },
    },
    {
      method: 'get',
      path: '/system/health/live',
      operation: {
        operationId: 'checkLiveness',
        summary: 'Liveness',
        tags: ['system'],
        description: 'The process is up and serving HTTP; nothing else is checked.',
        responses: {
          '200': r.plain('Up.', {
            'application/json': { schema: schemaRef('HealthUp') },
          }),
        },
        security: PUBLIC,
      },
    },
    {
      method: 'get',
      path: '/system/health/ready',
      operation: {
        operationId: 'checkReadiness',
        summary: 'Readiness',
        tags: ['system'],
        description:
          'Whether the node can take requests: the database answers and it is not shutting down.',
        responses: {
          '200': r.plain('Ready.', { 'application/json': { schema: schemaRef('HealthUp') } }),
          '503': r.plain('Not ready.', { 'application/json': { schema: schemaRef('HealthDown') } }),
        },
        security: PUBLIC,
      },
    },
    {
      method: 'get',
      path: '/system/info',
      operation: {
        operationId: 'getNodeInformation',
        summary: 'Node information',
        tags: ['system'],
        description:
          "This node's health, uptime, R engine and sandbox, and the host's memory and load.",
        responses: {
          '200': r.representation('NodeInformation', x.nodeInformation(), 'The node.'),
          ...r.notAcceptable(),
          '500': r.server()['500'],
        },
        security: PUBLIC,
      },
    },
    ...(['json', 'yaml'] as const).map((format): OperationEntry => ({
      method: 'get',
      path: `/openapi.${format}`,
      operation: {
        operationId: format === 'json' ? 'getOpenApiJson' : 'getOpenApiYaml',
        summary: `This description in ${format.toUpperCase()}`,
        tags: ['openapi'],
        description:
          'The OpenAPI 3.1 document; its links carry the public base URL. Accept does not apply.',
        responses: {
          '200': r.plain('The document.', {
            [format === 'json' ? 'application/json' : 'application/yaml']: {
              schema: {
                type: format === 'json' ? 'object' : 'string',
                externalDocs: {
                  description: 'OpenAPI 3.1',
                  url: 'https://spec.openapis.org/oas/v3.1.0',
                },
              },
            },
          }),
        },
        security: PUBLIC,
      },
    })),
  ];
}

const INFO_DESCRIPTION = `The REST API of svc, a durable job service for R analyses (see docs/api.md).

**Representations.** Answers that carry a representation are XML (\`application/vnd.svc+xml\`, the default, also for \`*/*\` or no Accept; or \`application/xml\`) or JSON (\`application/vnd.svc+json\` or \`application/json\`), chosen by \`Accept\` with q-values; nothing acceptable is a 406 with an XML error body. The XML elements are defined by rest-data.xsd (namespace \`${REST_TYPES_NAMESPACE}\`). The JSON follows Jettison's mapped convention: \`{"<element>": {…}}\`, attributes as keys, booleans and numbers as JSON primitives, everything else a string; **a repeated child element is an object when there is one and an array when there are two or more**, and an empty element is \`""\`. Routes that answer their own bytes (result data, logs, /process, health) ignore Accept; their errors use the negotiated format when Accept allows one, else XML.

**Errors.** Every 4xx/5xx answer has an \`error\` body (\`status\`, \`error\`, \`message\`), never a stack trace. Other methods on a known path: 405 with \`Allow\`. Unknown paths: 404. Every answer carries \`X-Request-Id\`.

**Links** are absolute: PUBLIC_BASE_URL, else the scheme and host of X-Forwarded-Proto/-Host or the request. Follow them; do not build them.

**Authentication** depends on AUTH_MODE: none (jobs and results open to all), or any of basic, apiKey (\`X-SVC-API-Key\` or \`Authorization: Bearer <keyId>.<secret>\`) and oidc (\`Authorization: Bearer <access token>\` from the OpenID Connect provider, the openIdConnect scheme). The admin API always needs an admin. Results and job states of an application the caller may not see are 404, as for a job that does not exist.`;

/** Builds the OpenAPI 3.1 document of the REST API. */
export function buildOpenApiDocument(options: OpenApiDocumentOptions): OpenApiDocument {
  const responses = new Responses(options.baseUrl);
  const paths: OpenApiDocument['paths'] = {};
  const sharedResponses = responses.shared();
  // Every answer carries X-Request-Id; a shared response gets it once, in components.
  const withRequestId = (response: ResponseObject | Reference): void => {
    if (!('$ref' in response)) {
      response.headers = {
        'X-Request-Id': componentRef('headers', 'XRequestId'),
        ...response.headers,
      };
    }
  };
  Object.values(sharedResponses).forEach(withRequestId);
  for (const { method, path, operation } of operations(responses, options)) {
    Object.values(operation.responses).forEach(withRequestId);
    paths[path] = { ...paths[path], [method]: operation };
  }
  const xsdUrl = `${options.baseUrl}/svc/wsdl/rest-data.xsd`;
  return {
    openapi: '3.1.0',
    info: { title: 'svc REST API', version: options.version, description: INFO_DESCRIPTION },
    externalDocs: { description: 'rest-data.xsd: the XML representations', url: xsdUrl },
    servers: [{ url: `${options.baseUrl}${REST_PREFIX}`, description: 'This service' }],
    tags: [
      { name: 'jobs', description: 'Submit, follow and cancel jobs' },
      { name: 'results', description: 'Results and their data' },
      { name: 'functions', description: 'Function calls answered at once' },
      {
        name: 'admin',
        description: 'The catalog, R packages, schedules and the configuration (admins)',
      },
      { name: 'system', description: 'Health and node information (public)' },
      { name: 'openapi', description: 'This description' },
    ],
    paths,
    components: {
      schemas: {
        ...representationSchemas(xsdUrl),
        ...SCHEDULE_SCHEMAS,
        HealthUp: {
          type: 'object',
          properties: { status: { const: 'up' } },
          required: ['status'],
          additionalProperties: false,
        },
        HealthDown: {
          type: 'object',
          properties: { status: { const: 'down' }, reason: { type: 'string' } },
          required: ['status', 'reason'],
          additionalProperties: false,
        },
      },
      responses: sharedResponses,
      parameters: {
        app: {
          name: 'app',
          in: 'path',
          required: true,
          description:
            'The application: ASCII letters, digits and underscores, 1 to 64 (else 400).',
          schema: { type: 'string', pattern: APPLICATION_NAME_PATTERN },
          example: 'demo',
        },
        jobId: {
          name: 'jobId',
          in: 'path',
          required: true,
          description: 'The job id, a UUID (else 400).',
          schema: { type: 'string', format: 'uuid' },
        },
        applicationNameHeader: applicationHeader(true, 'The application; required, once.'),
        section: {
          name: 'section',
          in: 'path',
          required: true,
          description: 'The catalog section (else 400).',
          schema: {
            enum: [
              'R_SCRIPTS',
              'SWEAVE_FILES',
              'JOB_CONFIGURATIONS',
              'R_FUNCTIONS',
              'EMAIL_REPLIES',
            ],
          },
        },
        packageName: {
          name: 'name',
          in: 'path',
          required: true,
          description:
            'The R package name: letters, digits and dots, a letter first, not a dot last, 2 to 128 characters (else 400).',
          schema: { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9.]*[A-Za-z0-9]$', maxLength: 128 },
          example: 'mytools',
        },
        file: {
          name: 'file',
          in: 'path',
          required: true,
          description:
            'A plain file name, 1 to 255 characters: no `/` or `\\` (also percent-encoded), `..` or control characters (else 400).',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
          example: 'summary.R',
        },
      },
      headers: {
        XRequestId: {
          description:
            "The request's id in the logs: the caller's X-Request-Id when plain, else a new one.",
          schema: { type: 'string' },
        },
        RetryAfter: {
          description: 'Seconds to wait before trying again.',
          schema: { type: 'integer' },
        },
        WWWAuthenticate: {
          description:
            'The challenge: `Basic realm="svc", charset="UTF-8"` or `Bearer realm="svc"`.',
          schema: { type: 'string' },
        },
        ResultLocation: {
          description: "The result's URI (resultUri).",
          schema: { type: 'string', format: 'uri' },
        },
        CatalogFileLocation: {
          description: "The new file's dataUri.",
          schema: { type: 'string', format: 'uri' },
        },
        PackageLocation: {
          description: "The package's URI (PUT and DELETE it there).",
          schema: { type: 'string', format: 'uri' },
        },
        ETag: {
          description: 'A strong ETag: the SHA-256 of the data, quoted.',
          schema: { type: 'string' },
        },
        ContentLength: { description: 'Bytes in the body.', schema: { type: 'integer' } },
        ContentRange: {
          description: '`bytes <first>-<last>/<size>`, or `bytes */<size>` on a 416.',
          schema: { type: 'string' },
        },
        ContentDisposition: {
          description: '`attachment; filename="<jobId>.<type>"`.',
          schema: { type: 'string' },
        },
        AcceptRanges: { description: '`bytes`.', schema: { const: 'bytes' } },
      },
      securitySchemes: {
        basic: { type: 'http', scheme: 'basic', description: 'AUTH_MODE=basic users; ADMIN_USER.' },
        apiKey: {
          type: 'apiKey',
          in: 'header',
          name: 'X-SVC-API-Key',
          description: 'AUTH_MODE=apiKey: `<keyId>.<secret>`.',
        },
        bearerApiKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: '<keyId>.<secret>',
          description: 'AUTH_MODE=apiKey: the API key as a bearer token.',
        },
        ...(options.oidcIssuer
          ? {
              openIdConnect: {
                type: 'openIdConnect' as const,
                openIdConnectUrl: `${options.oidcIssuer.replace(/\/$/, '')}/.well-known/openid-configuration`,
                description:
                  "AUTH_MODE=oidc: an access token (JWT) of this issuer for the API's audience, as `Authorization: Bearer <token>`; roles from its claims (docs/security.md).",
              },
            }
          : {}),
      },
    },
  };
}
