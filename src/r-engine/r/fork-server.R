# svc fork server: a warm R process that forks one child per script job (see
# src/r-engine/native/fork-server.ts and docs/architecture.md). It never runs job code itself.
#
# Protocol, one line per message:
#   svc -> server (FIFO):    RUN <token> <workDir> <scriptName> <privateDir> <output> [<libraryDir> [<traceparent>]]
#                            (fields URL-encoded; output: the FIFO the child's stdout and stderr
#                            go to, read by svc; libraryDir: the application's packages, empty
#                            for none; traceparent: the run's W3C trace context, for the job's R)
#                            PING
#                            KILL <token>   (sandboxed: kill the job and everything it left)
#   server -> svc (stdout):  READY <pid> <R.version.string>
#                            STARTED <token> <child pid>
#                            ENDED <token> <kind> <status> <cpu ms> <message>
#                              kind: ok | r-error | exit | setup | died; message %-encoded bytes
#                            BROKEN <reason> (the job left something behind that the server
#                              cannot undo: it quits, and svc starts a fresh one)
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
  # The svc environment for the jobs (svc-env.R), on the search path that every child inherits.
  eval(parse(file = commandArgs(trailingOnly = TRUE)[[1L]], keep.source = FALSE))()
  # The job wrapper every child runs its script with (run-job.R).
  job <- eval(parse(file = commandArgs(trailingOnly = TRUE)[[2L]], keep.source = FALSE))

  say <- function(...) {
    cat(paste(...), "\n", sep = "")
    flush(stdout())
  }

  # In a child: point fds 0, 1 and 2 away from the server's pipes (the lowest free descriptor is
  # the one a new file gets), so R's output and that of any program it starts goes to the run's
  # output FIFO, which svc reads: no file in a place the job can write is ever read by svc.
  redirect <- function(output) {
    closeFD(0L)
    stdinCon <- file("/dev/null", open = "r")
    closeStdout(FALSE)
    outCon <- file(output, open = "ab", raw = TRUE)
    closeStderr(FALSE)
    errCon <- file(output, open = "ab", raw = TRUE)
    list(stdinCon, outCon, errCon)
  }

  # What a child says of its end is the job's word, so it is read as bytes, bounded, and never
  # unserialized (a crafted serialization could harm the server): "<kind> <status> <cpu> <text>".
  encode <- function(bytes) {
    if (length(bytes) == 0L) return("")
    codes <- as.integer(bytes)
    plain <- (codes >= 48L & codes <= 57L) | (codes >= 65L & codes <= 90L) |
      (codes >= 97L & codes <= 122L)
    out <- sprintf("%%%02X", codes)
    out[plain] <- rawToChar(bytes[plain], multiple = TRUE)
    paste(out, collapse = "")
  }
  report <- function(message) {
    died <- "died 0 -1 "
    if (!is.raw(message) || length(message) == 0L) return(died)
    message <- message[seq_len(min(length(message), 16384L))]
    spaces <- which(message == as.raw(32L))
    if (length(spaces) < 3L) return(died)
    head <- tryCatch(rawToChar(message[seq_len(spaces[[3L]] - 1L)]), error = function(e) "")
    parts <- strsplit(head, " ", fixed = TRUE)[[1L]]
    if (length(parts) != 3L || !(parts[[1L]] %in% c("ok", "r-error", "exit", "setup"))) {
      return(died)
    }
    code <- suppressWarnings(as.integer(parts[[2L]]))
    cpu <- suppressWarnings(as.numeric(parts[[3L]]))
    text <- if (length(message) > spaces[[3L]]) message[(spaces[[3L]] + 1L):length(message)] else raw(0L)
    paste(parts[[1L]], if (is.na(code)) 1L else code,
          if (is.na(cpu) || cpu < 0) -1 else round(cpu), encode(text))
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

  runChild <- function(workDir, scriptName, privateDir, output, libraryDir, traceparent, hold) {
    # R's own exit would close devices and connections; a forked child leaves through _exit, so
    # it does that itself (an unclosed pdf() or file() still gets written out).
    finish <- function(kind, code, message = "") {
      try(graphics.off(), silent = TRUE)
      try(flush.console(), silent = TRUE)
      # Not closeAllConnections(): its full gc() would touch, and so copy, the whole shared heap.
      for (con in getAllConnections()[-(1:3)]) try(close(getConnection(con)), silent = TRUE)
      # Its CPU milliseconds (a forked child's counters start at zero), for usage statistics.
      # As bytes (raw.asis): mcexit's own send would serialize it.
      try(sendMaster(charToRaw(paste(kind, code, job$cpuMs(), message)), TRUE), silent = TRUE)
      exitChild(code)
    }
    tryCatch(
      {
        close(input)
        connections <- redirect(output)
        close(hold)
        setwd(workDir)
        tmp <- file.path(privateDir, "tmp")
        Sys.setenv(HOME = workDir, TMPDIR = tmp)
        # The run's trace, for the script's own logging (as a spawned run gets it from svc).
        if (!is.na(traceparent)) {
          Sys.setenv(TRACEPARENT = traceparent, SVC_TRACE_ID = strsplit(traceparent, "-")[[1L]][2L])
        }
        # Warnings appear in the log as they happen: the child never returns to a top level.
        options(warn = 1L)
        base <- baseenv()
        replace <- function(name, value) {
          unlockBinding(name, base)
          assign(name, value, envir = base)
          lockBinding(name, base)
        }
        replace("tempdir", function(check = FALSE) tmp)
        stopR <- function(save = "default", status = 0, runLast = TRUE) {
          finish("exit", as.integer(status))
        }
        replace("quit", stopR)
        replace("q", stopR)
        compiler::enableJIT(defaultJit)
        job$prepare(cpuLimit, libraryDir)
      },
      error = function(e) finish("setup", 70L, conditionMessage(e))
    )
    failure <- job$run(scriptName)
    if (is.null(failure)) finish("ok", 0L) else finish("r-error", 1L, failure)
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
    job$run(script)
    writeLines("stop('x')", script)
    suppressMessages(job$run(script))
    writeLines(enc2utf8(conditionMessage(simpleError("x"))), script, useBytes = TRUE)
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
  # Whether it worked: FALSE when a killed process did not end within the bound.
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
    repeat {
      state <- vapply(killed, processState, "")
      killed <- killed[!(state %in% c("gone", "Z", "X"))]
      if (length(killed) == 0L) return(TRUE)
      if (proc.time()[[3L]] >= deadline) return(FALSE)
      Sys.sleep(0.001)
    }
  }

  # A process's state letter from /proc/<pid>/stat, or "gone". suppressWarnings, not a warning
  # handler: a handler would leave file()'s failed open half done, and the connection it made
  # would never be freed (R has 128, and a job that left 200 processes used them all up).
  processState <- function(pid) {
    stat <- suppressWarnings(tryCatch(readLines(sprintf("/proc/%d/stat", pid), warn = FALSE),
                                      error = function(e) character(0L)))
    if (length(stat) == 0L || !nzchar(stat[[1L]])) return("gone")
    substr(sub(".*\\) ", "", stat[[1L]]), 1L, 1L) # the state, after "pid (comm) "
  }

  # A child's writes are added to the server's write_bytes (which svc reads for the bytes-written
  # limit) only when it is reaped, not when it exits: wait for that, bounded. parallel reaps its
  # children on SIGCHLD, so this is a few milliseconds at most.
  awaitReaped <- function(pid) {
    deadline <- proc.time()[[3L]] + 1
    while (processState(pid) != "gone" && proc.time()[[3L]] < deadline) {
      tryCatch(readChild(pid), error = function(e) NULL)
      Sys.sleep(0.001)
    }
  }

  # System V IPC objects outlive the processes that made them, in the sandbox's own IPC
  # namespace that the slot's next job shares: removed after each job (the job's processes are
  # gone by then, so nothing is attached). Only a job that made one pays for ipcrm.
  clearIpc <- function() {
    used <- vapply(c("shm", "sem", "msg"), function(kind) {
      lines <- suppressWarnings(tryCatch(readLines(file.path("/proc/sysvipc", kind), warn = FALSE),
                                         error = function(e) character(0L)))
      length(lines) > 1L
    }, TRUE)
    if (any(used)) {
      system2("ipcrm", "--all", stdout = FALSE, stderr = FALSE)
    }
    used <- vapply(c("shm", "sem", "msg"), function(kind) {
      lines <- suppressWarnings(tryCatch(readLines(file.path("/proc/sysvipc", kind), warn = FALSE),
                                         error = function(e) character(0L)))
      length(lines) > 1L
    }, TRUE)
    !any(used)
  }

  jobs <- list() # child pid (as a name) -> list(token)
  # A job that leaks a connection of the server's would, job after job, use up R's 128.
  # (getAllConnections(): showConnections() costs some 30 ms a call.)
  connectionsAtStart <- length(getAllConnections())
  say("READY", Sys.getpid(), R.version.string)

  handle <- function(line) {
    fields <- strsplit(line, " ", fixed = TRUE)[[1L]]
    if (identical(fields[[1L]], "PING")) {
      say("PONG", 1 + 1)
    } else if (identical(fields[[1L]], "KILL") && sandboxed) {
      sweep()
    } else if (identical(fields[[1L]], "RUN") && length(fields) %in% 6:8) {
      args <- vapply(fields[-1L], utils::URLdecode, "")
      # The output FIFO is open before the fork, so svc sees a writer from STARTED until the
      # job's last process has ended (then, end of file).
      hold <- tryCatch(file(args[[5L]], open = "ab", raw = TRUE), error = function(e) e)
      if (inherits(hold, "error")) {
        say("NOFORK", fields[[2L]], gsub("[\r\n]", " ", conditionMessage(hold)))
        return(invisible())
      }
      child <- tryCatch(fork(), error = function(e) e)
      if (inherits(child, "error")) {
        close(hold)
        say("NOFORK", fields[[2L]], gsub("[\r\n]", " ", conditionMessage(child)))
      } else if (inherits(child, "masterProcess")) {
        rm(list = ls(envir = globalenv(), all.names = TRUE), envir = globalenv())
        runChild(args[[2L]], args[[3L]], args[[4L]], args[[5L]],
                 if (length(args) >= 6L && nzchar(args[[6L]])) args[[6L]] else NA,
                 if (length(args) == 7L) args[[7L]] else NA, hold)
      } else {
        close(hold)
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
        status <- report(message)
        # Nothing a job started outlives it: the next job on this slot must not be watched, nor
        # find its IPC objects. What cannot be undone ends this server (svc starts a new one).
        broken <- NULL
        if (sandboxed) {
          if (!sweep()) broken <- "a process of the job did not end"
          else if (!clearIpc()) broken <- "IPC objects of the job could not be removed"
        }
        if (is.null(broken) && length(getAllConnections()) > connectionsAtStart) {
          broken <- "the job left R connections of the server open"
        }
        awaitReaped(pid)
        say("ENDED", jobs[[key]]$token, status)
        jobs[[key]] <- NULL
        if (!is.null(broken)) {
          say("BROKEN", broken)
          tools::pskill(reader$pid, tools::SIGKILL)
          quit(save = "no", status = 3L)
        }
      }
    }
  }
})
