#!/usr/bin/env python3
"""Keras side of rnntrain's CPU benchmark (issue 13): times Keras 3 training steps on the JAX backend,
CPU only (forward, loss, backward and Adam: model.train_on_batch once compiled), for the CPU
workloads, and writes JSON in bench/torch_bench.py's layout (one variant per workload, impl "keras").

Usage:
  python3 bench/keras_bench.py --threads 2 --json keras.json
  python3 bench/keras_bench.py --workloads charlm_small --steps 5 --repeats 3

The models are bench/configs/charlm_small.yaml, blog_small.yaml, gru_small.yaml and maskzero_small.yaml:
the same layers, batch and sequence length as bench/torch_bench.py's workloads of those names. Threads: the process is pinned to
--threads CPUs (os.sched_setaffinity) before JAX starts, so XLA's CPU client uses as many cores as
rnntrain and PyTorch get. Timing: --warmup untimed steps (the first compiles), then --repeats loops of
--steps steps timed with time.perf_counter; ms_per_step is the median over repeats. peak_mib is the
process's peak resident memory (a high-water mark, as in rnntrain bench).
"""
import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import sys
import time

WORKLOADS = {
    "charlm_small": dict(kind="charlm", layers=2, hidden=128, vocab=96, input=64, batch=32, time=50, out=96),
    "blog_small": dict(kind="dense", layers=2, hidden=128, input=128, batch=32, time=50, out=128),
    "gru_small": dict(kind="dense", layers=2, hidden=128, input=128, batch=32, time=50, out=128, cell="gru"),
    # mask_zero, the output at the last valid step; a new batch every step with log-normal lengths
    # (median 30, in [5, 100]), zeros after each sequence's end (bench/configs/maskzero_small.yaml).
    "maskzero_small": dict(kind="maskzero", layers=2, hidden=128, vocab=2000, input=64, batch=32, time=100, out=5,
                           min_length=5, lognormal=(30.0, 0.6)),
}
STREAM_POOL = 32  # maskzero_small: batches used in turn, as torch_bench.py --stream
SEED = 1234


def build(keras, w):
    """The workload's model, compiled with Adam(1e-3) and its loss."""
    if w["kind"] in ("charlm", "maskzero"):
        x = keras.Input(shape=(w["time"],), dtype="int32")
        h = keras.layers.Embedding(w["vocab"], w["input"], mask_zero=w["kind"] == "maskzero")(x)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        x = keras.Input(shape=(w["time"], w["input"]))
        h = x
        loss = "mse"
    for i in range(w["layers"]):  # maskzero: the last layer returns its last valid step
        cell = keras.layers.GRU if w.get("cell") == "gru" else keras.layers.LSTM  # GRU: reset_after=True, as PyTorch's
        h = cell(w["hidden"], return_sequences=w["kind"] != "maskzero" or i + 1 < w["layers"])(h)
    model = keras.Model(x, keras.layers.Dense(w["out"])(h))
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss)
    return model


def batches(np, w):
    """The batches a run uses in turn: one, or STREAM_POOL with fresh lengths (maskzero)."""
    if w["kind"] != "maskzero":
        return [batch(np, w)]
    rng = np.random.default_rng(SEED)
    B, T = w["batch"], w["time"]
    median, sigma = w["lognormal"]
    out = []
    for _ in range(STREAM_POOL):
        lens = np.clip(np.round(median * np.exp(sigma * rng.standard_normal(B))), w["min_length"], T).astype(int)
        x = rng.integers(1, w["vocab"], size=(B, T)).astype("int32")
        x[np.arange(T)[None, :] >= lens[:, None]] = 0  # padding: masked by mask_zero
        out.append((x, rng.integers(0, w["out"], size=(B,))))
    return out


def batch(np, w):
    rng = np.random.default_rng(SEED)
    B, T = w["batch"], w["time"]
    if w["kind"] == "charlm":
        return rng.integers(1, w["vocab"], size=(B, T)).astype("int32"), rng.integers(0, w["out"], size=(B, T))
    return (rng.uniform(-1, 1, size=(B, T, w["input"])).astype("float32"),
            rng.uniform(-1, 1, size=(B, T, w["out"])).astype("float32"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    names = [s for s in a.workloads.split(",") if s]
    for n in names:
        if n not in WORKLOADS:
            p.error(f"unknown workload '{n}'; choices: {', '.join(WORKLOADS)}")
    if a.warmup < 1 or a.repeats < 3 or a.steps < 1:
        p.error("need --warmup >= 1 (the first step compiles), --repeats >= 3, --steps >= 1")
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: a.threads])
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        import keras
        import numpy as np
    except ImportError as e:
        print(f"keras_bench.py: cannot import keras with JAX ({e}); scripts/setup.sh installs them", file=sys.stderr)
        sys.exit(2)
    keras.utils.set_random_seed(SEED)
    out = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "hardware": {"cpu": platform.processor() or platform.machine(), "threads": a.threads},
           "versions": {"keras": keras.__version__, "jax": jax.__version__, "backend": keras.backend.backend(),
                        "python": platform.python_version()},
           "steps": a.steps, "repeats": a.repeats, "warmup": a.warmup, "workloads": {}}
    for n in names:
        w = WORKLOADS[n]
        v = {"impl": "keras", "precision": "fp32", "mode": "eager"}
        try:
            model = build(keras, w)
            pool = batches(np, w)
            at = 0
            for _ in range(a.warmup):
                loss = model.train_on_batch(*pool[at % len(pool)])
                at += 1
            reps = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    loss = model.train_on_batch(*pool[at % len(pool)])
                    at += 1
                reps.append((time.perf_counter() - t0) * 1000.0 / a.steps)
            v.update(ms_per_step=statistics.median(reps), ms_per_step_repeats=reps,
                     peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, last_loss=float(loss),
                     status="ok")
        except Exception as e:  # one workload's failure does not stop the others
            v.update(status=f"failed: {type(e).__name__}: {e}")
        print(f"{n}: keras {v.get('ms_per_step', float('nan')):.3f} ms/step ({v['status']})")
        out["workloads"][n] = {"shape": w, "variants": [v]}
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=2)
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
