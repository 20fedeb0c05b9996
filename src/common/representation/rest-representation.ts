import { create, fragment } from 'xmlbuilder2';
import type { XMLBuilder } from 'xmlbuilder2/lib/interfaces';

/**
 * The REST representations of SPEC §4, §8 and §9 in XML (`wsdl/rest-data.xsd`) and in the
 * Jettison "mapped" JSON that RSB's stack emitted. Both formats are rendered from one element
 * tree, so they cannot drift apart: attributes become plain keys, a text-only child becomes a
 * string, repeated children become an array only when there are two or more, and an element
 * with nothing in it becomes `""`.
 */

export const REST_TYPES_NAMESPACE = 'urn:svc:rest:types';

export type RestFormat = 'xml' | 'json';

export interface JobTokenView {
  jobId: string;
  applicationName: string;
  submissionTime: Date;
  applicationResultsUri: string;
  resultUri: string;
}

export interface ResultView {
  jobId: string;
  applicationName: string;
  resultTime: Date;
  success: boolean;
  /** The data's extension: zip, xml, json, txt, ... */
  type: string;
  selfUri: string;
  dataUri: string;
}

export interface ErrorView {
  status: number;
  /** Short reason, e.g. "Bad Request". */
  error: string;
  message: string;
}

export interface JobStatusView {
  jobId: string;
  applicationName: string;
  state: 'QUEUED' | 'RUNNING' | 'DONE';
  submissionTime: Date;
  startTime?: Date | null;
  finishTime?: Date | null;
  attempts: number;
  resultUri: string;
  /** Set when the job was cancelled: who (principal or "anonymous") and when. */
  cancellation?: { by: string; time: Date } | null;
  /** The last progress its R code reported with svc_progress. */
  progress?: { fraction: number; message: string } | null;
  /** Set when the job named a callback URL: how its delivery stands. */
  callback?: CallbackStatusView | null;
}

export interface CallbackStatusView {
  state: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  lastAttemptTime: Date | null;
  deliveryTime: Date | null;
}

export interface ErrorResultView {
  jobId: string;
  applicationName: string;
  submissionTime: Date;
  errorMessage: string;
}

export interface NodeInformationView {
  name: string;
  healthy: boolean;
  /** Milliseconds. */
  uptime: number;
  uptimeText: string;
  serverInfo: string;
  version: string;
  rEngine: 'native' | 'webr';
  rVersion: string;
  /** What isolates R code on this node: bwrap, none, or webassembly (webR). */
  rSandbox: 'bwrap' | 'none' | 'webassembly';
  /** Bytes. */
  maxMemory: number;
  /** Bytes. */
  freeMemory: number;
  osLoadAverage: number;
}

/** One application's usage in one calendar month (UTC); see docs/api.md for each figure. */
export interface UsageMonthView {
  application: string;
  /** YYYY-MM. */
  month: string;
  submitted: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  runTimeTotalMs: number;
  runTimeP50Ms: number | null;
  runTimeP95Ms: number | null;
  /** Submission to start of the jobs that finished in the month (null: none had started). */
  waitTimeP50Ms: number | null;
  waitTimeP95Ms: number | null;
  rCpuTotalMs: number;
  rCpuJobs: number;
  bytesIn: number;
  bytesOut: number;
}

/** GET /admin/statistics: one entry per application and month (UTC), oldest month first. */
export interface UsageStatisticsView {
  /** YYYY-MM, inclusive. */
  from: string;
  to: string;
  months: UsageMonthView[];
}

export interface CatalogView {
  directories: { type: string; files: { name: string; dataUri: string }[] }[];
}

/** One node's install of a package (GET /admin/packages). */
export interface PackageNodeView {
  node: string;
  /** pending: the node has not reported on this upload yet. */
  state: 'installed' | 'failed' | 'unsupported' | 'pending';
  reportedTime: Date;
  /** R's output when the install failed; why, when unsupported. */
  output: string | null;
}

/** An application's R package as uploaded, and what each worker node made of it. */
export interface PackageView {
  applicationName: string;
  name: string;
  version: string;
  sha256: string;
  installedBy: string;
  installedTime: Date;
  nodes: PackageNodeView[];
}

export type RestRepresentation =
  | { element: 'jobToken'; value: JobTokenView }
  | { element: 'result'; value: ResultView }
  | { element: 'results'; value: ResultView[] }
  | { element: 'error'; value: ErrorView }
  | { element: 'jobStatus'; value: JobStatusView }
  | { element: 'errorResult'; value: ErrorResultView }
  | { element: 'nodeInformation'; value: NodeInformationView }
  | { element: 'catalog'; value: CatalogView }
  | { element: 'usageStatistics'; value: UsageStatisticsView }
  | { element: 'packages'; value: PackageView[] };

type AttributeValue = string | number | boolean | Date | null | undefined;

