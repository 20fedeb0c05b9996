# svc's spawn-mode entry (see src/r-engine/native/spawn-runner.ts): runs the job script in a fresh R
# process with the job wrapper (run-job.R) and reports how it ended on descriptor 3, a FIFO the
# service made and reads: "<kind> <cpu ms> <bytes written> <message>", never a file in a place
# the job can write.
# Arguments: the script, the CPU limit, the svc environment (svc-env.R), the job wrapper, the
# application's package library.
local({
  args <- commandArgs(trailingOnly = TRUE)
  job <- eval(parse(file = args[[4L]], keep.source = FALSE))
  job$prepare(as.numeric(args[[2L]]), if (length(args) >= 5L) args[[5L]] else "")
  eval(parse(file = args[[3L]], keep.source = FALSE))()
  # With the CPU time, the bytes R and what it waited for wrote to files (the kernel's
  # write_bytes: not /dev/null, pipes or the console, but files written and removed again count)
  # for the job's limit.
  report <- function(kind, message = "") {
    io <- tryCatch(readLines("/proc/self/io"), error = function(e) character(0L))
    written <- sub("^write_bytes: ", "", grep("^write_bytes: ", io, value = TRUE))
    if (length(written) != 1L) written <- "-1"
    try({
      con <- file("/proc/self/fd/3", open = "wb", raw = TRUE)
      writeBin(charToRaw(paste(kind, job$cpuMs(), written, message)), con)
      close(con)
    }, silent = TRUE)
  }
  failure <- job$run(args[[1L]])
  if (!is.null(failure)) {
    report("r-error", failure)
    quit(save = "no", status = 1L)
  }
  report("ok")
})
