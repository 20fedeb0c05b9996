# How a function call runs, shared by the warm native sessions (session.R) and webR: one
# expression whose value is a list of two functions.
#   load(app, names, contents): a new environment holding the application's R_FUNCTIONS files,
#     each parsed and evaluated in it; stops with a message naming the file that failed.
#   call(lib, app, fn, payload, max_bytes, codec): runs lib's function fn on the payload string and
#     answers c("ok", value) or c("fail", reason, message), reason one of r-error,
#     missing-function, not-a-string, too-large (a value of more than max_bytes bytes in UTF-8,
#     MAX_REQUEST_BYTES). A message is cut to 4000 characters. The service checks the size
#     again as it reads: this check only spares it a useless transfer.
#     With a codec (list(from_json, to_json): jsonlite's or json.R's), fn is an exported function
#     (src/functions/): the payload is a JSON object of its named arguments, and its value is
#     answered as JSON. Then reason can also be bad-argument (not an object, or an argument fn
#     does not take) or not-json (a value JSON cannot hold).
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
  call = function(lib, app, fn, payload, max_bytes = Inf, codec = NULL) {
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
    if (!is.null(codec)) {
      args <- tryCatch(codec$from_json(payload), error = function(e) e)
      if (inherits(args, "error")) {
        return(c("fail", "bad-argument",
                 cut(paste("the body is not JSON:", conditionMessage(args)))))
      }
      if (!is.list(args) || is.data.frame(args) || (length(args) > 0L && is.null(names(args)))) {
        return(c("fail", "bad-argument", "the body must be a JSON object of named arguments"))
      }
      if (any(!nzchar(names(args)))) {
        return(c("fail", "bad-argument", "an argument of the body has an empty name"))
      }
      formal_names <- names(formals(f))
      unknown <- setdiff(names(args), formal_names)
      if (!("..." %in% formal_names) && length(unknown) > 0L) {
        return(c("fail", "bad-argument",
                 cut(sprintf("%s takes no argument %s", fn,
                             paste0('"', unknown, '"', collapse = ", ")))))
      }
      # Called by name from an environment holding the arguments, so that an error's call reads
      # sum2(x = x) rather than a deparse of the values.
      frame <- list2env(args, parent = lib)
      call <- as.call(c(as.name(fn), sapply(names(args), as.name, simplify = FALSE)))
      value <- tryCatch(list(eval(call, frame)), error = function(e) e)
      if (inherits(value, "error")) {
        where <- conditionCall(value)
        return(c("fail", "r-error", cut(if (is.null(where)) conditionMessage(value) else
          sprintf("Error in %s: %s", paste(deparse(where, nlines = 1L), collapse = ""),
                  conditionMessage(value)))))
      }
      value <- tryCatch(codec$to_json(value[[1L]]), error = function(e) e)
      if (inherits(value, "error")) {
        return(c("fail", "not-json",
                 cut(sprintf("the value of %s cannot be written as JSON: %s", fn,
                             conditionMessage(value)))))
      }
    } else {
      value <- tryCatch(list(f(payload)), error = function(e) e)
      if (inherits(value, "error")) {
        return(c("fail", "r-error", cut(conditionMessage(value))))
      }
      value <- value[[1L]]
    }
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
  },
  # The JSON codec of exported functions: json.R (base R, jsonlite's conversions), reading with
  # jsonlite's fromJSON where it is installed (about 6x faster on small bodies). json.R writes
  # in every case: jsonlite's toJSON costs 1.5-2 ms a call for a few values, json.R's 0.2-0.4
  # (docs/performance.md), and test/integration/json-codec.spec.ts holds the two to one output.
  codec = function(json_file) {
    codec <- eval(parse(file = json_file, keep.source = FALSE, encoding = "UTF-8"))
    if (requireNamespace("jsonlite", quietly = TRUE)) {
      codec$from_json <- function(text) jsonlite::fromJSON(text)
    }
    codec
  }
)