/** An element: attributes, then either text or child elements (never both, per the XSD). */
interface Node {
  name: string;
  attributes: Record<string, AttributeValue>;
  children?: Node[];
  text?: string;
}

type JsonValue = string | number | boolean | JsonValue[] | { [key: string]: JsonValue };

export function renderRepresentation(rep: RestRepresentation, format: RestFormat): string {
  const node = toNode(rep);
  return format === 'xml' ? renderXmlDocument(node) : JSON.stringify({ [node.name]: toJson(node) });
}

/** The flat JSON body of a failed JSON function call (SPEC §5.2), not wrapped in an element. */
export function renderErrorResultJson(view: ErrorResultView): string {
  return JSON.stringify(toJson(errorResultNode(view)));
}

/**
 * Writes a `results` element item by item, so that a long listing is never held in memory.
 * Its output equals `renderRepresentation({ element: 'results', ... })` for the same items.
 * Nothing is written until the first `add` or `end`: a caller whose first read fails can
 * still answer with an error status instead of a half-sent 200.
 */
export class ResultsStreamWriter {
  private count = 0;
  /** JSON only: the first item, held until we know whether it stands alone or opens an array. */
  private firstJson: string | null = null;
  private ended = false;

  constructor(
    private readonly format: RestFormat,
    private readonly write: (chunk: string) => void,
  ) {}

  add(view: ResultView): void {
    if (this.ended) {
      throw new Error('ResultsStreamWriter: add() after end()');
    }
    const node = resultNode(view);
    if (this.format === 'xml') {
      // Serialised without a namespace: inside the namespaced root it inherits the default one.
      const item = renderXmlFragment(node);
      this.write(this.count === 0 ? `${XML_RESULTS_OPEN}>${item}` : item);
    } else {
      const item = JSON.stringify(toJson(node));
      if (this.count === 0) {
        this.write('{"results":{"result":');
        this.firstJson = item;
      } else if (this.count === 1) {
        this.write(`[${this.firstJson ?? ''},${item}`);
        this.firstJson = null;
      } else {
        this.write(`,${item}`);
      }
    }
    this.count++;
  }

  end(): void {
    if (this.ended) {
      throw new Error('ResultsStreamWriter: end() called twice');
    }
    this.ended = true;
    if (this.format === 'xml') {
      this.write(this.count === 0 ? `${XML_RESULTS_OPEN}/>` : '</results>');
    } else if (this.count === 0) {
      this.write('{"results":""}');
    } else if (this.count === 1) {
      this.write(`${this.firstJson ?? ''}}}`);
      this.firstJson = null;
    } else {
      this.write(']}}');
    }
  }
}

const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>';
/** What xmlbuilder2 writes before the `>` or `/>` of the root; the stream test pins this. */
const XML_RESULTS_OPEN = `${XML_DECLARATION}<results xmlns="${REST_TYPES_NAMESPACE}"`;

function toNode(rep: RestRepresentation): Node {
  switch (rep.element) {
    case 'jobToken': {
      const v = rep.value;
      return {
        name: 'jobToken',
        attributes: {
          jobId: v.jobId,
          applicationName: v.applicationName,
          submissionTime: v.submissionTime,
          applicationResultsUri: v.applicationResultsUri,
          resultUri: v.resultUri,
        },
      };
    }
    case 'result':
      return resultNode(rep.value);
    case 'results':
      return { name: 'results', attributes: {}, children: rep.value.map(resultNode) };
    case 'error': {
      const v = rep.value;
      return {
        name: 'error',
        attributes: { status: v.status, error: v.error },
        children: [{ name: 'message', attributes: {}, text: v.message }],
      };
    }
    case 'jobStatus': {
      const v = rep.value;
      return {
        name: 'jobStatus',
        attributes: {
          jobId: v.jobId,
          applicationName: v.applicationName,
          state: v.state,
          submissionTime: v.submissionTime,
          startTime: v.startTime,
          finishTime: v.finishTime,
          attempts: v.attempts,
          resultUri: v.resultUri,
        },
        children: [
          ...(v.progress
            ? [
                {
                  name: 'progress',
                  attributes: { fraction: v.progress.fraction, message: v.progress.message },
                },
              ]
            : []),
          ...(v.cancellation
            ? [
                {
                  name: 'cancellation',
                  attributes: { by: v.cancellation.by, time: v.cancellation.time },
                },
              ]
            : []),
          ...(v.callback
            ? [
                {
                  name: 'callback',
                  attributes: {
                    state: v.callback.state,
                    attempts: v.callback.attempts,
                    lastHttpStatus: v.callback.lastHttpStatus,
                    lastError: v.callback.lastError,
                    lastAttemptTime: v.callback.lastAttemptTime,
                    deliveryTime: v.callback.deliveryTime,
                  },
                },
              ]
            : []),
        ],
      };
    }
    case 'errorResult':
      return errorResultNode(rep.value);
    case 'nodeInformation': {
      const v = rep.value;
      return {
        name: 'nodeInformation',
        attributes: {
          name: v.name,
          healthy: v.healthy,
          // xs:long: a fractional count (process.uptime() * 1000) would make the XML invalid.
          uptime: Math.trunc(v.uptime),
          uptimeText: v.uptimeText,
          serverInfo: v.serverInfo,
          version: v.version,
          rEngine: v.rEngine,
          rVersion: v.rVersion,
          rSandbox: v.rSandbox,
          maxMemory: Math.trunc(v.maxMemory),
          freeMemory: Math.trunc(v.freeMemory),
          osLoadAverage: v.osLoadAverage,
        },
      };
    }
    case 'usageStatistics':
      return {
        name: 'usageStatistics',
        attributes: { from: rep.value.from, to: rep.value.to },
        // A month without started jobs has no run time percentiles: the attributes are left out.
        children: rep.value.months.map((usage) => ({ name: 'usage', attributes: { ...usage } })),
      };
    case 'packages':
      return {
        name: 'packages',
        attributes: {},
        children: rep.value.map((pkg) => ({
          name: 'package',
          attributes: {
            name: pkg.name,
            applicationName: pkg.applicationName,
            version: pkg.version,
            sha256: pkg.sha256,
            installedBy: pkg.installedBy,
            installedTime: pkg.installedTime,
          },
          children: pkg.nodes.map((node) => ({
            name: 'node',
            attributes: { name: node.node, state: node.state, reportedTime: node.reportedTime },
            children:
              node.output === null ? [] : [{ name: 'output', attributes: {}, text: node.output }],
          })),
        })),
      };
    case 'catalog':
      return {
        name: 'catalog',
        attributes: {},
        children: rep.value.directories.map((directory) => ({
          name: 'directory',
          attributes: { type: directory.type },
          children: directory.files.map((file) => ({
            name: 'file',
            attributes: { name: file.name, dataUri: file.dataUri },
          })),
        })),
      };
  }
}

