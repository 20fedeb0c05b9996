/**
 * A flow as a request names it (docs/flows.md), checked before anything is stored: every step
 * well formed, names unique, every need a step of the flow, no cycle, at most FLOW_MAX_STEPS
 * steps. A refusal is a 400 that names the step. The steps come back in an order in which every
 * step follows the steps it needs: the order they are stored in.
 */
import { ApiError } from '../common/api-error';
import { R_FUNCTION_NAME } from '../r-engine/exported-functions';

/** The most steps a flow may have. */
export const FLOW_MAX_STEPS = 100;

/** The largest flow request: its JSON body, every step's arguments and files included. */
export const FLOW_MAX_BYTES = 4 * 1024 * 1024;

/** The most reruns a step may ask for. */
export const STEP_MAX_RETRIES = 10;

/**
 * A step's name: an R name without dots, so that it is the argument a function step receives and
 * the folder a script step finds, as it is.
 */
const STEP_NAME = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

/** What a step's failure does to the steps that need it. */
export const OnFailure = Object.freeze({
  /** They are cancelled (and theirs), and the flow fails: the default. */
  FAIL: 'fail',
  /** They run without its result, told so by its missing input. */
  CONTINUE: 'continue',
} as const);
export type OnFailure = (typeof OnFailure)[keyof typeof OnFailure];

interface StepCommon {
  name: string;
  needs: string[];
  onFailure: OnFailure;
  retries: number;
}

/** A call of an exported function with JSON arguments (src/functions/). */
export interface FunctionStep extends StepCommon {
  kind: 'function';
  function: string;
  /** The arguments' JSON text (an object), as given. */
  argumentsJson: string;
}

/** A script job: a catalog script (rScript) or a script among its files, with meta and files. */
export interface ScriptStep extends StepCommon {
  kind: 'script';
  meta: Record<string, string>;
  files: Array<{ name: string; content: Buffer }>;
}

export type FlowStep = FunctionStep | ScriptStep;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function refuse(step: string, problem: string): ApiError {
  return ApiError.badRequest(`step ${step}: ${problem}`);
}

const STEP_FIELDS = new Set([
  'name',
  'needs',
  'onFailure',
  'retries',
  'function',
  'arguments',
  'rScript',
  'meta',
  'files',
]);

function stepOf(value: unknown, index: number): FlowStep {
  const label = `#${index + 1}`;
  if (!isObject(value)) {
    throw refuse(label, 'a step is a JSON object.');
  }
  const name = value.name;
  if (typeof name !== 'string' || !STEP_NAME.test(name)) {
    throw refuse(
      label,
      'its "name" must be a letter then up to 63 letters, digits or underscores (it names an argument and a folder).',
    );
  }
  const named = `"${name}"`;
  for (const field of Object.keys(value)) {
    if (!STEP_FIELDS.has(field)) {
      throw refuse(named, `unknown field ${JSON.stringify(field.slice(0, 64))}.`);
    }
  }
  const needs = value.needs ?? [];
  if (!Array.isArray(needs) || !needs.every((need): need is string => typeof need === 'string')) {
    throw refuse(named, '"needs" must be a list of step names.');
  }
  if (new Set(needs).size !== needs.length) {
    throw refuse(named, 'a step is named in "needs" more than once.');
  }
  const onFailure = value.onFailure ?? OnFailure.FAIL;
  if (onFailure !== OnFailure.FAIL && onFailure !== OnFailure.CONTINUE) {
    throw refuse(named, '"onFailure" must be "fail" or "continue".');
  }
  const retries = value.retries ?? 0;
  if (
    typeof retries !== 'number' ||
    !Number.isInteger(retries) ||
    retries < 0 ||
    retries > STEP_MAX_RETRIES
  ) {
    throw refuse(named, `"retries" must be a whole number from 0 to ${STEP_MAX_RETRIES}.`);
  }
  const common: StepCommon = { name, needs, onFailure, retries };
  if (value.function !== undefined) {
    return functionStep(named, common, value);
  }
  if (value.rScript !== undefined || value.files !== undefined) {
    return scriptStep(named, common, value);
  }
  throw refuse(named, 'a step names an exported "function", or an "rScript" or "files" to run.');
}

function functionStep(
  named: string,
  common: StepCommon,
  value: Record<string, unknown>,
): FunctionStep {
  if (typeof value.function !== 'string' || !R_FUNCTION_NAME.test(value.function)) {
    throw refuse(named, '"function" must name an exported R function.');
  }
  if (value.rScript !== undefined || value.files !== undefined || value.meta !== undefined) {
    throw refuse(named, 'a function step has "arguments", not "rScript", "files" or "meta".');
  }
  const args = value.arguments ?? {};
  if (!isObject(args)) {
    throw refuse(named, '"arguments" must be a JSON object.');
  }
  for (const need of common.needs) {
    if (Object.hasOwn(args, need)) {
      throw refuse(named, `the argument "${need}" is the result of the step it needs.`);
    }
  }
  return {
    ...common,
    kind: 'function',
    function: value.function,
    argumentsJson: JSON.stringify(args),
  };
}

