import { REST_TYPES_NAMESPACE } from '../common/representation/rest-representation';
import type { JsonSchema } from './openapi-objects';

/**
 * The representations of `wsdl/rest-data.xsd` as OpenAPI schemas: the XML elements by reference
 * to the XSD (which stays the one definition of the XML), and their Jettison-style JSON forms as
 * JSON Schemas, written after `rest-representation.ts`, which renders both from one tree.
 */

/** The XSD element of each representation the REST API answers with. */
export const REPRESENTATION_ELEMENTS = {
  JobToken: 'jobToken',
  JobStatus: 'jobStatus',
  Result: 'result',
  Results: 'results',
  Error: 'error',
  ErrorResult: 'errorResult',
  NodeInformation: 'nodeInformation',
  Catalog: 'catalog',
  UsageStatistics: 'usageStatistics',
  Packages: 'packages',
} as const;

export type RepresentationName = keyof typeof REPRESENTATION_ELEMENTS;

export const xmlSchemaName = (name: RepresentationName): string => `${name}Xml`;
export const jsonSchemaName = (name: RepresentationName): string => `${name}Json`;
export const schemaRef = (schemaName: string): { $ref: string } => ({
  $ref: `#/components/schemas/${schemaName}`,
});

const UUID = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
export const APPLICATION_NAME_PATTERN = '^[A-Za-z0-9_]{1,64}$';

const jobId: JsonSchema = { type: 'string', pattern: UUID, description: 'A UUID.' };
const applicationName: JsonSchema = { type: 'string', pattern: APPLICATION_NAME_PATTERN };
const time: JsonSchema = {
  type: 'string',
  format: 'date-time',
  description: 'ISO 8601 UTC with milliseconds.',
};
const uri: JsonSchema = { type: 'string', format: 'uri', description: 'An absolute link.' };

/** An element whose attributes are all given: a JSON object with exactly those keys. */
function attributes(properties: Record<string, JsonSchema>, optional: string[] = []): JsonSchema {
  return {
    type: 'object',
    properties,
    required: Object.keys(properties).filter((key) => !optional.includes(key)),
    additionalProperties: false,
  };
}

/** Jettison's repeated children: one is an object, two or more an array. */
function oneOrMore(item: JsonSchema): JsonSchema {
  return {
    oneOf: [item, { type: 'array', items: item, minItems: 2 }],
    description: 'One element is an object, not an array; two or more are an array.',
  };
}

/** Jettison's empty element: the empty string. */
const EMPTY_ELEMENT: JsonSchema = { const: '', description: 'The element has no content.' };

