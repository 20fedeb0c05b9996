# svc's job wrapper, the one every way of running a script job uses: a child forked by the fork
# server (fork-server.R), a fresh Rscript (script-wrapper.R) and webR (webr.engine.ts). It
# evaluates to a list of functions; each caller reports the job's end its own way.
local({
  list(
    # Before the script: the application's packages first (a directory that does not exist is
    # left out), and the CPU limit as an R error that names it (the kernel's stays the backstop).
    # An environment's library (it holds the marker file .svc-environment, written by the
    # service) is the only one besides R's own (base and recommended packages): not the node's
    # site library, for this R and for any R it starts (R_LIBS*); SVC_R_ENVIRONMENT names it.
    prepare = function(cpuLimit = 0, libraryDir = "") {
      marker <- if (!is.na(libraryDir) && nzchar(libraryDir)) file.path(libraryDir, ".svc-environment") else ""
      if (nzchar(marker) && file.exists(marker)) {
        .libPaths(libraryDir, include.site = FALSE)
        Sys.setenv(R_LIBS = libraryDir, R_LIBS_USER = libraryDir, R_LIBS_SITE = libraryDir,
                   SVC_R_ENVIRONMENT = readLines(marker, n = 1L, warn = FALSE))
      } else if (!is.na(libraryDir) && nzchar(libraryDir)) .libPaths(c(libraryDir, .libPaths()))
      if (cpuLimit > 0) setTimeLimit(cpu = cpuLimit)
      invisible(NULL)
    },
    # Runs the script in `envir`: NULL when it ran to its end, else R's error message (UTF-8, at
    # most 8000 characters), printed first as R prints an uncaught error, "Error in <call> : ".
    run = function(script, envir = globalenv()) {
      tryCatch({
        source(script, local = envir)
        NULL
      }, error = function(e) {
        call <- conditionCall(e)
        prefix <- if (is.null(call)) "Error: " else paste0("Error in ", deparse(call)[[1L]], " : ")
        message(prefix, conditionMessage(e))
        substr(enc2utf8(conditionMessage(e)), 1L, 8000L)
      })
    },
    # The CPU milliseconds of R and the programs it ran and waited for (usage statistics).
    cpuMs = function() round(1000 * sum(proc.time()[c(1L, 2L, 4L, 5L)], na.rm = TRUE))
  )
})
