# The demo's functions. Each takes the request's arguments (a named list) and returns a named
# list that svcJsonService writes as JSON and svcXmlService as XML.

demo_functions <- list(
  # Every combination of k of the numbers 1..n, e.g. n = 5, k = 2: [[1,2],[1,3],...].
  combn = function(args) {
    n <- as.integer(args$n)
    k <- as.integer(args$k)
    if (length(n) != 1L || length(k) != 1L || is.na(n) || is.na(k) || n < 1L || n > 20L ||
        k < 1L || k > n) {
      stop("combn needs whole numbers n (1 to 20) and k (1 to n)")
    }
    m <- combn(n, k)
    list(n = n, k = k, combinations = lapply(seq_len(ncol(m)), function(j) I(m[, j])))
  },
  # Summary statistics of the numbers x.
  describe = function(args) {
    x <- as.numeric(unlist(args$x))
    if (length(x) == 0L || anyNA(x)) stop("describe needs a non-empty list of numbers x")
    list(n = length(x), mean = mean(x), sd = if (length(x) > 1L) sd(x) else NA,
         min = min(x), median = median(x), max = max(x))
  },
  # A greeting, to try the service.
  hello = function(args) {
    name <- if (is.null(args$name)) "world" else as.character(args$name)
    list(greeting = sprintf("Hello, %s!", name), r = R.version.string)
  },
  # Fails on purpose: what an R error looks like to a client.
  fail = function(args) {
    stop("this function always fails")
  }
)

demo_dispatch <- function(args) {
  name <- args$RFunction
  if (is.null(name)) stop("the request names no RFunction")
  f <- demo_functions[[as.character(name)]]
  if (is.null(f)) {
    stop(sprintf("unknown RFunction \"%s\"; try one of: %s", name,
                 paste(names(demo_functions), collapse = ", ")))
  }
  f(args)
}
