# A warm R session of the function-call pool (src/r-engine/r-session.ts).
#
# Reads a token from stdin, connects to the pool on 127.0.0.1:<port> (first argument), says
# hello, then serves calls one at a time until the connection closes. The protocol runs on that
# connection only; R's own console output (print, cat, message, warnings) stays on stdout and
# stderr, which the service logs. Frames are described in r-session-frame.ts; the call itself
# is call-function.R (second argument).
#
# Request:  "call", app, function name, payload, reload ("1" or "0"), then name/content pairs
#           of the application's R_FUNCTIONS files when reload is "1".
# Answer:   "ok", value  or  "fail", reason, message, written with one call: R cannot turn off
#           Nagle's algorithm on its socket, and a second small write would wait for the
#           delayed ACK of the first (about 40 ms).
local({
  port <- as.integer(commandArgs(trailingOnly = TRUE)[[1L]])
  input <- file("stdin")
  token <- readLines(input, n = 1L, warn = FALSE)
  close(input)
  con <- socketConnection("127.0.0.1", port, blocking = TRUE, open = "r+b",
                          timeout = 2147483L)
  libraries <- new.env(parent = emptyenv())

  read_exactly <- function(n) {
    out <- raw(0L)
    while (length(out) < n) {
      chunk <- readBin(con, "raw", n - length(out))
      if (length(chunk) == 0L) {
        quit(save = "no", status = 0L)  # the service closed the connection
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
    writeBin(c(u32_bytes(length(body)), body), con)
    flush(con)
  }
  svc <- eval(parse(file = commandArgs(trailingOnly = TRUE)[[2L]], keep.source = FALSE))

  serve <- function(fields) {
    app <- fields[[2L]]
    if (fields[[5L]] == "1") {
      if (exists(app, envir = libraries, inherits = FALSE)) rm(list = app, envir = libraries)
      files <- fields[-(1:5)]
      odd <- which(seq_along(files) %% 2L == 1L)
      lib <- tryCatch(svc$load(app, files[odd], files[odd + 1L]),
                      error = function(e) conditionMessage(e))
      if (is.character(lib)) return(c("fail", "r-error", lib))
      assign(app, lib, envir = libraries)
    }
    lib <- if (exists(app, envir = libraries, inherits = FALSE)) get(app, envir = libraries)
    svc$call(lib, app, fields[[3L]], fields[[4L]])
  }

  options(warn = 1L)
  send(c("hello", token, as.character(Sys.getpid())))
  repeat {
    fields <- tryCatch(read_message(), error = function(e) conditionMessage(e))
    if (length(fields) == 1L) {
      send(c("fail", "r-error", paste("the request cannot be an R string:", fields)))
    } else if (length(fields) >= 5L && fields[[1L]] == "call") {
      send(serve(fields))
    } else {
      send(c("fail", "r-error", "malformed request"))
    }
  }
})
