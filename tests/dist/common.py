# What the tests of tests/dist share: the launcher's command line and readers of a run directory.
import os

import h5py
import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def mpi(mpiexec):
    """mpirun's arguments for these tests: as root in containers, more ranks than cores, no binding."""
    return [mpiexec, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def weights(path):
    """Every dataset of an HDF5 file, by path."""
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


def history(d):
    """A run directory's history.csv: (header, rows as an array)."""
    with open(os.path.join(d, "history.csv")) as f:
        rows = [line.strip().split(",") for line in f]
    return rows[0], np.array([[float(v) for v in r] for r in rows[1:]])


def weight_difference(a, b):
    """The largest absolute difference between the float arrays of two weight files (inf when they hold others)."""
    wa, wb = weights(a), weights(b)
    if sorted(wa) != sorted(wb):
        return float("inf")
    return max((float(np.abs(wa[k].astype(np.float64) - wb[k]).max()) for k in wa
                if wa[k].dtype.kind == "f" and wa[k].size), default=0.0)
