# Data-parallel training on the CPU under mpirun (issue 14, docs/distributed.md):
# - 2 ranks with the global batch B end with the weights and history of 1 rank with batch B (within
#   float summation tolerance), unmasked (quickstart) and with per-sequence lengths (classify);
# - the run directory is written once: one result line, the usual files, no temporaries left;
# - a run resumes on another number of ranks (2 -> 1 and 1 -> 2) where one process would have gone;
# - a rank killed mid-run ends the job with an error within a bounded time, and last.h5 stays valid.
# Usage: test_data_parallel.py RNNTRAIN_BINARY MPIEXEC. Exits 77 (SKIP) without h5py/numpy.
import os
import signal
import subprocess
import sys
import tempfile
import time

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e} (scripts/setup.sh installs h5py and numpy)")
    sys.exit(77)

RNNTRAIN, MPIEXEC = sys.argv[1], sys.argv[2]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MPI = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
failures = []


def run(ranks, args, timeout=300):
    cmd = ([*MPI, "-np", str(ranks)] if ranks > 1 else []) + [RNNTRAIN, "train", *args, "-q"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


def weights(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


def history(d):
    with open(os.path.join(d, "history.csv")) as f:
        rows = [line.strip().split(",") for line in f]
    return rows[0], np.array([[float(v) for v in r] for r in rows[1:]])


def expect_same_run(what, one, two, rtol=1e-5):
    ha, hb = history(one), history(two)
    if ha[0] != hb[0] or ha[1].shape != hb[1].shape or not np.allclose(ha[1], hb[1], rtol=rtol, atol=1e-7):
        failures.append(f"{what}: history differs\n{ha}\n{hb}")
    wa, wb = weights(os.path.join(one, "final.h5")), weights(os.path.join(two, "final.h5"))
    if sorted(wa) != sorted(wb):
        failures.append(f"{what}: final.h5 holds other arrays: {sorted(wa)} vs {sorted(wb)}")
        return
    worst = 0.0
    for k in wa:
        if wa[k].dtype.kind != "f":
            continue
        d = np.abs(wa[k].astype(np.float64) - wb[k]).max() if wa[k].size else 0.0
        worst = max(worst, float(d))
        if not np.allclose(wa[k], wb[k], rtol=1e-4, atol=1e-5):
            failures.append(f"{what}: {k} differs by up to {d}")
    print(f"{what}: histories agree, largest weight difference {worst:.3g}")


tmp = tempfile.mkdtemp(prefix="rnntrain_dp_")
cases = {
    "quickstart": ["configs/quickstart.yaml", "train.epochs=2"],
    # per-sequence lengths (masked steps), Bidirectional stacks; no dropout, whose masks differ per rank
    "classify": ["configs/classify.yaml", "train.epochs=2", "model.layers.3.rate=0.0"],
}
for name, args in cases.items():
    one, two = os.path.join(tmp, name + "_1"), os.path.join(tmp, name + "_2")
    run(1, [*args, f"output.dir={one}"])
    out = run(2, [*args, f"output.dir={two}"])
    expect_same_run(f"{name}: 2 ranks vs 1", one, two)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if len(lines) != 1:
        failures.append(f"{name}: {len(lines)} result lines from 2 ranks, expected 1:\n{out}")
    left = sorted(f for f in os.listdir(two) if f.endswith(".tmp") or ".tmp." in f)
    if left:
        failures.append(f"{name}: temporaries left in the run directory: {left}")
    if set(os.listdir(one)) != set(os.listdir(two)):
        failures.append(f"{name}: run directories differ: {sorted(os.listdir(one))} vs {sorted(os.listdir(two))}")

# Resume on another number of ranks: the global batches and their order do not depend on the ranks.
full = os.path.join(tmp, "quickstart_1")  # 2 epochs on 1 rank, from above
for first, then in ((2, 1), (1, 2)):
    d = os.path.join(tmp, f"resume_{first}_{then}")
    run(first, ["configs/quickstart.yaml", "train.epochs=1", f"output.dir={d}"])
    run(then, ["--resume", d, "train.epochs=2"])
    expect_same_run(f"resume: 1 epoch on {first} rank(s), then 1 on {then}", full, d)

# A rank killed mid-run: mpirun ends the others and exits with an error.
d = os.path.join(tmp, "killed")
cmd = [*MPI, "-np", "2", RNNTRAIN, "train", "configs/quickstart.yaml", "train.epochs=100000", f"output.dir={d}", "-q"]
p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
deadline = time.time() + 60
while not os.path.exists(os.path.join(d, "last.h5")) and time.time() < deadline and p.poll() is None:
    time.sleep(0.1)
ranks = subprocess.run(["pgrep", "-f", f"output.dir={d}"], capture_output=True, text=True).stdout.split()
def is_rank(pid):
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return pid != p.pid and f.read().startswith(RNNTRAIN)
    except OSError:
        return False


ranks = [int(r) for r in ranks if is_rank(int(r))]
if len(ranks) != 2:
    failures.append(f"killed: expected 2 rank processes, found {ranks}")
else:
    os.kill(ranks[1], signal.SIGKILL)
    start = time.time()
    try:
        rc = p.wait(timeout=60)
        print(f"killed: mpirun exited {rc} {time.time() - start:.1f} s after a rank was killed")
        if rc == 0:
            failures.append("killed: mpirun exited 0 after a rank was killed")
    except subprocess.TimeoutExpired:
        failures.append("killed: the run did not end within 60 s of a rank being killed")
p.kill()
p.wait()
last = os.path.join(d, "last.h5")
if os.path.exists(last):
    try:
        weights(last)
    except OSError as e:
        failures.append(f"killed: last.h5 does not open: {e}")

for f in failures:
    print("FAIL:", f)
print("PASS" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
