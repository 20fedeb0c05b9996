# Installs one source package for the service (src/r-engine/native/package-library.ts).
# Arguments: the .tar.gz, the (temporary) library to install into, the application's library.
# The application's library is on R_LIBS so that packages uploaded before are found as
# dependencies; nothing is fetched from the network. R CMD INSTALL's output is ours, and its
# exit status is the program's.
local({
  args <- commandArgs(trailingOnly = TRUE)
  libs <- c(args[[3L]], Sys.getenv("R_LIBS"))
  Sys.setenv(R_LIBS = paste(libs[nzchar(libs)], collapse = .Platform$path.sep))
  status <- system2(file.path(R.home("bin"), "R"),
                    c("CMD", "INSTALL", "--no-multiarch", shQuote(paste0("--library=", args[[2L]])),
                      shQuote(args[[1L]])))
  quit(save = "no", status = status)
})