function scriptStep(named: string, common: StepCommon, value: Record<string, unknown>): ScriptStep {
  const meta: Record<string, string> = {};
  const givenMeta = value.meta ?? {};
  if (!isObject(givenMeta) || !Object.values(givenMeta).every((v) => typeof v === 'string')) {
    throw refuse(named, '"meta" must be an object of strings.');
  }
  Object.assign(meta, givenMeta);
  if (value.rScript !== undefined) {
    if (typeof value.rScript !== 'string' || value.rScript === '') {
      throw refuse(named, '"rScript" must name a catalog script.');
    }
    meta.rScript = value.rScript;
  }
  const givenFiles = value.files ?? {};
  if (!isObject(givenFiles) || !Object.values(givenFiles).every((v) => typeof v === 'string')) {
    throw refuse(named, '"files" must be an object of file names and their contents in base64.');
  }
  const files = Object.entries(givenFiles).map(([name, base64]) => {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(base64 as string)) {
      throw refuse(named, `the file ${JSON.stringify(name.slice(0, 64))} is not base64.`);
    }
    return { name, content: Buffer.from(base64 as string, 'base64') };
  });
  for (const file of files) {
    if (common.needs.includes(file.name)) {
      throw refuse(named, `the file "${file.name}" is the folder of the step it needs.`);
    }
  }
  return { ...common, kind: 'script', meta, files };
}

/**
 * The flow's steps from its JSON body, checked, in an order where each step follows its needs
 * (among steps free at once, the request's order).
 */
export function flowStepsOf(body: unknown): FlowStep[] {
  if (!isObject(body) || !Array.isArray(body.steps)) {
    throw ApiError.badRequest('A flow is a JSON object whose "steps" is a list of steps.');
  }
  if (Object.keys(body).some((key) => key !== 'steps')) {
    throw ApiError.badRequest('A flow has "steps" and nothing else.');
  }
  if (body.steps.length === 0) {
    throw ApiError.badRequest('A flow has at least one step.');
  }
  if (body.steps.length > FLOW_MAX_STEPS) {
    throw ApiError.badRequest(
      `A flow has at most ${FLOW_MAX_STEPS} steps; this one has ${body.steps.length}.`,
    );
  }
  const steps = body.steps.map(stepOf);
  const byName = new Map<string, FlowStep>();
  for (const step of steps) {
    if (byName.has(step.name)) {
      throw refuse(`"${step.name}"`, 'another step has the same name.');
    }
    byName.set(step.name, step);
  }
  for (const step of steps) {
    for (const need of step.needs) {
      const needed = byName.get(need);
      if (needed === undefined) {
        throw refuse(
          `"${step.name}"`,
          `it needs "${need.slice(0, 64)}", which is no step of the flow.`,
        );
      }
      if (step.kind === 'function' && needed.kind !== 'function') {
        throw refuse(
          `"${step.name}"`,
          `a function step takes JSON values: it cannot need the script step "${need}".`,
        );
      }
    }
  }
  return inNeedsOrder(steps);
}

/** Kahn's order: each step after its needs; a step left over is on a cycle, and is named. */
function inNeedsOrder(steps: FlowStep[]): FlowStep[] {
  const ordered: FlowStep[] = [];
  const placed = new Set<string>();
  let remaining = steps;
  while (remaining.length > 0) {
    const ready = remaining.filter((step) => step.needs.every((need) => placed.has(need)));
    if (ready.length === 0) {
      const onCycle = cycleStep(remaining);
      throw refuse(`"${onCycle}"`, 'its needs make a cycle: it needs itself through them.');
    }
    for (const step of ready) {
      placed.add(step.name);
      ordered.push(step);
    }
    remaining = remaining.filter((step) => !placed.has(step.name));
  }
  return ordered;
}

/** A step on a cycle among `remaining` (none of which can be placed): follow needs until one repeats. */
function cycleStep(remaining: FlowStep[]): string {
  const byName = new Map(remaining.map((step) => [step.name, step]));
  const seen = new Set<string>();
  let current = remaining[0];
  while (!seen.has(current.name)) {
    seen.add(current.name);
    const next = current.needs.map((need) => byName.get(need)).find((step) => step !== undefined);
    if (next === undefined) {
      break;
    }
    current = next;
  }
  return current.name;
}
