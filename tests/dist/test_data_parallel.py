# Data-parallel training on the CPU under mpirun (issue 14, docs/distributed.md):
# - 2 ranks with the global batch B end with the weights and history of 1 rank with batch B (within
#   float summation tolerance), unmasked (quickstart) and with per-sequence lengths (classify);
# - the run directory is written once: one result line, the usual files, no temporaries left;
# - eval under mpirun prints one result equal to one rank's, predict writes its file once;
# - bench under mpirun reports once, with the all-reduce's share of the step;
# - processes a launcher started but MPI cannot connect (srun without PMI) are refused;
# - a run resumes on another number of ranks (2 -> 1 and 1 -> 2) where one process would have gone;
# - SIGTERM to one rank stops every rank after the same step, saved and resumable;
# - a rank killed mid-run ends the job with an error within a bounded time, and last.h5 stays valid.
# Usage: test_data_parallel.py RNNTRAIN_BINARY MPIEXEC. Exits 77 (SKIP) without h5py/numpy.
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    from common import ROOT, history, mpi, weights
except ImportError as e:
    print(f"SKIP: {e} (scripts/setup.sh installs h5py and numpy)")
    sys.exit(77)

RNNTRAIN, MPIEXEC = sys.argv[1], sys.argv[2]
MPI = mpi(MPIEXEC)
failures = []


