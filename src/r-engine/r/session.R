# A warm R session of the function-call pool (src/r-engine/sessions/r-session.ts).
#
# Needs no network: requests arrive on stdin, answers go to a FIFO in the session's directory
# (first argument), opened once. The protocol runs on those two pipes only; R's own console
# output (print, cat, message, warnings, and whatever C code or a child process writes) stays on
# stdout and stderr, which the service logs. Frames are described in r-session-frame.ts; the call
# itself is call-function.R (second argument), the svc environment svc-env.R (third); the fourth is the
# largest answer in bytes (MAX_REQUEST_BYTES). The application's code can reach the FIFO too
# (by its name): the service bounds and checks every frame it reads from it.
#
# Hello:    "hello", pid, once the FIFO is open.
# Request:  "call" (or "json": an exported function, JSON arguments in and JSON out), app,
#           function name, payload, reload ("1" or "0"), the application's package
#           library ("" for none; put first on .libPaths() with the first call), then name/content
#           pairs of the application's R_FUNCTIONS files when reload is "1".
# Answers:  "started" as soon as a whole request has been read (before any application code
#           runs: a session that dies before it is seen never ran the call), then any number
#           of "progress", fraction, message (svc_progress in the function), then
#           "ok", value  or  "fail", reason, message. Each frame is written with one call.
#
# A session belongs to the first application it serves (the pool never sends it another one,
# and it refuses one anyway): what a call leaves behind (globals, options, environment
# variables, loaded packages, files) is only ever seen by calls of the same application.
local({
  con <- file("stdin", "rb")
  answers <- file(commandArgs(trailingOnly = TRUE)[[1L]], "wb", raw = TRUE)
  owner <- NULL
  held <- NULL

  read_exactly <- function(n) {
    out <- raw(0L)
    while (length(out) < n) {
      chunk <- readBin(con, "raw", n - length(out))
      if (length(chunk) == 0L) {
        quit(save = "no", status = 0L)  # the service closed stdin
      }
      out <- c(out, chunk)
    }
    out
  }
  u32 <- function(bytes) {
    sum(as.numeric(bytes) * c(16777216, 65536, 256, 1))
  }
  u32_bytes <- function(n) {
    as.raw(c(n %/% 16777216, (n %/% 65536) %% 256, (n %/% 256) %% 256, n %% 256))
  }
  read_message <- function() {
    body <- read_exactly(u32(read_exactly(4L)))
    fields <- character(0L)
    at <- 1L
    while (at <= length(body)) {
      n <- u32(body[at:(at + 3L)])
      bytes <- if (n > 0) body[(at + 4L):(at + 3L + n)] else raw(0L)
      field <- rawToChar(bytes)
      Encoding(field) <- "UTF-8"
      fields <- c(fields, field)
      at <- at + 4L + n
    }
    fields
  }
  send <- function(fields) {
    parts <- lapply(fields, function(field) {
      bytes <- charToRaw(enc2utf8(field))
      c(u32_bytes(length(bytes)), bytes)
    })
    body <- unlist(parts, use.names = FALSE)
    writeBin(c(u32_bytes(length(body)), body), answers)
    flush(answers)
  }
  svc <- eval(parse(file = commandArgs(trailingOnly = TRUE)[[2L]], keep.source = FALSE))
  max_bytes <- as.numeric(commandArgs(trailingOnly = TRUE)[[4L]])
  json_file <- file.path(dirname(commandArgs(trailingOnly = TRUE)[[2L]]), "json.R")
  codec <- NULL  # made on the first "json" call: sessions that never see one never load it
  # The svc environment for the functions: svc_progress sends a "progress" frame while the call
  # runs.
  eval(parse(file = commandArgs(trailingOnly = TRUE)[[3L]], keep.source = FALSE))(
    function(fraction, message) send(c("progress", format(fraction, digits = 6L), message))
  )

  serve <- function(fields) {
    app <- fields[[2L]]
    if (is.null(owner)) {
      owner <<- app
      # An environment's library (its marker file written by the service) is the only one
      # besides R's own, as for a script job (run-job.R).
      marker <- file.path(fields[[6L]], ".svc-environment")
      if (nzchar(fields[[6L]]) && file.exists(marker)) {
        .libPaths(fields[[6L]], include.site = FALSE)
        Sys.setenv(R_LIBS = fields[[6L]], R_LIBS_USER = fields[[6L]], R_LIBS_SITE = fields[[6L]],
                   SVC_R_ENVIRONMENT = readLines(marker, n = 1L, warn = FALSE))
      } else if (nzchar(fields[[6L]])) .libPaths(c(fields[[6L]], .libPaths()))
    } else if (!identical(owner, app)) {
      return(c("fail", "r-error", "this R session belongs to another application"))
    }
    if (fields[[5L]] == "1") {
      held <<- NULL
      files <- fields[-(1:6)]
      odd <- which(seq_along(files) %% 2L == 1L)
      lib <- tryCatch(svc$load(app, files[odd], files[odd + 1L]),
                      error = function(e) conditionMessage(e))
      if (is.character(lib)) return(c("fail", "r-error", lib))
      held <<- lib
    }
    if (fields[[1L]] == "json" && is.null(codec)) codec <<- svc$codec(json_file)
    svc$call(held, app, fields[[3L]], fields[[4L]], max_bytes,
             if (fields[[1L]] == "json") codec else NULL)
  }

  options(warn = 1L)
  send(c("hello", as.character(Sys.getpid())))
  repeat {
    fields <- tryCatch(read_message(), error = function(e) conditionMessage(e))
    send("started")
    if (length(fields) == 1L) {
      send(c("fail", "r-error", paste("the request cannot be an R string:", fields)))
    } else if (length(fields) >= 6L && fields[[1L]] %in% c("call", "json")) {
      send(serve(fields))
    } else {
      send(c("fail", "r-error", "malformed request"))
    }
  }
})
