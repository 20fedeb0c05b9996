import { join } from 'node:path';
import { loadCatalogFolder } from '../../src/catalog/catalog-folder';
import { CatalogService } from '../../src/catalog/catalog.service';
import { FUNCTION_CALL_ENGINE, FunctionCallEngine } from '../../src/r-engine/function-call-engine';
import { Answer, REST, request } from './rest-client';
import { TestService, waitFor } from './test-service';

export const CATALOG_DIR = join(__dirname, '..', '..', 'catalog');

/**
 * R functions of the test application `calls`: svcJsonService answers by payload, so every
 * failure kind can be asked for; svcXmlService is missing on purpose.
 */
export const FAILURE_FUNCTIONS = `
svcJsonService <- function(payload) {
  switch(payload,
    "error" = stop("the analysis failed: ", "bad input"),
    "number" = 42,
    "two" = c("a", "b"),
    "sleep" = { Sys.sleep(30); "slept" },
    "quit" = quit(save = "no", status = 3),
    paste0("echo:", payload))
}
`;

/** Loads the repository's demo catalog (a server database starts empty) and the test application. */
export async function loadTestCatalog(service: TestService): Promise<void> {
  const catalog = service.app.get(CatalogService);
  await loadCatalogFolder(catalog, CATALOG_DIR);
  await catalog.putFile('calls', 'R_FUNCTIONS', 'calls.R', Buffer.from(FAILURE_FUNCTIONS));
}

export function functionCallEngine(service: TestService): FunctionCallEngine {
  return service.app.get<FunctionCallEngine>(FUNCTION_CALL_ENGINE);
}

export function post(
  service: TestService,
  path: 'jobs' | 'process',
  contentType: string,
  body: string | Buffer,
  headers: Record<string, string> = { 'X-SVC-Application-Name': 'demo' },
): Promise<Answer> {
  return request(`${service.url}${REST}/${path}`, {
    method: 'POST',
    headers: { 'Content-Type': contentType, ...headers },
    body,
  });
}

/** Waits until the engine reports a call running (so a concurrent request meets a busy engine). */
export async function waitUntilBusy(service: TestService): Promise<void> {
  await waitFor(
    () => Promise.resolve(functionCallEngine(service).stats().busy > 0),
    30000,
    'a busy engine',
  );
}
