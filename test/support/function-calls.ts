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

/**
 * R functions that probe the isolation of applications: payload `leave` leaves every kind of
 * state an application can leave in R behind (a global variable and function, an option, an
 * environment variable, a loaded namespace, files in the working and temp directories) and
 * answers the files' paths, one per line; `look <paths>` answers, comma-separated, which of it
 * the calling session sees ("" when none).
 */
export const LEAVING_FUNCTIONS = `
svcJsonService <- function(payload) {
  if (payload == "leave") {
    assign("leaked", "A", envir = globalenv())
    assign("svcLeak", function() "A", envir = globalenv())
    options(svc.leak = "A")
    Sys.setenv(SVC_LEAK = "A")
    loadNamespace("splines")
    writeLines("A", "leak.txt")
    writeLines("A", file.path(tempdir(), "leak.txt"))
    writeLines("A", file.path(Sys.getenv("TMPDIR"), "leak.txt"))
    return(paste(c(file.path(getwd(), "leak.txt"), file.path(tempdir(), "leak.txt"),
                   file.path(Sys.getenv("TMPDIR"), "leak.txt")), collapse = "\n"))
  }
  paths <- strsplit(sub("^look ", "", payload), "\n")[[1L]]
  seen <- c(
    global = exists("leaked", envir = globalenv()),
    fun = exists("svcLeak", envir = globalenv()),
    option = !is.null(getOption("svc.leak")),
    env = nzchar(Sys.getenv("SVC_LEAK")),
    namespace = "splines" %in% loadedNamespaces(),
    cwdFile = file.exists("leak.txt"),
    files = any(file.exists(paths)))
  paste(names(seen)[seen], collapse = ",")
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
