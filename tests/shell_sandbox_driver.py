"""Runs command lines through real shells inside the bwrap sandbox of
test_shell_differential.py and reports what each ran and wrote (JSON on stdout).

argv: the JSON file of lines, the work folder, the trace file, HOME, then NAME=PATH for
each shell. Every line starts in an empty work folder holding one file, ``in``."""

import json
import os
import shutil
import subprocess
import sys

lines_file, work, trace, home, *shells = sys.argv[1:]
results = []
for line in json.load(open(lines_file, encoding="utf-8")):
    per_shell = {}
    for spec in shells:
        name, path = spec.split("=", 1)
        shutil.rmtree(work, ignore_errors=True)
        os.mkdir(work)
        with open(os.path.join(work, "in"), "w") as handle:
            handle.write("input\n")
        open(trace, "w").close()
        argv0 = "sh" if name == "bash-as-sh" else os.path.basename(path)
        try:
            done = subprocess.run([argv0, "-c", line], executable=path, cwd=work,
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=5,
                                  env={"PATH": "/usr/bin", "TRACE": trace, "HOME": home})
            stderr, status = done.stderr.decode("utf-8", "replace")[-400:], done.returncode
        except subprocess.TimeoutExpired:
            stderr, status = "timeout", -1
        runs = [record.split("\x1f") for record in
                open(trace, encoding="utf-8", errors="replace").read().split("\x1e") if record]
        files = sorted(name for name in os.listdir(work) if name != "in")
        per_shell[name] = {"runs": runs, "files": files, "stderr": stderr, "status": status}
    results.append(per_shell)
json.dump(results, sys.stdout)
