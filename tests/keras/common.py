# Shared helpers of the Keras interchange suite (tests/keras/test_*.py, run by ctest with label
# `keras`): skipping when Keras is absent, running the rnntrain binary, seeded weights, and the
# |Δ| ≤ atol + rtol·|ref| comparison with evidence on failure. Not a test itself.
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77  # ctest SKIP_RETURN_CODE

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def import_keras():
    """Returns (keras, numpy, h5py), or exits with SKIP and the reason when Keras is not importable."""
    try:
        import numpy as np
        import h5py
        import keras
    except Exception as e:  # ImportError, or a backend that fails to load
        print(f"SKIP: keras is not importable ({type(e).__name__}: {e}); run scripts/setup.sh to install it")
        sys.exit(SKIP)
    keras.utils.set_random_seed(1234)
    print(f"keras {keras.__version__} backend {keras.backend.backend()}, numpy {np.__version__}, h5py {h5py.__version__}")
    return keras, np, h5py


class Suite:
    """Collects failures and the worst relative difference seen; exits non-zero at the end on failure."""

    def __init__(self, binary, atol=1e-5, rtol=1e-5):
        self.binary = os.path.abspath(binary)
        self.atol, self.rtol = atol, rtol
        self.failures = []
        self.checks = 0
        self.worst = (0.0, "")  # (max |Δ|, what)
        self.tmp = tempfile.mkdtemp(prefix="rnntrain_keras_")
        atexit.register(shutil.rmtree, self.tmp, ignore_errors=True)

    def path(self, *parts):
        p = os.path.join(self.tmp, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def rnntrain(self, *args, expect=0):
        """Runs the binary; returns (code, stdout, stderr). A code other than `expect` is a failure."""
        r = subprocess.run([self.binary, "-q", *map(str, args)], capture_output=True, text=True, timeout=300)
        if expect is not None and r.returncode != expect:
            self.fail(f"rnntrain {' '.join(map(str, args))} exited {r.returncode}, expected {expect}:\n{r.stderr[-3000:]}")
        return r.returncode, r.stdout, r.stderr

    def fail(self, msg):
        print("FAIL:", msg)
        self.failures.append(msg)

    def close(self, what, got, ref, atol=None, rtol=None):
        import numpy as np
        atol = self.atol if atol is None else atol
        rtol = self.rtol if rtol is None else rtol
        self.checks += 1
        got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
        if got.shape != ref.shape:
            self.fail(f"{what}: shape {got.shape}, expected {ref.shape}")
            return False
        d = np.abs(got - ref)
        worst = float(d.max()) if d.size else 0.0
        if worst > self.worst[0]:
            self.worst = (worst, what)
        bad = d > atol + rtol * np.abs(ref)
        if bad.any():
            i = np.unravel_index(int(np.argmax(d - (atol + rtol * np.abs(ref)))), d.shape)
            self.fail(f"{what}: {int(bad.sum())} of {d.size} values differ; worst at {i}: got {got[i]!r}, "
                      f"Keras {ref[i]!r} (|Δ|={d[i]:.3g}, allowed {atol + rtol * abs(ref[i]):.3g}); "
                      f"first values got {got.ravel()[:4]}, Keras {ref.ravel()[:4]}")
            return False
        return True

    def equal(self, what, got, ref):
        import numpy as np
        self.checks += 1
        got, ref = np.asarray(got), np.asarray(ref)
        if got.shape != ref.shape or got.dtype != ref.dtype or got.tobytes() != ref.tobytes():
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64)).max() if got.shape == ref.shape else "n/a"
            self.fail(f"{what}: not bit-identical (shapes {got.shape}/{ref.shape}, dtypes {got.dtype}/{ref.dtype}, "
                      f"max |Δ| {diff})")
            return False
        return True

    def finish(self, name):
        print(f"{name}: {self.checks} checks, worst |Δ| = {self.worst[0]:.3g} ({self.worst[1]})")
        if self.failures:
            print(f"{len(self.failures)} failed, {self.checks - len(self.failures)} passed")
            sys.exit(1)
        print(f"{self.checks} passed, 0 failed")
        sys.exit(0)


def seeded_weights(model, seed, scale=0.4):
    """Replaces every weight with seeded normal values (biases included, so gate mistakes show)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    model.set_weights([(rng.standard_normal(w.shape) * scale).astype("float32") for w in model.get_weights()])


def legacy_weights(path):
    """Every weight of a full-model legacy .h5, in Keras' order."""
    import h5py
    dec = lambda n: n.decode() if isinstance(n, bytes) else str(n)  # noqa: E731
    with h5py.File(path, "r") as f:
        g = f["model_weights"]
        return [g[dec(n)][dec(w)][()] for n in g.attrs["layer_names"] for w in g[dec(n)].attrs["weight_names"]]


def read_npy(path):
    import numpy as np
    return np.load(path)
