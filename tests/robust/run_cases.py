#!/usr/bin/env python3
"""Runs the bad-input corpus (tests/robust/make_cases.py) against an rnntrain binary: every case in
parallel with a timeout (a hang is a failure), checking the exit code, the message fragments, that
stderr holds no crash or raw library text, and that existing outputs were left alone.

    python3 tests/robust/run_cases.py RNNTRAIN_BINARY [-k SUBSTRING] [--keep DIR]

Cases marked "pending" (a defect whose fix has not landed) are reported apart and do not fail the
run unless RNNTRAIN_ROBUST_STRICT=1. RNNTRAIN_ROBUST_TIMEOUT sets the per-case limit (default 20 s;
scripts/test.sh --sanitize raises it for the slower ASan build). ctest runs it as robust_corpus."""
import argparse
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_cases  # noqa: E402

# Text that means a crash, a sanitizer report or a library's raw message reached the user.
FORBIDDEN = ["std::", "bad_alloc", "json.exception", "terminate called", "Segmentation", "AddressSanitizer",
             "LeakSanitizer", "runtime error:", "Aborted", "core dumped", "YAML::", "HDF5-DIAG"]

# No error message needs more than this (a bad 5 MB CSV cell must not be echoed whole).
MAX_STDERR = 20000


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_case(binary, root, case, timeout):
    before = {p: digest(os.path.join(root, p)) for p in case["protect"]}
    try:
        r = subprocess.run([binary, *case["args"]], cwd=root, capture_output=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return "hang", f"no exit within {timeout} s"
    err = r.stderr.decode(errors="replace")
    problems = []
    kind = "fail"
    bad = [f for f in FORBIDDEN if f in err]
    if r.returncode < 0 or r.returncode > 2 or bad:
        kind = "crash"
        problems.append(f"exit {r.returncode}" + (f", stderr has {bad}" if bad else ""))
    elif r.returncode != case["exit"]:
        problems.append(f"exit {r.returncode}, expected {case['exit']}")
    if len(err) > MAX_STDERR:
        problems.append(f"{len(err)} bytes on stderr (a message echoes too much)")
    missing = [f for f in case["expect"] if f not in err]
    if missing:
        problems.append(f"stderr lacks {missing}")
    misleading = [f for f in case["absent"] if f in err]
    if misleading:
        problems.append(f"stderr has {misleading}")
    for p, d in before.items():
        full = os.path.join(root, p)
        if not os.path.exists(full) or digest(full) != d:
            problems.append(f"{p} was damaged")
    if not problems:
        return "pass", ""
    last = [line for line in err.strip().splitlines() if line.strip()][-3:]
    return kind, "; ".join(problems) + " | stderr: " + " / ".join(last)[:400]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("-k", default="", help="run only the cases whose name contains this")
    ap.add_argument("--keep", help="write the corpus into this directory and keep it")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    timeout = float(os.environ.get("RNNTRAIN_ROBUST_TIMEOUT", "20"))
    strict = os.environ.get("RNNTRAIN_ROBUST_STRICT") == "1"
    root = os.path.abspath(a.keep) if a.keep else tempfile.mkdtemp(prefix="rnntrain-robust-")
    try:
        os.makedirs(root, exist_ok=True)
        cases = [c for c in make_cases.make(binary, root) if a.k in c["name"]]
        with concurrent.futures.ThreadPoolExecutor(a.j) as pool:
            results = list(pool.map(lambda c: run_case(binary, root, c, timeout), cases))
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    counts = {"pass": 0, "fail": 0, "crash": 0, "hang": 0}
    pending_fail, pending_pass, failures = [], [], []
    for c, (kind, why) in zip(cases, results):
        counts[kind] += 1
        cmd = "rnntrain " + " ".join(c["args"])
        if "pending" in c:
            (pending_pass if kind == "pass" else pending_fail).append((c, kind, why, cmd))
        elif kind != "pass":
            failures.append((c, kind, why, cmd))
    print(f"robust: {len(cases)} cases run, {counts['pass']} passed, {counts['fail']} wrong, {counts['crash']} crashes, "
          f"{counts['hang']} hangs; {len(failures)} failing, {len(pending_fail)} pending (a fix has not landed), "
          f"{len(pending_pass)} pending that now pass")
    for c, kind, why, cmd in failures:
        print(f"FAIL {kind} {c['name']}: {cmd}: {why}")
    for c, kind, why, cmd in pending_fail:
        print(f"PENDING {kind} {c['name']} ({c['pending']}): {cmd}: {why}")
    for c, kind, why, cmd in pending_pass:
        print(f"PENDING-PASSES {c['name']} ({c['pending']}): the fix landed; remove the pending mark")
    sys.exit(1 if failures or (strict and pending_fail) else 0)


if __name__ == "__main__":
    main()
