# A small JSON reader and writer in base R, so the demo functions need no package (webR has
# none). Objects become named lists, arrays unnamed lists, numbers doubles, null NULL.

json_parse <- function(text) {
  result <- json_value(text, 1L)
  rest <- json_skip_space(text, result$at)
  if (rest <= nchar(text)) stop("unexpected text after the JSON value at character ", rest)
  result$value
}

json_skip_space <- function(text, at) {
  while (at <= nchar(text) && substr(text, at, at) %in% c(" ", "\t", "\n", "\r")) at <- at + 1L
  at
}

json_value <- function(text, at) {
  at <- json_skip_space(text, at)
  ch <- substr(text, at, at)
  rest <- substring(text, at)
  if (ch == "{" || ch == "[") return(json_container(text, at, ch))
  if (ch == "\"") {
    m <- regexpr("^\"(\\\\.|[^\"\\\\])*\"", rest)
    if (m < 0) stop("unterminated string at character ", at)
    n <- attr(m, "match.length")
    return(list(value = json_unescape(substr(rest, 2L, n - 1L)), at = at + n))
  }
  m <- regexpr("^-?[0-9]+(\\.[0-9]+)?([eE][+-]?[0-9]+)?", rest)
  if (m > 0) {
    n <- attr(m, "match.length")
    return(list(value = as.numeric(substr(rest, 1L, n)), at = at + n))
  }
  for (word in c("true", "false", "null")) {
    if (startsWith(rest, word)) {
      value <- switch(word, true = TRUE, false = FALSE, null = NULL)
      return(list(value = value, at = at + nchar(word)))
    }
  }
  stop("invalid JSON at character ", at)
}

json_container <- function(text, at, open) {
  close <- if (open == "{") "}" else "]"
  items <- list()
  at <- json_skip_space(text, at + 1L)
  if (substr(text, at, at) == close) {
    return(list(value = if (open == "{") setNames(list(), character(0)) else list(), at = at + 1L))
  }
  repeat {
    if (open == "{") {
      key <- json_value(text, at)
      if (!is.character(key$value)) stop("object keys must be strings (character ", at, ")")
      at <- json_skip_space(text, key$at)
      if (substr(text, at, at) != ":") stop("':' expected at character ", at)
      item <- json_value(text, at + 1L)
      items[key$value] <- list(item$value)
    } else {
      item <- json_value(text, at)
      items[length(items) + 1L] <- list(item$value)
    }
    at <- json_skip_space(text, item$at)
    ch <- substr(text, at, at)
    if (ch == close) return(list(value = items, at = at + 1L))
    if (ch != ",") stop("',' or '", close, "' expected at character ", at)
    at <- at + 1L
  }
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
  s <- gsub("\\", "\\\\", enc2utf8(s), fixed = TRUE)
  s <- gsub("\"", "\\\"", s, fixed = TRUE)
  s <- gsub("\n", "\\n", s, fixed = TRUE)
  s <- gsub("\r", "\\r", s, fixed = TRUE)
  s <- gsub("\t", "\\t", s, fixed = TRUE)
  paste0("\"", s, "\"")
}

# Lists and vectors longer than one become arrays (objects when named); a length-one vector is
# a scalar.
json_write <- function(x) {
  if (is.null(x)) return("null")
  if (is.list(x) || length(x) != 1L) {
    items <- vapply(as.list(x), json_write, "")
    if (!is.null(names(x))) {
      return(paste0("{", paste0(json_string(names(x)), ":", items, collapse = ","), "}"))
    }
    return(paste0("[", paste(items, collapse = ","), "]"))
  }
  if (is.na(x)) return("null")
  if (is.character(x) || is.factor(x)) return(json_string(as.character(x)))
  if (is.logical(x)) return(if (x) "true" else "false")
  as.character(x)
}
