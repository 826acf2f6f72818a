#!/usr/bin/env python3
"""Writes data/classify.h5: a small variable-length sequence classification set (numpy + h5py).

Each sample is one noisy waveform of 10..40 steps, right-padded with zeros to 40 steps:
class 0 = sine, 1 = square, 2 = sawtooth, with a random period (6..16 steps), phase and
amplitude (0.5..1.5) and Gaussian noise (std 0.1). Datasets:
  x        float32 [600, 40, 1]  the waveform, 0 after `lengths`
  y        int64   [600]         the class, 0..2 (sparse labels)
  lengths  int32   [600]         valid steps, 10..40
Deterministic: numpy's PCG64 generator with seed 1234. Run from anywhere:
  python3 data/make_classify.py
"""
import os

import h5py
import numpy as np

N, T, CLASSES, SEED = 600, 40, 3, 1234


def waveform(kind, steps, rng):
    period = rng.uniform(6.0, 16.0)
    phase = rng.uniform(0.0, 1.0)
    amp = rng.uniform(0.5, 1.5)
    u = (np.arange(steps) / period + phase) % 1.0  # position within the period, [0, 1)
    if kind == 0:
        w = np.sin(2.0 * np.pi * u)
    elif kind == 1:
        w = np.where(u < 0.5, 1.0, -1.0)
    else:
        w = 2.0 * u - 1.0
    return amp * w + rng.normal(0.0, 0.1, steps)


def main():
    rng = np.random.default_rng(SEED)
    x = np.zeros((N, T, 1), dtype=np.float32)
    y = rng.integers(0, CLASSES, N).astype(np.int64)
    lengths = rng.integers(10, T + 1, N).astype(np.int32)
    for n in range(N):
        x[n, : lengths[n], 0] = waveform(int(y[n]), int(lengths[n]), rng)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "classify.h5")
    with h5py.File(out, "w") as f:
        f.create_dataset("x", data=x)
        f.create_dataset("y", data=y)
        f.create_dataset("lengths", data=lengths)
        f.attrs["description"] = "noisy sine/square/sawtooth waveforms, variable length; see data/README.md"
    print(f"wrote {out}: x {x.shape}, y {y.shape} (counts {np.bincount(y).tolist()}), lengths {lengths.min()}..{lengths.max()}")


if __name__ == "__main__":
    main()
