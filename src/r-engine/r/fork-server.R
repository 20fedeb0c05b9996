# svc fork server: a warm R process that forks one child per script job (see
# src/r-engine/fork-server.ts and docs/architecture.md). It never runs job code itself.
#
# Protocol, one line per message:
#   svc -> server (FIFO):    RUN <token> <workDir> <scriptName> <privateDir> [<libraryDir>]
#                            (fields URL-encoded; libraryDir: the application's packages)
#                            PING
#                            KILL <token>   (sandboxed: kill the job and everything it left)
#   server -> svc (stdout):  READY <pid> <R.version.string>
#                            STARTED <token> <child pid>
#                            ENDED <token> ok | r-error | exit <status> | died
#                            NOFORK <token> <message>
#                            PONG <value of 1+1>
#                            RECYCLE (the server leaves when idle after using half its CPU limit)
# svc's commands are read by a small forked "reader" child that forwards each line through parallel's
# child pipe, so the server waits on one thing (its children) and never polls.
# Everything lives in a local environment: the global environment that children inherit is empty.
local({
  fork <- get("mcfork", asNamespace("parallel"))
  exitChild <- get("mcexit", asNamespace("parallel"))
  sendMaster <- get("sendMaster", asNamespace("parallel"))
  selectChildren <- get("selectChildren", asNamespace("parallel"))
  readChild <- get("readChild", asNamespace("parallel"))
  closeFD <- get("closeFD", asNamespace("parallel"))
  closeStdout <- get("closeStdout", asNamespace("parallel"))
  closeStderr <- get("closeStderr", asNamespace("parallel"))
  cpuLimit <- as.numeric(Sys.getenv("SVC_FORK_CPU_LIMIT", "0"))
  # Alone in a sandbox (its own PID namespace, one job at a time): every process there but this
  # server, its reader and the sandbox's init (pid 1) belongs to the job that runs or ran last.
  sandboxed <- identical(Sys.getenv("SVC_FORK_SANDBOXED"), "1")
  Sys.unsetenv(c("SVC_FORK_CPU_LIMIT", "SVC_FORK_SANDBOXED"))
  defaultJit <- compiler::enableJIT(-1L)
  # svc_progress for the jobs, on the search path that every child inherits.
  progress <- eval(parse(file = commandArgs(trailingOnly = TRUE)[[1L]], keep.source = FALSE))
  attach(list(svc_progress = progress$make(progress$printed)), name = "svc",
         warn.conflicts = FALSE)
  rm(progress)

  say <- function(...) {
    cat(paste(...), "\n", sep = "")
    flush(stdout())
  }

  # In a child: point fds 0, 1 and 2 away from the server's pipes (the lowest free descriptor is
  # the one a new file gets), so R's output and that of any program it starts lands in out.log.
  redirect <- function(log) {
    closeFD(0L)
    stdinCon <- file("/dev/null", open = "r")
    closeStdout(FALSE)
    outCon <- file(log, open = "a")
    closeStderr(FALSE)
    errCon <- file(log, open = "a")
    list(stdinCon, outCon, errCon)
  }

  # svc writes its commands into a FIFO (a forked child's fd 0 is a new pipe from its parent, and
  # svc's own pipes are sockets that cannot be reopened). Job children close it.
  input <- file(Sys.getenv("SVC_FORK_COMMANDS"), open = "r", raw = TRUE)
  Sys.unsetenv("SVC_FORK_COMMANDS")
  reader <- fork()
  if (inherits(reader, "masterProcess")) {
    closeStdout(TRUE)
    repeat {
      line <- readLines(input, n = 1L)
      if (length(line) == 0L) {
        exitChild(0L)
      }
      sendMaster(line, FALSE)
    }
  }

  runChild <- function(workDir, scriptName, privateDir, libraryDir) {
    # R's own exit would close devices and connections; a forked child leaves through _exit, so
    # it does that itself (an unclosed pdf() or file() still gets written out).
    finish <- function(status, code) {
      try(graphics.off(), silent = TRUE)
      try(flush.console(), silent = TRUE)
      # Not closeAllConnections(): its full gc() would touch, and so copy, the whole shared heap.
      for (con in getAllConnections()[-(1:3)]) try(close(getConnection(con)), silent = TRUE)
      # Bytes written by the job (R and the programs it waited for): svc checks them against
      # the job's limit. Then its CPU milliseconds (a forked child's counters start at zero).
      io <- tryCatch(readLines("/proc/self/io"), error = function(e) character(0L))
      cpu <- round(1000 * sum(proc.time()[c(1L, 2L, 4L, 5L)], na.rm = TRUE))
      try(writeLines(c(sub("^wchar: ", "", grep("^wchar: ", io, value = TRUE)), cpu),
                     file.path(privateDir, "written.txt")), silent = TRUE)
      exitChild(code, send = status)
    }
    tryCatch(
      {
        close(input)
        log <- file.path(workDir, "out.log")
        file.create(log)
        connections <- redirect(log)
        setwd(workDir)
        tmp <- file.path(privateDir, "tmp")
        Sys.setenv(HOME = workDir, TMPDIR = tmp)
        # Warnings appear in out.log as they happen: the child never returns to a top level.
        options(warn = 1L)
        base <- baseenv()
        replace <- function(name, value) {
          unlockBinding(name, base)
          assign(name, value, envir = base)
          lockBinding(name, base)
        }
        replace("tempdir", function(check = FALSE) tmp)
        stopR <- function(save = "default", status = 0, runLast = TRUE) {
          finish(paste("exit", as.integer(status)), as.integer(status))
        }
        replace("quit", stopR)
        replace("q", stopR)
        compiler::enableJIT(defaultJit)
        # The application's packages come first (a directory that does not exist is left out).
        if (!is.na(libraryDir)) .libPaths(c(libraryDir, .libPaths()))
        # The CPU limit as an R error that names it; the kernel's limit stays the backstop.
        if (cpuLimit > 0) setTimeLimit(cpu = cpuLimit)
      },
      error = function(e) finish(paste("setup", conditionMessage(e)), 70L)
    )
    errorFile <- file.path(privateDir, "error.txt")
    status <- tryCatch(
      {
        source(scriptName)
        "ok"
      },
      error = function(e) {
        call <- conditionCall(e)
        prefix <- if (is.null(call)) "Error: " else paste0("Error in ", deparse(call)[[1L]], " : ")
        message(prefix, conditionMessage(e))
        writeLines(enc2utf8(conditionMessage(e)), errorFile, useBytes = TRUE)
        "r-error"
      }
    )
    finish(status, if (status == "ok") 0L else 1L)
  }

  # What most scripts need first (the graphics engine, the pdf device's fonts, plot()) is loaded
  # once here, so children do not pay for it; this draws nothing and runs no job code.
  pdf(NULL)
  plot(1:10)
  invisible(dev.off())
  # The same for what every child runs: R loads functions lazily, and one first used in a child
  # is loaded there, into memory the child must copy (measured: 3-5 ms of CPU per job).
  local({
    dir <- tempfile("svc-warm-up-")
    dir.create(dir)
    script <- file.path(dir, "warm-up.R")
    file.create(script)
    close(file(script, open = "a"))
    source(script)
    writeLines(enc2utf8(conditionMessage(simpleError("x"))), script, useBytes = TRUE)
    tryCatch(stop("x"), error = function(e) deparse(conditionCall(e)))
    try(graphics.off(), silent = TRUE)
    try(flush.console(), silent = TRUE)
    invisible(getAllConnections())
    unlink(dir, recursive = TRUE)
  })
  invisible(gc())

  # Kills every process of the job (and what it left behind): all but ourselves. One pass is not
  # enough: a process may fork between the listing and its kill (a double fork still under way,
  # or a chain that forks itself on and exits), and its child would outlive the job. So the
  # listing is repeated after each round of kills until it shows no process not yet killed: a
  # process with a pending SIGKILL can no longer fork, and a child forked before the kill shows
  # in the next listing.
  sweep <- function() {
    known <- c(1L, Sys.getpid(), reader$pid) # spared, or already killed
    killed <- integer(0L)
    repeat {
      pids <- suppressWarnings(as.integer(list.files("/proc", pattern = "^[0-9]+$")))
      victims <- setdiff(pids, known)
      if (length(victims) == 0L) break
      tools::pskill(victims, tools::SIGKILL)
      known <- c(known, victims)
      killed <- c(killed, victims)
    }
    # kill() returns before the kernel has run a process to its end: wait until every killed
    # process is gone or a zombie (no memory, no command line, nothing it can do), so that the
    # next job never sees it. Bounded, in case one is stuck in the kernel.
    deadline <- proc.time()[[3L]] + 2
    while (length(killed) > 0L && proc.time()[[3L]] < deadline) {
      state <- vapply(killed, function(pid) {
        stat <- tryCatch(readLines(sprintf("/proc/%d/stat", pid), warn = FALSE),
                         error = function(e) "", warning = function(w) "")
        if (length(stat) == 0L || !nzchar(stat[[1L]])) return("gone")
        substr(sub(".*\\) ", "", stat[[1L]]), 1L, 1L) # the state, after "pid (comm) "
      }, "")
      killed <- killed[!(state %in% c("gone", "Z", "X"))]
      if (length(killed) > 0L) Sys.sleep(0.001)
    }
  }

  jobs <- list() # child pid (as a name) -> list(token)
  say("READY", Sys.getpid(), R.version.string)

  handle <- function(line) {
    fields <- strsplit(line, " ", fixed = TRUE)[[1L]]
    if (identical(fields[[1L]], "PING")) {
      say("PONG", 1 + 1)
    } else if (identical(fields[[1L]], "KILL") && sandboxed) {
      sweep()
    } else if (identical(fields[[1L]], "RUN") && length(fields) %in% c(5L, 6L)) {
      args <- vapply(fields[-1L], utils::URLdecode, "")
      child <- tryCatch(fork(), error = function(e) e)
      if (inherits(child, "error")) {
        say("NOFORK", fields[[2L]], gsub("[\r\n]", " ", conditionMessage(child)))
      } else if (inherits(child, "masterProcess")) {
        rm(list = ls(envir = globalenv(), all.names = TRUE), envir = globalenv())
        runChild(args[[2L]], args[[3L]], args[[4L]], if (length(args) == 5L) args[[5L]] else NA)
      } else {
        jobs[[as.character(child$pid)]] <<- list(token = fields[[2L]])
        say("STARTED", fields[[2L]], child$pid)
      }
    }
  }

  repeat {
    ready <- selectChildren(timeout = 60)
    if (!is.numeric(ready)) {
      if (length(jobs) == 0L && cpuLimit > 0 && sum(proc.time()[c(1L, 2L)]) > cpuLimit / 2) {
        say("RECYCLE")
        tools::pskill(reader$pid, tools::SIGKILL)
        quit(save = "no", status = 0L)
      }
      next
    }
    for (pid in ready) {
      message <- readChild(pid)
      key <- as.character(pid)
      if (pid == reader$pid) {
        if (is.raw(message)) {
          handle(unserialize(message))
        } else {
          # svc closed the FIFO (it stopped or died): no job may outlive it.
          for (job in names(jobs)) tools::pskill(as.integer(job), tools::SIGKILL)
          quit(save = "no", status = 0L)
        }
      } else if (!is.null(jobs[[key]])) {
        # The status comes just before the child's exit: a background process the job started
        # may hold the child's pipe open long after, so the job ends with the status message.
        status <- if (is.raw(message)) unserialize(message) else "died"
        # Nothing a job started outlives it: the next job on this slot must not be watched.
        if (sandboxed) sweep()
        say("ENDED", jobs[[key]]$token, status)
        jobs[[key]] <- NULL
      }
    }
  }
})
