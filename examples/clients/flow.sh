#!/usr/bin/env bash
# The whole flow against svc with curl: a script job, its result, a function call.
# Needs bash, curl, zip and unzip; the JSON answers are read with sed (no jq needed).
#
# Run: SVC_URL=http://localhost:8888 bash flow.sh
set -euo pipefail
base=${SVC_URL:-http://localhost:8888}
rest=${base%/}/svc/api/rest
json='Accept: application/vnd.svc+json'

# The string value of "name" in a flat JSON answer on stdin.
field() { sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# 1. A script job: a flat ZIP holding the R script and its data.
cat > plot.R <<'R'
data <- read.csv("data.csv")
writeLines(sprintf("mean y = %.2f", mean(data$y)), "summary.txt")
pdf("plot.pdf"); plot(data$x, data$y, type = "b"); invisible(dev.off())
R
printf 'x,y\n1,2\n2,4\n3,9\n' > data.csv
zip -q job.zip plot.R data.csv

token=$(curl -sSf -X POST "$rest/jobs" -H "$json" -H 'Content-Type: application/zip' \
  -H 'X-SVC-Application-Name: demo' --data-binary @job.zip)
echo "job accepted: application $(field applicationName <<< "$token")"
result_uri=$(field resultUri <<< "$token")
job_id=$(field jobId <<< "$token")

# 2. Wait for the result: the service answers as soon as it is stored, or 404 after 30 s.
for _ in $(seq 1 20); do
  status=$(curl -sS -o result.json -w '%{http_code}' -H "$json" "$result_uri?wait=30")
  [ "$status" != 404 ] && break
done
[ "$status" = 200 ] || { echo "no result: HTTP $status" >&2; exit 1; }
result=$(cat result.json)
success=$(sed -n 's/.*"success":\([a-z]*\).*/\1/p' <<< "$result")
echo "result: success=$success type=$(field type <<< "$result")"

# 3. Download the result: a ZIP of every file the script wrote.
curl -sSf -o result.zip "$(field dataUri <<< "$result")"
echo "result files: $(unzip -Z1 result.zip | sort | tr '\n' ' ' | sed 's/ $//')"
echo "summary.txt: $(unzip -p result.zip summary.txt)"

# 4. The application's results list the job until it is deleted.
listing=$(curl -sSf -H "$json" "$(field applicationResultsUri <<< "$token")")
listed=no
grep -q "\"jobId\":\"$job_id\"" <<< "$listing" && listed=yes
echo "listed in application results: $listed"

# 5. Delete the result (and its job); afterwards its link answers 404.
self_uri=$(field selfUri <<< "$result")
deleted=$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$self_uri")
gone=$(curl -sS -o /dev/null -w '%{http_code}' -H "$json" "$self_uri")
echo "deleted: $deleted, then $gone"

# 6. A function call of the demo application, answered at once:
#    {"n":4,"k":2,"combinations":[[1,2],[1,3],…]}
answer=$(curl -sSf -X POST "$rest/process" -H 'X-SVC-Application-Name: demo' \
  -H 'Content-Type: application/json' -d '{"RFunction":"combn","n":4,"k":2}')
pairs=$(grep -o '\[[0-9][0-9,]*\]' <<< "$answer")
first=$(head -1 <<< "$pairs" | tr -d '[]' | tr ',' ' ')
echo "combn(4, 2): $(wc -l <<< "$pairs") combinations, the first $first"

# 7. A failing function answers 400 with R's message.
status=$(curl -sS -o fail.json -w '%{http_code}' -X POST "$rest/process" \
  -H 'X-SVC-Application-Name: demo' -H 'Content-Type: application/json' -d '{"RFunction":"fail"}')
echo "fail: $status $(field errorMessage < fail.json)"

# 8. An exported function of the demo application, called with named JSON arguments: [11,12,13]
answer=$(curl -sSf -X POST "$rest/functions/demo/sum2" -H 'Content-Type: application/json' \
  -d '{"x":[1,2,3],"y":10}')
echo "sum2: $(tr -d '[]' <<< "$answer" | tr ',' ' ')"

[ "$success" = true ] && [ "$listed" = yes ] && [ "$deleted" = 204 ]
