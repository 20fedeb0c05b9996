# Example catalog script for the demo application: summarises every CSV file the job sent.
# Submit a ZIP of CSV files with the header `X-SVC-Meta-rScript: summary.R`.
# Base R only, so it runs on native R and on webR alike.
csv_files <- list.files(pattern = "\\.csv$", ignore.case = TRUE)
if (length(csv_files) == 0) stop("send at least one .csv file")

pdf("summary.pdf")
report <- character()
for (file in csv_files) {
  data <- read.csv(file)
  numeric_columns <- names(data)[vapply(data, is.numeric, logical(1))]
  report <- c(report, sprintf("%s: %d rows, %d columns", file, nrow(data), ncol(data)))
  for (column in numeric_columns) {
    values <- data[[column]]
    report <- c(report, sprintf("  %s: mean %.4g, sd %.4g, min %.4g, max %.4g",
                                column, mean(values), sd(values), min(values), max(values)))
    hist(values, main = paste(file, column), xlab = column)
  }
}
invisible(dev.off())
writeLines(report, "summary.txt")
