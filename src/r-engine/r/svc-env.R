# The svc environment: what the service gives all R code it runs, the same on every engine (a
# script job forked by the fork server or spawned, a function of R_FUNCTIONS in a warm session,
# either of them on webR). Every R program of the service that runs such code starts with it:
# fork-server.R, script-wrapper.R, session.R, and webR's evaluations (webr-evaluation.ts).
#
# One expression whose value is a function, attach_svc(report): it attaches to R's search path an
# environment named "svc" that holds svc_progress(fraction, message) (docs/api.md) and nothing
# else. svc_progress checks its arguments and calls report(fraction, message); by default it
# prints one marker line on stdout, which the service takes out of the job's output
# (src/r-engine/job-progress.ts); a warm session sends a frame instead.
function(report = NULL) {
  if (is.null(report)) {
    report <- function(fraction, message) {
      cat("\036svc-progress ", format(fraction, digits = 6L), " ", message, "\n", sep = "")
      flush(stdout())
    }
  }
  force(report)  # evaluated now: what it was made from may be gone when a job calls it
  svc_progress <- function(fraction, message = "") {
    if (!is.numeric(fraction) || length(fraction) != 1L || is.na(fraction) ||
          fraction < 0 || fraction > 1) {
      stop("svc_progress: fraction must be one number from 0 to 1", call. = FALSE)
    }
    message <- if (is.null(message)) "" else paste(as.character(message), collapse = " ")
    message <- substr(gsub("[[:cntrl:]]+", " ", enc2utf8(message)), 1L, 500L)
    report(as.numeric(fraction), message)
    invisible(NULL)
  }
  attach(list(svc_progress = svc_progress), name = "svc", warn.conflicts = FALSE)
  invisible(NULL)
}
