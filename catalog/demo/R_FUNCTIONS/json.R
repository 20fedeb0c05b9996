# A small JSON reader and writer in base R, so the demo functions need no package (webR has
# none). Objects become named lists, arrays unnamed lists, numbers doubles, null NULL.

json_parse <- function(text) {
  # One regular expression splits the text into tokens; a recursive descent walks them.
  pattern <- paste0("\"(\\\\.|[^\"\\\\])*\"|-?[0-9]+([.][0-9]+)?([eE][+-]?[0-9]+)?|",
                    "true|false|null|[][{}:,]|[^[:space:]]")
  tokens <- regmatches(text, gregexpr(pattern, text))[[1L]]
  at <- 1L
  next_token <- function() {
    if (at > length(tokens)) stop("the JSON text ends too early")
    at <<- at + 1L
    tokens[[at - 1L]]
  }
  value <- function() {
    token <- next_token()
    first <- substr(token, 1L, 1L)
    if (token == "{" || token == "[") return(container(token))
    if (first == "\"") return(json_unescape(substr(token, 2L, nchar(token) - 1L)))
    if (token == "true") return(TRUE)
    if (token == "false") return(FALSE)
    if (token == "null") return(NULL)
    number <- suppressWarnings(as.numeric(token))
    if (is.na(number)) stop("invalid JSON near \"", token, "\"")
    number
  }
  container <- function(open) {
    close <- if (open == "{") "}" else "]"
    items <- if (open == "{") setNames(list(), character(0)) else list()
    if (at <= length(tokens) && tokens[[at]] == close) {
      at <<- at + 1L
      return(items)
    }
    repeat {
      if (open == "{") {
        key <- value()
        if (!is.character(key)) stop("object keys must be strings")
        if (next_token() != ":") stop("':' expected after \"", key, "\"")
        items[key] <- list(value())
      } else {
        items[length(items) + 1L] <- list(value())
      }
      separator <- next_token()
      if (separator == close) return(items)
      if (separator != ",") stop("',' or '", close, "' expected, not \"", separator, "\"")
    }
  }
  result <- value()
  if (at <= length(tokens)) stop("unexpected \"", tokens[[at]], "\" after the JSON value")
  result
}

json_unescape <- function(s) {
  if (!grepl("\\", s, fixed = TRUE)) return(s)
  m <- gregexpr("\\\\(u[0-9a-fA-F]{4}|.)", s)
  regmatches(s, m) <- list(vapply(regmatches(s, m)[[1]], function(e) {
    switch(substr(e, 2L, 2L),
      n = "\n", t = "\t", r = "\r", b = "\b", f = "\f",
      u = intToUtf8(strtoi(substr(e, 3L, 6L), 16L)),
      substr(e, 2L, 2L))
  }, ""))
  s
}

json_string <- function(s) {
  if (length(s) == 0L) return(character(0))
  s <- gsub("\\", "\\\\", enc2utf8(s), fixed = TRUE)
  s <- gsub("\"", "\\\"", s, fixed = TRUE)
  s <- gsub("\n", "\\n", s, fixed = TRUE)
  s <- gsub("\r", "\\r", s, fixed = TRUE)
  s <- gsub("\t", "\\t", s, fixed = TRUE)
  paste0("\"", s, "\"")
}

# Lists become arrays (objects when named); atomic vectors become arrays of their values, except
# that a vector of length one is a scalar unless wrapped in I().
json_write <- function(x) {
  if (is.null(x)) return("null")
  if (is.list(x)) {
    items <- vapply(x, json_write, "", USE.NAMES = FALSE)
    if (!is.null(names(x))) {
      return(paste0("{", paste0(json_string(names(x)), ":", items, collapse = ","), "}"))
    }
    return(paste0("[", paste(items, collapse = ","), "]"))
  }
  values <- if (is.character(x) || is.factor(x)) {
    json_string(as.character(x))
  } else if (is.logical(x)) {
    ifelse(x, "true", "false")
  } else {
    as.character(unclass(x))
  }
  values[is.na(x)] <- "null"
  if (length(x) == 1L && !inherits(x, "AsIs")) values else paste0("[", paste(values, collapse = ","), "]")
}
