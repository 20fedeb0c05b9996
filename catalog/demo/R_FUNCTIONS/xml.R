# Just enough XML for the demo, in base R: the request is one element whose attributes (or
# simple child elements) are the arguments, e.g. <call RFunction="combn" n="5" k="2"/>.

xml_arguments <- function(text) {
  args <- list()
  first <- regmatches(text, regexpr("<[A-Za-z_][^>]*>", text))
  if (length(first) == 0L) stop("the payload holds no XML element")
  pairs <- regmatches(first, gregexpr("[A-Za-z_][A-Za-z0-9_.-]*\\s*=\\s*(\"[^\"]*\"|'[^']*')", first))[[1]]
  for (pair in pairs) {
    name <- sub("\\s*=.*$", "", pair)
    if (startsWith(name, "xmlns")) next
    args[[name]] <- xml_unescape(sub("^[^=]*=\\s*.(.*).$", "\\1", pair))
  }
  leaves <- regmatches(text, gregexpr("<([A-Za-z_][A-Za-z0-9_.-]*)>[^<]*</\\1>", text))[[1]]
  for (leaf in leaves) {
    name <- sub("^<([^>]*)>.*$", "\\1", leaf)
    args[[name]] <- xml_unescape(sub("^<[^>]*>([^<]*)</.*$", "\\1", leaf))
  }
  args
}

xml_unescape <- function(s) {
  for (entity in list(c("&lt;", "<"), c("&gt;", ">"), c("&quot;", "\""), c("&apos;", "'"),
                      c("&amp;", "&"))) {
    s <- gsub(entity[[1]], entity[[2]], s, fixed = TRUE)
  }
  s
}

xml_escape <- function(s) {
  s <- gsub("&", "&amp;", enc2utf8(as.character(s)), fixed = TRUE)
  s <- gsub("<", "&lt;", s, fixed = TRUE)
  s <- gsub(">", "&gt;", s, fixed = TRUE)
  gsub("\"", "&quot;", s, fixed = TRUE)
}

# A named list as an element: scalars become attributes, vectors and lists child elements
# holding one <value> per item (an item that is itself a vector as space-separated text).
xml_write <- function(name, x) {
  scalar <- vapply(x, function(v) !is.list(v) && length(v) == 1L, TRUE)
  attributes <- paste0(" ", names(x)[scalar], "=\"", vapply(x[scalar], xml_escape, ""), "\"",
                       collapse = "")
  if (!any(scalar)) attributes <- ""
  children <- vapply(names(x)[!scalar], function(child) {
    values <- x[[child]]
    items <- vapply(values, function(v) xml_escape(paste(unlist(v), collapse = " ")), "")
    paste0("<", child, ">", paste0("<value>", items, "</value>", collapse = ""), "</", child, ">")
  }, "")
  if (length(children) == 0L) return(paste0("<", name, attributes, "/>"))
  paste0("<", name, attributes, ">", paste(children, collapse = ""), "</", name, ">")
}
