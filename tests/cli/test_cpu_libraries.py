# Issue 18 item 6: a CPU run of the CUDA build loads none of the large CUDA libraries. cuBLAS is
# loaded when first called (src/backend/cuda/cublas_lazy.cpp): `--version`, and training on the
# CPU (device: cpu, and device: auto where no GPU is visible), must not load libcublas or
# libcublasLt (~150 MB resident), nor cuDNN's kernel libraries; the dynamic loader's own log
# (LD_DEBUG=files) says what was loaded. Skips for a build without the CUDA backend.
# Usage: test_cpu_libraries.py RNNTRAIN_BINARY
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

BIN = os.path.abspath(sys.argv[1])
HEAVY = re.compile(r"libcublas(Lt)?\.so|libcudnn_(ops|adv|cnn|engines)")


def loaded(args, env_extra=None):
    env = dict(os.environ, LD_DEBUG="files", **(env_extra or {}))
    r = subprocess.run([BIN, *args], capture_output=True, text=True, env=env, timeout=300)
    libs = sorted(set(re.findall(r"file=(\S+)\s+\[\d+\];\s+(?:needed|dynamically loaded)", r.stderr)))
    return r.returncode, libs


def main():
    code, libs = loaded(["--version"])
    if code != 0 or not any("libcudart" in lib or "libcudnn" in lib for lib in libs):
        print(f"SKIP: {BIN} is not a CUDA build (loads {libs})")
        sys.exit(77)
    failures = []
    d = tempfile.mkdtemp(prefix="rnntrain_libs_")
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    cfg = os.path.join(d, "cfg.yaml")
    with open(cfg, "w") as f:
        f.write("model:\n  layers:\n    - {type: Input, shape: [12, 2]}\n    - {type: LSTM, units: 8}\n"
                "    - {type: Dense, units: 1}\n"
                "data:\n  train: {format: synthetic, task: adding, samples: 64, timesteps: 12, seed: 3}\n"
                "train: {epochs: 1, batch_size: 16}\n")
    runs = [("--version", ["--version"]),
            ("train on device: cpu", ["-q", "train", cfg, "device=cpu", f"output.dir={d}/cpu"])]
    if subprocess.run(["sh", "-c", "command -v nvidia-smi && nvidia-smi -L"], capture_output=True).returncode != 0:
        runs.append(("train on device: auto without a GPU", ["-q", "train", cfg, f"output.dir={d}/auto"]))
    for what, args in runs:
        code, libs = loaded(args)
        heavy = [lib for lib in libs if HEAVY.search(lib)]
        ok = code == 0 and not heavy
        print(("ok   " if ok else "FAIL ") + f"{what}: exit {code}, loads {len(libs)} libraries, heavy CUDA ones: {heavy}")
        if not ok:
            failures.append(what)
    if failures:
        sys.exit(1)
    print("all passed")


main()
