"""The whole flow against svc with requests: a script job, its result, a function call.

Run: SVC_URL=http://localhost:8888 python3 flow.py
"""
import io
import os
import sys
import zipfile

import requests

BASE = os.environ.get("SVC_URL", "http://localhost:8888").rstrip("/")
REST = BASE + "/svc/api/rest"
JSON = {"Accept": "application/vnd.svc+json"}

SCRIPT = """data <- read.csv("data.csv")
writeLines(sprintf("mean y = %.2f", mean(data$y)), "summary.txt")
pdf("plot.pdf"); plot(data$x, data$y, type = "b"); invisible(dev.off())
"""
DATA = "x,y\n1,2\n2,4\n3,9\n"

# 1. A script job: a flat ZIP holding the R script and its data.
archive = io.BytesIO()
with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zip_file:
    zip_file.writestr("plot.R", SCRIPT)
    zip_file.writestr("data.csv", DATA)
answer = requests.post(
    REST + "/jobs",
    data=archive.getvalue(),
    headers={**JSON, "Content-Type": "application/zip", "X-SVC-Application-Name": "demo"},
)
answer.raise_for_status()
token = answer.json()["jobToken"]
print("job accepted: application", token["applicationName"])

# 2. Wait for the result: the service answers as soon as it is stored, or 404 after 30 s.
for _ in range(20):
    answer = requests.get(token["resultUri"], params={"wait": 30}, headers=JSON)
    if answer.status_code != 404:
        break
answer.raise_for_status()
result = answer.json()["result"]
print("result: success=%s type=%s" % (str(result["success"]).lower(), result["type"]))

# 3. Download the result: a ZIP of every file the script wrote.
data = requests.get(result["dataUri"])
data.raise_for_status()
with zipfile.ZipFile(io.BytesIO(data.content)) as zip_file:
    print("result files:", " ".join(sorted(zip_file.namelist())))
    print("summary.txt:", zip_file.read("summary.txt").decode().strip())

# 4. The application's results list the job until it is deleted.
listing = requests.get(token["applicationResultsUri"], headers=JSON).json()["results"]
entries = listing["result"] if listing else []
entries = entries if isinstance(entries, list) else [entries]  # one result is not a list
listed = any(entry["jobId"] == token["jobId"] for entry in entries)
print("listed in application results:", "yes" if listed else "no")

# 5. Delete the result (and its job); afterwards its link answers 404.
deleted = requests.delete(result["selfUri"])
gone = requests.get(result["selfUri"], headers=JSON)
print("deleted: %d, then %d" % (deleted.status_code, gone.status_code))

# 6. A function call of the demo application, answered at once.
call = {"RFunction": "combn", "n": 4, "k": 2}
answer = requests.post(REST + "/process", json=call, headers={"X-SVC-Application-Name": "demo"})
answer.raise_for_status()
combinations = answer.json()["combinations"]
print(
    "combn(4, 2): %d combinations, the first %s"
    % (len(combinations), " ".join(str(i) for i in combinations[0]))
)

# 7. A failing function answers 400 with R's message.
answer = requests.post(
    REST + "/process", json={"RFunction": "fail"}, headers={"X-SVC-Application-Name": "demo"}
)
print("fail: %d %s" % (answer.status_code, answer.json()["errorMessage"]))

# 8. An exported function of the demo application, called with named JSON arguments.
answer = requests.post(REST + "/functions/demo/sum2", json={"x": [1, 2, 3], "y": 10})
answer.raise_for_status()
print("sum2:", " ".join("%g" % value for value in answer.json()))

sys.exit(0 if result["success"] and listed and deleted.status_code == 204 else 1)