def run(ranks, args, timeout=300):
    cmd = ([*MPI, "-np", str(ranks)] if ranks > 1 else []) + [RNNTRAIN, "train", *args, "-q"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p.stdout


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
atexit.register(shutil.rmtree, tmp, ignore_errors=True)
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

# eval and predict under mpirun: the ranks share eval's batches and one prints the result; predict is
# written once, by rank 0.
w = os.path.join(tmp, "quickstart_1", "final.h5")
evals = {}
for ranks in (1, 2):
    cmd = ([*MPI, "-np", str(ranks)] if ranks > 1 else []) + [RNNTRAIN, "eval", "configs/quickstart.yaml", "--weights", w, "--json"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120).stdout
    evals[ranks] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
if len(evals[2]) != 1 or abs(evals[2][0]["loss"] - evals[1][0]["loss"]) > 1e-9 * abs(evals[1][0]["loss"]):
    failures.append(f"eval: 2 ranks printed {evals[2]}, 1 rank {evals[1]}")
else:
    print(f"eval: 2 ranks print one result, loss {evals[2][0]['loss']} (1 rank: {evals[1][0]['loss']})")
pred = os.path.join(tmp, "pred.npy")
subprocess.run([*MPI, "-np", "2", RNNTRAIN, "predict", "configs/quickstart.yaml", "--weights", w, "-o", pred, "-q"],
               cwd=ROOT, check=True, timeout=120)
subprocess.run([RNNTRAIN, "predict", "configs/quickstart.yaml", "--weights", w, "-o", pred + ".1.npy", "-q"],
               cwd=ROOT, check=True, timeout=120)
if not np.array_equal(np.load(pred), np.load(pred + ".1.npy")):
    failures.append("predict: 2 ranks wrote other predictions than 1 rank")

# bench under mpirun: one report, with the all-reduce's share of the step.
out = subprocess.run([*MPI, "-np", "2", RNNTRAIN, "bench", "configs/quickstart.yaml", "device=cpu", "--steps", "10",
                      "--repeats", "3", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=300).stdout
shares = [line for line in out.splitlines() if "data-parallel over 2 rank(s)" in line]
if out.count("winner:") != 1 or len(shares) != 1:
    failures.append(f"bench: expected one report with one data-parallel line from 2 ranks:\n{out}")
else:
    print("bench:", " ".join(shares[0].split()))

# srun without a PMI plugin starts processes that MPI cannot connect: each would train alone and write
# the same run directory. rnntrain refuses before touching it.
d = os.path.join(tmp, "srun_unconnected")
p = subprocess.run([RNNTRAIN, "train", "configs/quickstart.yaml", f"output.dir={d}", "-q"], cwd=ROOT, capture_output=True,
                   text=True, timeout=60, env={**os.environ, "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "0"})
if p.returncode != 2 or "--mpi=pmix" not in p.stderr or os.path.exists(d):
    failures.append(f"srun without PMI: expected exit 2 naming --mpi=pmix and no run directory, got {p.returncode}:\n"
                    f"{p.stderr}")
else:
    print("srun without PMI:", p.stderr.strip().splitlines()[0])

# An activity regularizer divides by the whole batch, which no rank sees: refused before training.
d = os.path.join(tmp, "activity_refused")
p = subprocess.run([*MPI, "-np", "2", RNNTRAIN, "train", "configs/quickstart.yaml", "model.layers.1.activity_regularizer=l2",
                    f"output.dir={d}", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=120)
if p.returncode == 0 or "activity_regularizer" not in p.stderr or "one process" not in p.stderr:
    failures.append(f"activity regularizer on 2 ranks: expected a refusal naming it, got {p.returncode}:\n{p.stderr}")
else:
    print("activity regularizer on 2 ranks:", next(l for l in p.stderr.splitlines() if "activity_regularizer" in l))

# Resume on another number of ranks: the global batches and their order do not depend on the ranks.
full = os.path.join(tmp, "quickstart_1")  # 2 epochs on 1 rank, from above
for first, then in ((2, 1), (1, 2)):
    d = os.path.join(tmp, f"resume_{first}_{then}")
    run(first, ["configs/quickstart.yaml", "train.epochs=1", f"output.dir={d}"])
    run(then, ["--resume", d, "train.epochs=2"])
    expect_same_run(f"resume: 1 epoch on {first} rank(s), then 1 on {then}", full, d)


def start_endless(d):
    """A 2-rank run of quickstart for 100000 epochs, once its first last.h5 exists: (mpirun, rank pids)."""
    cmd = [*MPI, "-np", "2", RNNTRAIN, "train", "configs/quickstart.yaml", "train.epochs=100000", f"output.dir={d}", "-q"]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(d, "last.h5")) and time.time() < deadline and p.poll() is None:
        time.sleep(0.1)
    pids = subprocess.run(["pgrep", "-f", f"output.dir={d}"], capture_output=True, text=True).stdout.split()

    def is_rank(pid):
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                return pid != p.pid and f.read().startswith(RNNTRAIN)
        except OSError:
            return False

    return p, [int(r) for r in pids if is_rank(int(r))]


# SIGTERM to one rank only: every rank stops after the same step (no hang in mismatched collectives),
# the run exits 143 with last.h5 at that step, and resumes from it on 2 ranks.
d = os.path.join(tmp, "sigterm_one_rank")
p, ranks = start_endless(d)
if len(ranks) != 2:
    failures.append(f"sigterm: expected 2 rank processes, found {ranks}")
else:
    os.kill(ranks[1], signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=60)
        stopped = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        print(f"sigterm to rank 1: mpirun exited {p.returncode}; {stopped[-1].get('interrupted') if stopped else out}")
        if p.returncode != 143 or len(stopped) != 1 or "interrupted" not in stopped[0]:
            failures.append(f"sigterm: expected exit 143 and one interrupted result line, got {p.returncode}:\n{out}")
        else:
            epoch = stopped[0]["interrupted"]["epoch"]
            resumed = run(2, ["--resume", d, f"train.epochs={epoch}"])
            if f'"epochs":{epoch}' not in resumed:
                failures.append(f"sigterm: resuming did not finish epoch {epoch}:\n{resumed}")
    except subprocess.TimeoutExpired:
        failures.append("sigterm: the ranks did not stop within 60 s of SIGTERM to one of them (mismatched collectives)")
        p.kill()
        p.wait()

# A rank killed mid-run: mpirun ends the others and exits with an error.
d = os.path.join(tmp, "killed")
p, ranks = start_endless(d)
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
