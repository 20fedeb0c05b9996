# The whole flow against svc with httr: a script job, its result, a function call.
#
# Run: SVC_URL=http://localhost:8888 Rscript flow.R
library(httr)

base <- sub("/+$", "", Sys.getenv("SVC_URL", "http://localhost:8888"))
rest <- paste0(base, "/svc/api/rest")
json <- add_headers(Accept = "application/vnd.svc+json")
# The answers are JSON (application/vnd.svc+json), parsed with jsonlite (an httr dependency).
parsed <- function(answer) {
  jsonlite::fromJSON(content(answer, as = "text", encoding = "UTF-8"), simplifyVector = FALSE)
}

# 1. A script job: a flat ZIP holding the R script and its data ("-j" stores plain names;
#    zip() calls the zip program, R_ZIPCMD).
work <- tempfile("svc-job-")
dir.create(work)
writeLines(c(
  'data <- read.csv("data.csv")',
  'writeLines(sprintf("mean y = %.2f", mean(data$y)), "summary.txt")',
  'pdf("plot.pdf"); plot(data$x, data$y, type = "b"); invisible(dev.off())'
), file.path(work, "plot.R"))
writeLines(c("x,y", "1,2", "2,4", "3,9"), file.path(work, "data.csv"))
job_zip <- file.path(work, "job.zip")
zip(job_zip, file.path(work, c("plot.R", "data.csv")), flags = "-jq")

answer <- POST(paste0(rest, "/jobs"), body = upload_file(job_zip, "application/zip"), json,
               add_headers(`X-SVC-Application-Name` = "demo"))
stop_for_status(answer)
token <- parsed(answer)$jobToken
cat(sprintf("job accepted: application %s\n", token$applicationName))

# 2. Wait for the result: the service answers as soon as it is stored, or 404 after 30 s.
for (attempt in 1:20) {
  answer <- GET(token$resultUri, query = list(wait = 30), json)
  if (status_code(answer) != 404) break
}
stop_for_status(answer)
result <- parsed(answer)$result
cat(sprintf("result: success=%s type=%s\n", tolower(result$success), result$type))

# 3. Download the result: a ZIP of every file the script wrote.
result_zip <- file.path(work, "result.zip")
stop_for_status(GET(result$dataUri, write_disk(result_zip)))
result_files <- sort(unzip(result_zip, list = TRUE)$Name)
cat(sprintf("result files: %s\n", paste(result_files, collapse = " ")))
unzip(result_zip, "summary.txt", exdir = work)
cat(sprintf("summary.txt: %s\n", readLines(file.path(work, "summary.txt"))))

# 4. The application's results list the job until it is deleted.
listing <- parsed(GET(token$applicationResultsUri, json))$results
# "" when there is none, one object for one result, a list of objects for several.
entries <- if (is.list(listing)) listing$result else list()
if (!is.null(entries$jobId)) entries <- list(entries)
listed <- any(vapply(entries, function(entry) identical(entry$jobId, token$jobId), TRUE))
cat(sprintf("listed in application results: %s\n", if (listed) "yes" else "no"))

# 5. Delete the result (and its job); afterwards its link answers 404.
deleted <- DELETE(result$selfUri)
gone <- GET(result$selfUri, json)
cat(sprintf("deleted: %d, then %d\n", status_code(deleted), status_code(gone)))

# 6. A function call of the demo application, answered at once.
answer <- POST(paste0(rest, "/process"), encode = "json",
               body = list(RFunction = "combn", n = 4, k = 2),
               add_headers(`X-SVC-Application-Name` = "demo"))
stop_for_status(answer)
combinations <- parsed(answer)$combinations
cat(sprintf("combn(4, 2): %d combinations, the first %s\n", length(combinations),
            paste(unlist(combinations[[1]]), collapse = " ")))

# 7. A failing function answers 400 with R's message.
answer <- POST(paste0(rest, "/process"), encode = "json", body = list(RFunction = "fail"),
               add_headers(`X-SVC-Application-Name` = "demo"))
cat(sprintf("fail: %d %s\n", status_code(answer), parsed(answer)$errorMessage))

# 8. An exported function of the demo application, called with named JSON arguments.
answer <- POST(paste0(rest, "/functions/demo/sum2"), encode = "json",
               body = list(x = c(1, 2, 3), y = 10))
stop_for_status(answer)
cat(sprintf("sum2: %s\n", paste(unlist(content(answer, as = "parsed")), collapse = " ")))

unlink(work, recursive = TRUE)
quit(status = if (isTRUE(result$success) && listed && status_code(deleted) == 204) 0 else 1)
