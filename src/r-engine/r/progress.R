# svc_progress(fraction, message): how R code in a job reports its progress (docs/api.md). One
# expression whose value is a list of two functions:
#   make(report): svc_progress itself, which checks its arguments and calls report(fraction,
#     message); how to report differs (a forked or spawned script prints, a warm session sends a
#     frame).
#   printed(fraction, message): reports by printing one marker line on stdout, which the service
#     takes out of the job's output (src/r-engine/job-progress.ts).
list(
  make = function(report) {
    force(report)  # evaluated now: what it was made from may be gone when a job calls it
    function(fraction, message = "") {
      if (!is.numeric(fraction) || length(fraction) != 1L || is.na(fraction) ||
            fraction < 0 || fraction > 1) {
        stop("svc_progress: fraction must be one number from 0 to 1", call. = FALSE)
      }
      message <- if (is.null(message)) "" else paste(as.character(message), collapse = " ")
      message <- substr(gsub("[[:cntrl:]]+", " ", enc2utf8(message)), 1L, 500L)
      report(as.numeric(fraction), message)
      invisible(NULL)
    }
  },
  printed = function(fraction, message) {
    cat("\036svc-progress ", format(fraction, digits = 6L), " ", message, "\n", sep = "")
    flush(stdout())
  }
)
