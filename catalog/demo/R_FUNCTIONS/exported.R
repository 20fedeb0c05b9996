# Functions the demo application exports as endpoints: each is called by
# POST /svc/api/rest/functions/demo/<name> with a JSON object of its named arguments, and answers
# its value as JSON (docs/functions.md). Only functions marked @export are endpoints; the types
# after the @param names are checked before R runs.

#' Add two numbers
#'
#' Adds y to every element of x.
#' @param x:number[] numbers
#' @param y:number a number added to each of them
#' @return:number[] x + y
#' @export
sum2 <- function(x, y = 1) {
  x + y
}

#' Summarise a column of a table
#'
#' Mean, standard deviation and count of one numeric column of a table sent as an array of
#' row objects.
#' @param rows:data.frame the table: an array of objects
#' @param column:string the name of a numeric column
#' @return:object an object with n, mean and sd
#' @export
summarise_column <- function(rows, column) {
  if (!is.data.frame(rows) || !(column %in% names(rows))) {
    stop(sprintf("rows has no column %s", column))
  }
  values <- rows[[column]]
  if (!is.numeric(values)) stop(sprintf("column %s is not numeric", column))
  list(n = sum(!is.na(values)), mean = mean(values, na.rm = TRUE),
       sd = stats::sd(values, na.rm = TRUE))
}

#' Fit a straight line
#'
#' Least-squares fit of y on x.
#' @param x:number[] numbers
#' @param y:number[] numbers, as many as x
#' @return:object the intercept, the slope and the fitted values
#' @export
fit_line <- function(x, y) {
  fit <- stats::lm(y ~ x)
  list(intercept = unname(coef(fit)[[1L]]), slope = unname(coef(fit)[[2L]]),
       fitted = unname(fitted(fit)))
}


#' All combinations of k out of 1..n
#'
#' The same work as svcJsonService's combn, as an exported function.
#' @param n:integer how many numbers
#' @param k:integer how many of them in each combination
#' @return:object n, k and the combinations, one array each
#' @export
combinations <- function(n, k) {
  all <- utils::combn(n, k)
  list(n = n, k = k, combinations = lapply(seq_len(ncol(all)), function(i) all[, i]))
}

# Not exported: defined for the functions above, not callable from outside.
demo_internal_secret <- function() "internal"
