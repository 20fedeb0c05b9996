# How a function call runs, shared by the warm native sessions (session.R) and webR: one
# expression whose value is a list of two functions.
#   load(app, names, contents): a new environment holding the application's R_FUNCTIONS files,
#     each parsed and evaluated in it; stops with a message naming the file that failed.
#   call(lib, app, fn, payload, max_bytes): runs lib's function fn on the payload string and
#     answers c("ok", value) or c("fail", reason, message), reason one of r-error,
#     missing-function, not-a-string, too-large (a value of more than max_bytes bytes in UTF-8,
#     MAX_REQUEST_BYTES). A message is cut to 4000 characters. The service checks the size
#     again as it reads: this check only spares it a useless transfer.
list(
  load = function(app, names, contents) {
    lib <- new.env(parent = globalenv())
    for (i in seq_along(names)) {
      problem <- tryCatch({
        for (expr in parse(text = contents[[i]], keep.source = FALSE, encoding = "UTF-8")) {
          eval(expr, lib)
        }
        NULL
      }, error = function(e) conditionMessage(e))
      if (!is.null(problem)) {
        stop(sprintf("R_FUNCTIONS/%s of application %s: %s", names[[i]], app, problem),
             call. = FALSE)
      }
    }
    lib
  },
  call = function(lib, app, fn, payload, max_bytes = Inf) {
    cut <- function(message) {
      message <- enc2utf8(paste(message, collapse = "\n"))
      if (nchar(message, type = "bytes") > 4000L) {
        paste0(substr(message, 1L, 4000L), " [cut]")
      } else {
        message
      }
    }
    f <- if (is.null(lib)) NULL else get0(fn, envir = lib, mode = "function", inherits = FALSE)
    if (is.null(f)) {
      return(c("fail", "missing-function",
               sprintf("application %s defines no %s function", app, fn)))
    }
    value <- tryCatch(list(f(payload)), error = function(e) e)
    if (inherits(value, "error")) {
      return(c("fail", "r-error", cut(conditionMessage(value))))
    }
    value <- value[[1L]]
    if (!is.character(value) || length(value) != 1L || is.na(value)) {
      what <- if (is.character(value) && length(value) == 1L) {
        "NA"
      } else if (is.character(value)) {
        sprintf("a character vector of length %d", length(value))
      } else {
        sprintf("an object of class %s", paste(class(value), collapse = "/"))
      }
      return(c("fail", "not-a-string",
               sprintf("%s returned %s, not one character string", fn, what)))
    }
    value <- enc2utf8(value)
    bytes <- nchar(value, type = "bytes")
    if (bytes > max_bytes) {
      return(c("fail", "too-large",
               sprintf("%s returned %.0f bytes, more than MAX_REQUEST_BYTES (%.0f bytes)",
                       fn, bytes, max_bytes)))
    }
    c("ok", value)
  }
)
