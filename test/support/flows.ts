/** What the flows' end-to-end specs share: the test application's functions and a client. */
import { ALICE } from './admin-auth';
import { Answer, REST, request, waitForResult } from './rest-client';
import { waitFor } from './test-service';

export const APP = 'flows';

/** The example's functions, a failing one and a slow one. */
export const FUNCTIONS = `
#' Prepares the data
#' @export
prepare <- function(n) list(n = n, values = seq_len(n))

#' Fits a model on the prepared data
#' @export
fit <- function(prep, k) list(k = k, estimate = k * mean(unlist(prep$values)))

#' One report from the fits it was given, naming those it was not
#' @export
report <- function(fit1, fit2, fit3) {
  given <- c(fit1 = !missing(fit1), fit2 = !missing(fit2), fit3 = !missing(fit3))
  estimates <- list()
  if (given[["fit1"]]) estimates$fit1 <- fit1$estimate
  if (given[["fit2"]]) estimates$fit2 <- fit2$estimate
  if (given[["fit3"]]) estimates$fit3 <- fit3$estimate
  list(estimates = estimates, missing = as.list(names(given)[!given]))
}

#' Never converges
#' @export
broken <- function(prep) stop("the fit did not converge")

#' Takes its time
#' @export
slow <- function(prep) { Sys.sleep(60); 1 }
`;

export const EXAMPLE = {
  steps: [
    { name: 'prep', function: 'prepare', arguments: { n: 100 } },
    { name: 'fit1', needs: ['prep'], function: 'fit', arguments: { k: 1 } },
    { name: 'fit2', needs: ['prep'], function: 'fit', arguments: { k: 2 } },
    { name: 'fit3', needs: ['prep'], function: 'fit', arguments: { k: 3 } },
    { name: 'report', needs: ['fit1', 'fit2', 'fit3'], function: 'report' },
  ],
};

export interface FlowStepAnswer {
  name: string;
  state: string;
  waiting: boolean;
  outcome?: string;
  jobId: string;
  resultUri: string;
  attempts: number;
}

export interface FlowAnswer {
  flowId: string;
  state: string;
  outcome?: string;
  decidedBy?: string;
  steps: FlowStepAnswer[];
}

export function postFlow(
  base: string,
  flow: unknown,
  headers: Record<string, string> = ALICE,
): Promise<Answer> {
  return request(`${base}${REST}/flows`, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      'X-SVC-Application-Name': APP,
      Accept: 'application/json',
      ...headers,
    },
    body: JSON.stringify(flow),
  });
}

export async function readFlow(location: string): Promise<FlowAnswer> {
  const answer = await request(location, { headers: { Accept: 'application/json', ...ALICE } });
  expect(answer.status).toBe(200);
  return JSON.parse(answer.text) as FlowAnswer;
}

/** The flow once it has ended. */
export function ended(location: string): Promise<FlowAnswer> {
  return waitFor(
    async () => {
      const flow = await readFlow(location);
      return flow.state === 'DONE' ? flow : null;
    },
    90_000,
    `the flow at ${location} to end`,
  );
}

export function step(flow: FlowAnswer, name: string): FlowStepAnswer {
  const found = flow.steps.find((s) => s.name === name);
  if (!found) {
    throw new Error(`no step ${name} in ${JSON.stringify(flow)}`);
  }
  return found;
}

/** A step's JSON value, read as any client reads a job's result. */
export async function valueOf(s: FlowStepAnswer): Promise<unknown> {
  const meta = await waitForResult(s.resultUri, {
    Accept: 'application/vnd.svc+json',
    ...ALICE,
  });
  const dataUri = (JSON.parse(meta.text) as { result: { dataUri: string } }).result.dataUri;
  return JSON.parse((await request(dataUri, { headers: ALICE })).text) as unknown;
}

export async function submitted(base: string, flow: unknown): Promise<string> {
  const answer = await postFlow(base, flow);
  expect([answer.status, answer.text]).toEqual([202, expect.any(String)]);
  const location = answer.headers.get('location') ?? '';
  expect(JSON.parse(answer.text)).toMatchObject({ flowUri: location, applicationName: APP });
  return location;
}
