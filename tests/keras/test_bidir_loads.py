# Issue 17 item 2: an export with several Bidirectional layers loads in Keras every time. Keras 3
# builds a Bidirectional's backward layer from the `backward_layer` in its config; exports without it
# made Keras derive the backward layer from the forward one, and about one load in three (it depended
# on the process) failed with "Forward layer and backward layer should have different go_backwards
# value". This test trains such a model briefly and exports it to .keras and .h5; here each file
# must load and predict what rnntrain predicts (within 1e-5 + 1e-5·|ref|), and in 20 fresh Python
# processes (two at a time) each must load with the same directions and weights as here.
# Usage: test_bidir_loads.py RNNTRAIN_BINARY
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(__file__))
from common import Suite, import_keras  # noqa: E402

keras, np, h5py = import_keras()

PROCESSES = 20
N, T, F = 16, 6, 3
LAYERS = """
    - {type: Input, shape: [6, 3]}
    - {type: Bidirectional, layer: {type: LSTM, units: 4, return_sequences: true}}
    - {type: Bidirectional, merge_mode: sum, layer: {type: GRU, units: 3, return_sequences: true}}
    - {type: Bidirectional, layer: {type: LSTM, units: 2}}
    - {type: Dense, units: 2}"""

# What each fresh process runs: load every file given and print, per file, every Bidirectional
# layer's directions and the sum of every weight (predictions are compared once, in this process).
LOADER = r"""
import sys
import numpy as np
import keras
for path in sys.argv[1:]:
    try:
        m = keras.saving.load_model(path)
    except Exception as e:
        print(f"{path}: load_model failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        continue
    dirs = [(ly.forward_layer.go_backwards, ly.backward_layer.go_backwards) for ly in m.layers
            if isinstance(ly, keras.layers.Bidirectional)]
    print(f"{path}: {dirs} {sum(float(np.sum(w, dtype=np.float64)) for w in m.get_weights()):.9e}")
"""


def main():
    s = Suite(sys.argv[1])
    d = s.path("bidir", "x")[:-1]
    rng = np.random.default_rng(3)
    np.save(d + "x.npy", rng.standard_normal((N, T, F)).astype("float32"))
    np.save(d + "y.npy", rng.random((N, 2)).astype("float32"))
    cfg = d + "config.yaml"
    with open(cfg, "w") as f:
        f.write(f"model:\n  layers:{LAYERS}\n"
                f"data:\n  train: {{format: npy, inputs: {d}x.npy, targets: {d}y.npy}}\n"
                "train: {epochs: 1, batch_size: 8, loss: mse, optimizer: {type: adam, learning_rate: 0.01}}\n"
                f"output: {{dir: {d}run}}\n")
    if s.rnntrain("train", cfg)[0] != 0:
        s.finish("bidirectional exports in fresh Keras processes")
    ckpt = d + "run/last.h5"
    s.rnntrain("predict", cfg, "--weights", ckpt, "--data", d + "x.npy", "-o", d + "ref.npy")
    files = [d + "out.keras", d + "out.h5"]
    for path in files:
        s.rnntrain("export", cfg, "--weights", ckpt, "-o", path)
    if s.failures:
        s.finish("bidirectional exports in fresh Keras processes")
    expected = {}  # what a good load prints, from the first load here (whose predictions are checked)
    for path in files:
        m = keras.saving.load_model(path)
        s.close(f"Keras load_model({os.path.basename(path)}) predictions", m.predict(np.load(d + "x.npy"), verbose=0),
                np.load(d + "ref.npy"))
        dirs = [(ly.forward_layer.go_backwards, ly.backward_layer.go_backwards) for ly in m.layers
                if isinstance(ly, keras.layers.Bidirectional)]
        if dirs != [(False, True)] * 3:
            s.fail(f"{path}: Bidirectional directions (forward, backward go_backwards) {dirs}")
        expected[path] = f"{path}: {dirs} {sum(float(np.sum(w, dtype=np.float64)) for w in m.get_weights()):.9e}"

    def load_in_fresh_process(_):
        return subprocess.run([sys.executable, "-c", LOADER, *files], capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=2) as pool:
        for i, r in enumerate(pool.map(load_in_fresh_process, range(PROCESSES))):
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith(tuple(files))]
            if r.returncode != 0 or len(lines) != len(files):
                s.fail(f"process {i + 1}: exit {r.returncode}, output {r.stdout[-500:]!r}, stderr {r.stderr[-1500:]}")
                continue
            for path, line in zip(files, lines):
                s.checks += 1
                if line != expected[path]:
                    s.fail(f"process {i + 1}: {line!r}, expected {expected[path]!r}")
    s.finish(f"bidirectional exports (.keras, .h5) loaded in {PROCESSES} fresh Keras processes")


if __name__ == "__main__":
    main()