/** The content of each element in JSON (what sits under the element's name). */
const ELEMENT_CONTENT: Record<string, JsonSchema> = {
  JobToken: attributes({
    jobId,
    applicationName,
    submissionTime: time,
    applicationResultsUri: uri,
    resultUri: uri,
  }),
  Result: attributes({
    jobId,
    applicationName,
    resultTime: time,
    success: { type: 'boolean' },
    type: { type: 'string', description: "The data's extension: zip, txt, xml, json, ..." },
    selfUri: uri,
    dataUri: { ...uri, description: 'Ends with {jobId}.{type}.' },
  }),
  Progress: attributes({
    fraction: { type: 'number', minimum: 0, maximum: 1 },
    message: { type: 'string', description: 'Empty when svc_progress was given none.' },
  }),
  Cancellation: attributes({
    by: { type: 'string', description: 'The principal, or "anonymous".' },
    time,
  }),
  Callback: attributes(
    {
      state: { enum: ['pending', 'delivered', 'failed'] },
      attempts: { type: 'integer', minimum: 0 },
      lastHttpStatus: { type: 'integer', description: "The receiver's last answer, if any." },
      lastError: { type: 'string', description: 'Why the last attempt failed, if it did.' },
      lastAttemptTime: time,
      deliveryTime: { ...time, description: 'When a receiver answered 2xx.' },
    },
    ['lastHttpStatus', 'lastError', 'lastAttemptTime', 'deliveryTime'],
  ),
  JobStatus: attributes(
    {
      jobId,
      applicationName,
      state: { enum: ['QUEUED', 'RUNNING', 'DONE'] },
      submissionTime: time,
      startTime: { ...time, description: 'Absent until a worker first claims the job.' },
      finishTime: { ...time, description: 'Absent until the job is DONE.' },
      attempts: { type: 'integer', minimum: 0 },
      resultUri: uri,
      progress: {
        ...schemaRef('Progress'),
        description: 'The last report of svc_progress(fraction, message), once there was one.',
      },
      cancellation: { ...schemaRef('Cancellation'), description: 'Only on a cancelled job.' },
      callback: {
        ...schemaRef('Callback'),
        description: 'Only on a job that named a callback URL: how its delivery stands.',
      },
    },
    ['startTime', 'finishTime', 'progress', 'cancellation', 'callback'],
  ),
  Error: attributes({
    status: { type: 'integer', minimum: 400, maximum: 599 },
    error: { type: 'string', description: 'The reason phrase, e.g. "Bad Request".' },
    message: { type: 'string', description: 'What went wrong, for a person.' },
  }),
  ErrorResult: attributes({
    jobId,
    applicationName,
    submissionTime: time,
    errorMessage: { type: 'string' },
  }),
  NodeInformation: attributes({
    name: { type: 'string', description: 'Host and process id.' },
    healthy: { type: 'boolean' },
    uptime: { type: 'integer', description: 'Milliseconds.' },
    uptimeText: { type: 'string' },
    serverInfo: { type: 'string' },
    version: { type: 'string' },
    rEngine: { enum: ['native', 'webr'] },
    rVersion: { type: 'string' },
    rSandbox: { enum: ['bwrap', 'none', 'webassembly'] },
    maxMemory: { type: 'integer', description: "The host's memory in bytes." },
    freeMemory: { type: 'integer', description: 'Bytes.' },
    osLoadAverage: { type: 'number', description: '1-minute load average.' },
  }),
  UsageMonth: attributes(
    {
      application: applicationName,
      month: { type: 'string', pattern: '^[0-9]{4}-(0[1-9]|1[0-2])$', description: 'UTC.' },
      submitted: { type: 'integer', minimum: 0, description: 'Jobs submitted in the month.' },
      succeeded: { type: 'integer', minimum: 0, description: 'Jobs that ended in the month.' },
      failed: { type: 'integer', minimum: 0 },
      cancelled: { type: 'integer', minimum: 0 },
      runTimeTotalMs: { type: 'integer', minimum: 0, description: 'Start to end.' },
      runTimeP50Ms: { type: 'integer', minimum: 0, description: 'Absent if none had started.' },
      runTimeP95Ms: { type: 'integer', minimum: 0, description: 'Absent if none had started.' },
      waitTimeP50Ms: {
        type: 'integer',
        minimum: 0,
        description:
          'Submission to start of the jobs that ended in the month; absent if none had started.',
      },
      waitTimeP95Ms: { type: 'integer', minimum: 0, description: 'Absent if none had started.' },
      rCpuTotalMs: { type: 'integer', minimum: 0 },
      rCpuJobs: { type: 'integer', minimum: 0, description: 'Jobs whose R CPU was measured.' },
      bytesIn: { type: 'integer', minimum: 0 },
      bytesOut: { type: 'integer', minimum: 0 },
    },
    ['runTimeP50Ms', 'runTimeP95Ms', 'waitTimeP50Ms', 'waitTimeP95Ms'],
  ),
  CatalogFile: attributes({ name: { type: 'string' }, dataUri: uri }),
  CatalogDirectory: attributes(
    {
      type: {
        enum: ['R_SCRIPTS', 'SWEAVE_FILES', 'JOB_CONFIGURATIONS', 'R_FUNCTIONS', 'EMAIL_REPLIES'],
      },
      file: oneOrMore(schemaRef('CatalogFile')),
    },
    ['file'],
  ),
  PackageNode: attributes(
    {
      name: { type: 'string', description: "The worker node's id (host:pid:random)." },
      state: {
        enum: ['installed', 'failed', 'unsupported', 'pending'],
        description: 'pending: the node has not taken this upload yet.',
      },
      reportedTime: time,
      output: {
        type: 'string',
        description: "R's output when the install failed; why, when unsupported (webR).",
      },
    },
    ['output'],
  ),
  Package: attributes(
    {
      name: { type: 'string', description: "DESCRIPTION's Package." },
      applicationName,
      version: { type: 'string', description: "DESCRIPTION's Version." },
      sha256: { type: 'string', description: 'SHA-256 of the uploaded archive, hex.' },
      installedBy: { type: 'string', description: 'The principal, or "anonymous".' },
      installedTime: time,
      node: oneOrMore(schemaRef('PackageNode')),
    },
    ['node'],
  ),
};

