#!/bin/sh
# Builds RestRserve from its public source into a private R library, for the /process bench's
# peer (bench/process.bench.ts). Its dependencies come from Debian:
#   apt-get install -y r-cran-rserve r-cran-rcpp r-cran-r6 r-cran-mime r-cran-checkmate \
#     r-cran-digest r-cran-jsonlite r-cran-uuid
# Usage: bench/restrserve-library.sh <RestRserve source directory> [library]
# The library defaults to $RESTRSERVE_LIBRARY, else ~/.cache/svc-bench/R-library (where the
# bench looks). Nothing of RestRserve is kept in this repository.
set -eu
source_dir=${1:?usage: $0 <RestRserve source directory> [library]}
library=${2:-${RESTRSERVE_LIBRARY:-$HOME/.cache/svc-bench/R-library}}
mkdir -p "$library"
R CMD INSTALL --no-docs --no-html --no-help -l "$library" "$source_dir"
