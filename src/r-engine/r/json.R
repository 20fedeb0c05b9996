# JSON for exported functions (src/functions/), in base R: webR has no packages, and a native R
# without Debian's r-cran-jsonlite uses it too. One expression whose value is a list of two
# functions with jsonlite's conversions:
#   from_json(text): as jsonlite::fromJSON(text) with its defaults (simplifyVector,
#     simplifyDataFrame, simplifyMatrix): arrays of scalars become vectors (null as NA), arrays of
#     objects data frames, arrays of equal-length vectors matrices, objects named lists, null NULL.
#   to_json(value): as jsonlite::toJSON(value, auto_unbox = TRUE, dataframe = "rows",
#     na = "null", null = "null", digits = NA): length-one vectors as scalars (I() keeps an
#     array), data frames as arrays of row objects, NA as null (in rows too).
# The text is hostile: it is tokenized by one regular expression (no character loop in R),
# nesting is bounded (max_depth), and anything that is not JSON stops with a message.
local({
  max_depth <- 64L

  token_pattern <- paste0(
    '"(?:[^"\\\\\\x00-\\x1f]|\\\\(?:["\\\\/bfnrt]|u[0-9a-fA-F]{4}))*"',
    "|-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][-+]?[0-9]+)?",
    "|true|false|null|[][{}:,]|[ \\t\\n\\r]+"
  )

  unescape <- function(s) {
    s <- substr(s, 2L, nchar(s) - 1L)
    if (!grepl("\\", s, fixed = TRUE)) return(s)
    # \uD8xx\uDCxx pairs first, then single \uXXXX, then the one-letter escapes.
    pair <- "\\\\u([dD][89abAB][0-9a-fA-F]{2})\\\\u([dD][c-fC-F][0-9a-fA-F]{2})"
    m <- gregexpr(pair, s, perl = TRUE)
    regmatches(s, m) <- list(vapply(regmatches(s, m)[[1L]], function(x) {
      hi <- strtoi(substr(x, 3L, 6L), 16L)
      lo <- strtoi(substr(x, 9L, 12L), 16L)
      intToUtf8(65536L + (hi - 55296L) * 1024L + (lo - 56320L))
    }, ""))
    m <- gregexpr("\\\\(u[0-9a-fA-F]{4}|.)", s, perl = TRUE)
    regmatches(s, m) <- list(vapply(regmatches(s, m)[[1L]], function(x) {
      switch(substr(x, 2L, 2L),
        b = "\b", f = "\f", n = "\n", r = "\r", t = "\t",
        u = {
          code <- strtoi(substr(x, 3L, 6L), 16L)
          if (code == 0L || (code >= 55296L && code <= 57343L)) {
            stop("JSON text holds a NUL or an unpaired surrogate (", x, ")", call. = FALSE)
          }
          intToUtf8(code)
        },
        substr(x, 2L, 2L)
      )
    }, ""))
    s
  }

  # Simplifies a parsed array as jsonlite does with its default arguments.
  simplify_array <- function(items) {
    n <- length(items)
    if (n == 0L) return(list())
    is_null <- vapply(items, is.null, NA)
    scalar <- vapply(items, function(x) is.null(x) || (is.atomic(x) && length(x) == 1L &&
                                                        is.null(attr(x, "json_array"))), NA)
    if (all(scalar)) {
      values <- items
      values[is_null] <- NA
      return(unlist(values, use.names = FALSE))
    }
    if (all(vapply(items, function(x) is.list(x) && !is.data.frame(x) && !is.null(names(x)),
                   NA))) {
      return(rows_to_frame(items))
    }
    vec <- vapply(items, function(x) is.atomic(x) && !is.null(x) && !is.matrix(x), NA)
    if (all(vec) && n > 0L) {
      lens <- lengths(items)
      if (all(lens == lens[[1L]]) && lens[[1L]] > 0L) {
        return(do.call(rbind, lapply(items, function(x) { attr(x, "json_array") <- NULL; x })))
      }
    }
    lapply(items, function(x) { if (is.atomic(x)) attr(x, "json_array") <- NULL; x })
  }

  rows_to_frame <- function(rows) {
    columns <- unique(unlist(lapply(rows, names), use.names = FALSE))
    out <- lapply(columns, function(column) {
      cells <- lapply(rows, function(row) row[[column]])
      simple <- vapply(cells, function(x) is.null(x) || (is.atomic(x) && length(x) == 1L), NA)
      if (all(simple)) {
        cells[vapply(cells, is.null, NA)] <- NA
        unlist(cells, use.names = FALSE)
      } else {
        cells
      }
    })
    names(out) <- columns
    frame <- structure(out, class = "data.frame", row.names = seq_along(rows))
    frame
  }

  from_json <- function(text) {
    if (!is.character(text) || length(text) != 1L || is.na(text)) {
      stop("JSON text must be one string", call. = FALSE)
    }
    starts <- gregexpr(token_pattern, text, perl = TRUE)[[1L]]
    if (!nzchar(trimws(text))) stop("the JSON text is empty", call. = FALSE)
    if (starts[[1L]] == -1L) stop("invalid JSON at character 1", call. = FALSE)
    lens <- attr(starts, "match.length")
    # Every character must belong to a token: a gap is text that is not JSON.
    ends <- starts + lens
    if (starts[[1L]] != 1L || any(starts[-1L] != ends[-length(ends)]) ||
        ends[[length(ends)]] != nchar(text) + 1L) {
      at <- if (starts[[1L]] != 1L) 1L else {
        gap <- which(c(starts[-1L] != ends[-length(ends)], ends[[length(ends)]] != nchar(text) + 1L))
        ends[[gap[[1L]]]]
      }
      stop(sprintf("invalid JSON at character %d", at), call. = FALSE)
    }
    tokens <- substring(text, starts, ends - 1L)
    tokens <- tokens[!grepl("^[ \t\n\r]", tokens)]
    at <- 1L
    n <- length(tokens)
    # Where the next bracket is, for the fast path of arrays of scalars.
    brackets <- which(tokens %in% c("[", "]", "{", "}"))
    scalars <- function(inner) {
      # inner: value, ",", value, ... with no brackets; NULL when not of that shape.
      k <- length(inner)
      if (k %% 2L == 0L) return(NULL)
      values <- inner[seq(1L, k, 2L)]
      if (k > 1L && any(inner[seq(2L, k, 2L)] != ",")) return(NULL)
      if (any(values %in% c(",", ":"))) return(NULL)
      is_string <- startsWith(values, '"')
      is_null <- values == "null"
      is_logical <- values == "true" | values == "false"
      if (all(is_null)) return(rep(NA, length(values)))
      if (any(is_string)) {
        out <- values
        out[is_string] <- vapply(values[is_string], unescape, "", USE.NAMES = FALSE)
        out[is_logical] <- toupper(values[is_logical])
        out[is_null] <- NA_character_
        return(out)
      }
      if (all(is_logical | is_null)) return(ifelse(is_null, NA, values == "true"))
      numbers <- suppressWarnings(as.numeric(ifelse(is_logical, values == "true", values)))
      numbers[is_logical] <- as.numeric(values[is_logical] == "true")
      numbers[is_null] <- NA
      whole <- !grepl("[.eE]", values[!is_null & !is_logical]) &
        abs(numbers[!is_null & !is_logical]) <= .Machine$integer.max
      if (all(whole)) as.integer(numbers) else numbers
    }
    peek <- function() if (at <= n) tokens[[at]] else ""
    take <- function(expected = NULL) {
      if (at > n) stop("the JSON text ends too early", call. = FALSE)
      token <- tokens[[at]]
      if (!is.null(expected) && token != expected) {
        stop(sprintf("invalid JSON: expected '%s' but found '%s'", expected,
                     substr(token, 1L, 40L)), call. = FALSE)
      }
      at <<- at + 1L
      token
    }
    value <- function(depth) {
      if (depth > max_depth) stop(sprintf("JSON nested deeper than %d levels", max_depth),
                                  call. = FALSE)
      token <- take()
      first <- substr(token, 1L, 1L)
      if (token == "{") {
        out <- list()
        keys <- character(0L)
        if (peek() == "}") { take(); return(structure(list(), names = character(0L))) }
        repeat {
          key <- take()
          if (substr(key, 1L, 1L) != '"') stop("invalid JSON: an object key must be a string",
                                              call. = FALSE)
          take(":")
          item <- value(depth + 1L)
          keys <- c(keys, unescape(key))
          out[length(keys)] <- list(item)
          if (peek() == ",") { take(); next }
          take("}")
          break
        }
        names(out) <- keys
        out
      } else if (token == "[") {
        if (peek() == "]") { take(); return(list()) }
        close <- brackets[findInterval(at - 1L, brackets) + 1L]
        if (!is.na(close) && tokens[[close]] == "]" && close > at) {
          fast <- scalars(tokens[at:(close - 1L)])
          if (!is.null(fast)) {
            at <<- close + 1L
            if (length(fast) == 1L) attr(fast, "json_array") <- TRUE
            return(fast)
          }
        }
        items <- vector("list", 16L)
        count <- 0L
        repeat {
          count <- count + 1L
          if (count > length(items)) length(items) <- 2L * length(items)  # amortised growth
          items[count] <- list(value(depth + 1L))
          if (peek() == ",") { take(); next }
          take("]")
          break
        }
        out <- simplify_array(items[seq_len(count)])
        if (is.atomic(out) && !is.matrix(out) && length(out) == 1L) {
          attr(out, "json_array") <- TRUE  # [1] stays an array inside arrays of arrays
        }
        out
      } else if (first == '"') {
        unescape(token)
      } else if (token == "true") {
        TRUE
      } else if (token == "false") {
        FALSE
      } else if (token == "null") {
        NULL
      } else if (grepl("^-?[0-9]", token)) {
        number <- as.numeric(token)
        if (!grepl("[.eE]", token) && abs(number) <= .Machine$integer.max) as.integer(number)
        else number
      } else {
        stop(sprintf("invalid JSON: unexpected '%s'", token), call. = FALSE)
      }
    }
    out <- value(1L)
    if (at <= n) stop("invalid JSON: text after the value", call. = FALSE)
    strip(out)
  }

  strip <- function(x) {
    if (is.atomic(x)) {
      attr(x, "json_array") <- NULL
    } else if (is.list(x) && !is.data.frame(x)) {
      for (i in seq_along(x)) if (!is.null(x[[i]])) x[[i]] <- strip(x[[i]])
    }
    x
  }

  quote_string <- function(x) {
    x <- enc2utf8(x)
    special <- grepl("[\\\\\"\x01-\x1f\x7f]", x, perl = TRUE)
    if (!any(special, na.rm = TRUE)) return(paste0('"', x, '"'))
    x <- gsub("\\", "\\\\", x, fixed = TRUE)
    x <- gsub('"', '\\"', x, fixed = TRUE)
    x <- gsub("\n", "\\n", x, fixed = TRUE)
    x <- gsub("\r", "\\r", x, fixed = TRUE)
    x <- gsub("\t", "\\t", x, fixed = TRUE)
    x <- gsub("\b", "\\b", x, fixed = TRUE)
    x <- gsub("\f", "\\f", x, fixed = TRUE)
    control <- gregexpr("[\x01-\x1f\x7f]", x, perl = TRUE)
    regmatches(x, control) <- lapply(regmatches(x, control), function(chars) {
      vapply(chars, function(ch) sprintf("\\u%04x", utf8ToInt(ch)), "")
    })
    paste0('"', x, '"')
  }

  atoms <- function(x) {
    if (length(x) == 0L) return(character(0L))
    if (is.integer(x) && !is.factor(x) || (is.double(x) && !inherits(x, c("Date", "POSIXt")) &&
        all(is.finite(x) & x == trunc(x) & abs(x) < 2147483647))) {
      # Whole numbers, the common case, without formatC (-0 written as 0, as jsonlite does).
      out <- as.character(as.integer(x))
      out[is.na(x)] <- "null"
      return(out)
    }
    if (is.factor(x)) x <- as.character(x)
    out <- if (is.character(x)) {
      quote_string(x)
    } else if (is.logical(x)) {
      ifelse(x, "true", "false")
    } else if (is.integer(x)) {
      as.character(x)
    } else if (is.numeric(x)) {
      out <- formatC(x, digits = 15L, format = "fg", flag = "")
      big <- !is.na(x) & (abs(x) >= 1e15 | (abs(x) < 1e-5 & x != 0))
      out[big] <- formatC(x[big], digits = 15L, format = "g")
      out <- sub("^ +", "", out)
      out[!is.finite(x)] <- "null"
      out
    } else if (inherits(x, "Date") || inherits(x, "POSIXt")) {
      quote_string(format(x))
    } else {
      stop(sprintf("cannot write an object of class %s as JSON", paste(class(x), collapse = "/")),
           call. = FALSE)
    }
    out[is.na(x)] <- "null"
    out
  }

  to_json <- function(value, depth = 1L) {
    if (depth > max_depth) stop("the value is nested too deeply for JSON", call. = FALSE)
    if (is.null(value)) return("null")
    if (is.data.frame(value)) {
      if (nrow(value) == 0L) return("[]")
      columns <- lapply(value, function(column) {
        if (is.list(column)) vapply(column, to_json, "", depth + 1L) else atoms(column)
      })
      keys <- quote_string(names(value))
      rows <- vapply(seq_len(nrow(value)), function(i) {
        cells <- vapply(columns, `[[`, "", i)
        paste0("{", paste0(keys, ":", cells, collapse = ","), "}")
      }, "")
      return(paste0("[", paste(rows, collapse = ","), "]"))
    }
    if (is.matrix(value) && is.atomic(value)) {
      rows <- vapply(seq_len(nrow(value)), function(i) {
        paste0("[", paste(atoms(value[i, ]), collapse = ","), "]")
      }, "")
      return(paste0("[", paste(rows, collapse = ","), "]"))
    }
    if (is.list(value)) {
      items <- vapply(value, to_json, "", depth + 1L)
      keys <- names(value)
      if (is.null(keys)) return(paste0("[", paste(items, collapse = ","), "]"))
      if (length(value) == 0L) return("{}")
      return(paste0("{", paste0(quote_string(keys), ":", items, collapse = ","), "}"))
    }
    if (is.atomic(value)) {
      out <- atoms(value)
      if (length(out) == 0L) return("[]")
      if (length(out) == 1L && !inherits(value, "AsIs")) return(out)
      return(paste0("[", paste(out, collapse = ","), "]"))
    }
    if (is.function(value) || is.environment(value)) {
      stop(sprintf("cannot write an object of class %s as JSON", paste(class(value), collapse = "/")),
           call. = FALSE)
    }
    stop(sprintf("cannot write an object of class %s as JSON", paste(class(value), collapse = "/")),
         call. = FALSE)
  }

  list(from_json = from_json, to_json = function(value) to_json(value))
})
