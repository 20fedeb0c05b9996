# svc's spawn-mode job wrapper (see src/r-engine/native-r.engine.ts): runs the job script in a
# fresh R process and reports how it ended on descriptor 3, a FIFO the service made and reads:
# "<kind> <cpu ms> <bytes written> <message>", never a file in a place the job can write. The console line
# mimics R's own "Error in <call> : <message>".
# Arguments: the script, the CPU limit, the progress helper, the application's package library.
local({
  args <- commandArgs(trailingOnly = TRUE)
  script <- args[[1L]]
  # The CPU limit as an R error that names it; the kernel's limit stays the backstop.
  cpuLimit <- as.numeric(args[[2L]])
  if (cpuLimit > 0) setTimeLimit(cpu = cpuLimit)
  progress <- eval(parse(file = args[[3L]], keep.source = FALSE))
  # The application's packages come first (a directory that does not exist is left out).
  if (length(args) >= 4L && nzchar(args[[4L]])) .libPaths(c(args[[4L]], .libPaths()))
  attach(list(svc_progress = progress$make(progress$printed)), name = "svc",
         warn.conflicts = FALSE)
  # The CPU milliseconds of R and the programs it ran and waited for (usage statistics), and the
  # bytes they wrote to files (the kernel's write_bytes: not /dev/null, pipes or the console,
  # but files written and removed again count) for the job's limit.
  report <- function(kind, message = "") {
    cpu <- round(1000 * sum(proc.time()[c(1L, 2L, 4L, 5L)], na.rm = TRUE))
    io <- tryCatch(readLines("/proc/self/io"), error = function(e) character(0L))
    written <- sub("^write_bytes: ", "", grep("^write_bytes: ", io, value = TRUE))
    if (length(written) != 1L) written <- "-1"
    try({
      con <- file("/proc/self/fd/3", open = "wb", raw = TRUE)
      writeBin(charToRaw(paste(kind, cpu, written, message)), con)
      close(con)
    }, silent = TRUE)
  }
  tryCatch(source(script), error = function(e) {
    call <- conditionCall(e)
    prefix <- if (is.null(call)) "Error: " else paste0("Error in ", deparse(call)[[1L]], " : ")
    message(prefix, conditionMessage(e))
    report("r-error", substr(enc2utf8(conditionMessage(e)), 1L, 8000L))
    quit(save = "no", status = 1L)
  })
  report("ok")
})