function resultNode(v: ResultView): Node {
  return {
    name: 'result',
    attributes: {
      jobId: v.jobId,
      applicationName: v.applicationName,
      resultTime: v.resultTime,
      success: v.success,
      type: v.type,
      selfUri: v.selfUri,
      dataUri: v.dataUri,
    },
  };
}

function errorResultNode(v: ErrorResultView): Node {
  return {
    name: 'errorResult',
    attributes: {
      jobId: v.jobId,
      applicationName: v.applicationName,
      submissionTime: v.submissionTime,
    },
    children: [{ name: 'errorMessage', attributes: {}, text: v.errorMessage }],
  };
}

// ---- XML ----

function renderXmlDocument(node: Node): string {
  const doc = create({ version: '1.0', encoding: 'UTF-8' });
  appendXml(doc.ele(REST_TYPES_NAMESPACE, node.name), node);
  return doc.end();
}

function renderXmlFragment(node: Node): string {
  const frag = fragment();
  appendXml(frag.ele(node.name), node);
  return frag.end();
}

/** Fills `element` (already created for `node`); children inherit its namespace. */
function appendXml(element: XMLBuilder, node: Node): void {
  for (const [key, value] of Object.entries(node.attributes)) {
    if (value !== null && value !== undefined) {
      element.att(key, xmlSafe(attributeText(value)));
    }
  }
  if (node.text !== undefined) {
    element.txt(xmlSafe(node.text));
  }
  for (const child of node.children ?? []) {
    appendXml(element.ele(child.name), child);
  }
}

function attributeText(value: string | number | boolean | Date): string {
  return value instanceof Date ? value.toISOString() : String(value);
}

/**
 * Characters XML 1.0 cannot carry at all (control characters, lone surrogates) become U+FFFD.
 * R error messages can contain them, and xmlbuilder2 would otherwise emit a document no
 * parser accepts.
 */
function xmlSafe(text: string): string {
  return text.replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, '\uFFFD');
}

// ---- JSON (Jettison "mapped") ----

function toJson(node: Node): JsonValue {
  const attributes = Object.entries(node.attributes).filter(
    (entry): entry is [string, string | number | boolean | Date] =>
      entry[1] !== null && entry[1] !== undefined,
  );
  const children = node.children ?? [];
  if (attributes.length === 0 && children.length === 0) {
    return node.text ?? '';
  }
  const object: { [key: string]: JsonValue } = {};
  for (const [key, value] of attributes) {
    object[key] = value instanceof Date ? value.toISOString() : value;
  }
  // Same-named children collapse into one key: a single child is an object, several an array.
  const groups = new Map<string, JsonValue[]>();
  for (const child of children) {
    const group = groups.get(child.name) ?? [];
    group.push(toJson(child));
    groups.set(child.name, group);
  }
  for (const [name, values] of groups) {
    object[name] = values.length === 1 ? values[0] : values;
  }
  return object;
}
