# Data-parallel training on the GPU through NCCL, as one GPU allows (issue 14, docs/distributed.md):
# - `mpirun -np 1 rnntrain train` takes the data-parallel path (NCCL all-reduce of the gradients, the
#   loss sum and the positions, inside a CUDA graph wherever the plain run captures one) and ends with the loss history and the
#   weights of a plain run: unmasked fp32 (quickstart), per-sequence lengths with Bidirectional stacks
#   and dropout (classify), fp16 with its dynamic loss scale, and clipnorm (rank 0's factors broadcast);
# - the same with the gradients summed in buckets during backward, on a second stream (classify with
#   RNNTRAIN_ALLREDUCE_BUCKET_MB=0.0002);
# - more ranks on a machine than it has GPUs is refused with the reason, before any NCCL call.
# Usage: test_nccl.py RNNTRAIN_BINARY MPIEXEC. Exits 77 (SKIP) without a usable GPU or h5py/numpy.
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    from common import ROOT, history, mpi, weight_difference
except ImportError as e:
    print(f"SKIP: {e} (scripts/setup.sh installs h5py and numpy)")
    sys.exit(77)

RNNTRAIN, MPIEXEC = sys.argv[1], sys.argv[2]
MPI = mpi(MPIEXEC)
tmp = tempfile.mkdtemp(prefix="rnntrain_nccl_")
atexit.register(shutil.rmtree, tmp, ignore_errors=True)
failures = []

probe = subprocess.run([RNNTRAIN, "train", "configs/quickstart.yaml", "device=cuda", "train.epochs=1",
                        "train.steps_per_epoch=1", f"output.dir={tmp}/probe", "-q"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
if probe.returncode != 0:
    print(f"SKIP: no GPU to train on here: {probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else probe.returncode}")
    sys.exit(77)


def run(launched, args, env=None):
    cmd = ([*MPI, "-np", "1"] if launched else []) + [RNNTRAIN, "train", *args, "device=cuda", "-v"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr[-4000:]}")
    return p.stderr


# name: (arguments, environment, the fewest gradient buckets summed during backward)
cases = {
    "quickstart_fp32": (["configs/quickstart.yaml", "train.epochs=2"], {}, 0),
    "classify_masked": (["configs/classify.yaml", "train.epochs=2"], {}, 0),
    "quickstart_fp16": (["configs/quickstart.yaml", "train.epochs=2", "plan.precision=fp16"], {}, 0),
    # rank 0's clipping factors broadcast inside the step
    "quickstart_clipnorm": (["configs/quickstart.yaml", "train.epochs=2", "train.optimizer.clipnorm=0.05"], {}, 0),
    # buckets of 200 bytes: each stage's gradients (Dense's, the stack's) are summed on their own stream
    # as backward goes on
    "classify_overlapped": (["configs/classify.yaml", "train.epochs=2"], {"RNNTRAIN_ALLREDUCE_BUCKET_MB": "0.0002"}, 2),
}
for name, (args, env, fewest) in cases.items():
    plain, one = os.path.join(tmp, name + "_plain"), os.path.join(tmp, name + "_nccl")
    plain_log = run(False, [*args, f"output.dir={plain}"])
    log = run(True, [*args, f"output.dir={one}"], env)
    nccl = [line for line in log.splitlines() if "NCCL" in line]
    buckets = [int(m) for m in re.findall(r"gradients summed in (\d+) bucket", log)]
    if not buckets or buckets[0] < fewest:
        failures.append(f"{name}: expected at least {fewest} gradient buckets during backward, the log says {buckets}")
    captured = sum("captured the training step" in line for line in log.splitlines())
    plain_captured = sum("captured the training step" in line for line in plain_log.splitlines())
    if not nccl:
        failures.append(f"{name}: the launched run did not report NCCL:\n{log[-3000:]}")
    if captured != plain_captured:
        failures.append(f"{name}: the launched run captured {captured} CUDA graphs, the plain run {plain_captured}")
    ha, hb = history(plain), history(one)
    hist_diff = float(np.abs(ha[1] - hb[1]).max()) if ha[1].shape == hb[1].shape else float("inf")
    if ha[0] != hb[0] or not np.allclose(ha[1], hb[1], rtol=1e-5, atol=1e-7):
        failures.append(f"{name}: history differs\n{ha}\n{hb}")
    worst = weight_difference(os.path.join(plain, "final.h5"), os.path.join(one, "final.h5"))
    if worst > 1e-5:
        failures.append(f"{name}: final weights differ by up to {worst}")
    print(f"{name}: {nccl[0].split('] ', 1)[-1] if nccl else 'no NCCL line'}; {captured} graph capture(s) "
          f"({plain_captured} plain); "
          f"loss {' '.join(f'{v:.6f}' for v in hb[1][:, ha[0].index('loss')])} (plain "
          f"{' '.join(f'{v:.6f}' for v in ha[1][:, ha[0].index('loss')])}); history differs by {hist_diff:.3g}, "
          f"weights by {worst:.3g}")

# More ranks than GPUs on the machine: refused with the reason (NCCL takes one GPU per rank).
gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU ")
if gpus >= 1:
    n = gpus + 1
    p = subprocess.run([*MPI, "-np", str(n), RNNTRAIN, "train", "configs/quickstart.yaml", "device=cuda",
                        f"output.dir={tmp}/too_many"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    if p.returncode == 0 or "one GPU per rank" not in p.stderr:
        failures.append(f"{n} ranks on {gpus} GPU(s): expected a refusal naming one GPU per rank, got exit "
                        f"{p.returncode}:\n{p.stderr[-2000:]}")
    else:
        msg = [line for line in p.stderr.splitlines() if "one GPU per rank" in line][0]
        print(f"{n} ranks on {gpus} GPU(s): exit {p.returncode}: {msg.split('] ', 1)[-1]}")

for f in failures:
    print("FAIL:", f)
print("PASS" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