/** The body of each representation in JSON: one key, the element's name. */
function jsonDocument(name: RepresentationName, content: JsonSchema): JsonSchema {
  const element = REPRESENTATION_ELEMENTS[name];
  return {
    type: 'object',
    properties: { [element]: content },
    required: [element],
    additionalProperties: false,
    description: `The \`${element}\` element in Jettison's mapped JSON.`,
  };
}

const JSON_DOCUMENTS: Record<RepresentationName, JsonSchema> = {
  JobToken: jsonDocument('JobToken', schemaRef('JobToken')),
  JobStatus: jsonDocument('JobStatus', schemaRef('JobStatus')),
  Result: jsonDocument('Result', schemaRef('Result')),
  Results: jsonDocument('Results', {
    oneOf: [
      EMPTY_ELEMENT,
      {
        type: 'object',
        properties: { result: oneOrMore(schemaRef('Result')) },
        required: ['result'],
        additionalProperties: false,
      },
    ],
  }),
  Error: jsonDocument('Error', schemaRef('Error')),
  // A failed JSON function call answers the flat object, not wrapped in its element.
  ErrorResult: {
    ...schemaRef('ErrorResult'),
    description: 'The errorResult element flat, without the element name around it.',
  },
  NodeInformation: jsonDocument('NodeInformation', schemaRef('NodeInformation')),
  UsageStatistics: jsonDocument('UsageStatistics', {
    type: 'object',
    properties: {
      from: { type: 'string', description: 'YYYY-MM, inclusive.' },
      to: { type: 'string', description: 'YYYY-MM, inclusive.' },
      usage: oneOrMore(schemaRef('UsageMonth')),
    },
    required: ['from', 'to'],
    additionalProperties: false,
  }),
  Catalog: jsonDocument('Catalog', {
    oneOf: [
      EMPTY_ELEMENT,
      {
        type: 'object',
        properties: { directory: oneOrMore(schemaRef('CatalogDirectory')) },
        required: ['directory'],
        additionalProperties: false,
      },
    ],
  }),
  Packages: jsonDocument('Packages', {
    oneOf: [
      EMPTY_ELEMENT,
      {
        type: 'object',
        properties: { package: oneOrMore(schemaRef('Package')) },
        required: ['package'],
        additionalProperties: false,
      },
    ],
  }),
};

/** An XML representation: the element of rest-data.xsd, which defines it. */
function xmlElement(name: RepresentationName, xsdUrl: string): JsonSchema {
  const element = REPRESENTATION_ELEMENTS[name];
  return {
    type: 'object',
    description: `The \`${element}\` element (namespace \`${REST_TYPES_NAMESPACE}\`), defined in rest-data.xsd.`,
    xml: { name: element, namespace: REST_TYPES_NAMESPACE },
    externalDocs: { description: `rest-data.xsd, element ${element}`, url: xsdUrl },
  };
}

/** Every schema of `components.schemas`: element contents, JSON bodies and XML elements. */
export function representationSchemas(xsdUrl: string): Record<string, JsonSchema> {
  const schemas: Record<string, JsonSchema> = { ...ELEMENT_CONTENT };
  for (const name of Object.keys(REPRESENTATION_ELEMENTS) as RepresentationName[]) {
    schemas[jsonSchemaName(name)] = JSON_DOCUMENTS[name];
    schemas[xmlSchemaName(name)] = xmlElement(name, xsdUrl);
  }
  return schemas;
}
