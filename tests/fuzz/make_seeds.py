#!/usr/bin/env python3
"""Writes the libFuzzer seed corpora of tests/fuzz into tests/fuzz/corpus/<target>/: small valid
inputs from the repository's configs/ and data/ and tiny files made here with numpy and h5py.
The HDF5 checkpoint, Keras and JSON seeds need a built rnntrain (train, then export):

    python3 tests/fuzz/make_seeds.py [build-asan/rnntrain]

Without the binary those seeds are skipped. The seeds are committed (about 200 KB in all);
re-run this only to refresh them. Not a test: scripts/fuzz.sh runs the targets."""
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")

# The model fuzz_h5_checkpoint.cpp loads weights into (keep the two in step).
CKPT_MODEL = """model:
  layers:
    - {type: Input, shape: [6]}
    - {type: Embedding, input_dim: 9, output_dim: 3}
    - {type: LSTM, units: 4, return_sequences: true}
    - {type: Bidirectional, layer: {type: GRU, units: 2}}
    - {type: Dense, units: 8}
data:
  train: {format: synthetic, task: classify, samples: 16, timesteps: 6, seed: 1}
train:
  epochs: 1
  batch_size: 8
  optimizer: {type: sgd, learning_rate: 0.1, momentum: 0.9}
  loss: {type: sparse_categorical_crossentropy, from_logits: true}
"""

# More small models for the JSON seeds: masking, GRU reset_after false, SimpleRNN, TimeDistributed.
EXTRA_MODELS = {
    "mask_gru": """model:
  layers:
    - {type: Input, shape: [null, 2]}
    - {type: Masking, mask_value: 0.0}
    - {type: GRU, units: 3, reset_after: false, return_sequences: true}
    - {type: SimpleRNN, units: 2}
    - {type: Dropout, rate: 0.1}
    - {type: Dense, units: 1, activation: sigmoid}
data:
  train: {path: seq_to_one.npz}
train: {epochs: 1, batch_size: 8, optimizer: adam, loss: binary_crossentropy}
""",
    "td_lstm": """model:
  layers:
    - {type: Input, shape: [5, 2]}
    - {type: Bidirectional, merge_mode: concat, layer: {type: LSTM, units: 3, return_sequences: true}}
    - {type: TimeDistributed, layer: {type: Dense, units: 1}}
data:
  train: {path: seq_to_seq.npz}
train: {epochs: 1, batch_size: 8, optimizer: rmsprop, loss: mse}
""",
}


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def npz_bytes(arrays, compressed):
    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, **arrays)
    return b.getvalue()


def config_seeds():
    for f in sorted(os.listdir(os.path.join(ROOT, "configs"))):
        with open(os.path.join(ROOT, "configs", f), "rb") as fh:
            put("fuzz_config", f, fh.read())
    put("fuzz_config", "ckpt_model.yaml", CKPT_MODEL)
    for name, text in EXTRA_MODELS.items():
        put("fuzz_config", name + ".yaml", text)
    put("fuzz_config", "minimal.yaml", "model:\n  layers:\n    - {type: Input, shape: [3, 1]}\n    - {type: LSTM, units: 2}\n")


def npy_seeds():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 2))
    for dt in ["<f4", "<f8", "<f2", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"]:
        put("fuzz_npy", "x_" + dt[1:] + ".npy", npy_bytes((x * 3).astype(dt)))
    put("fuzz_npy", "scalar.npy", npy_bytes(np.float32(1.5)))
    put("fuzz_npy", "empty.npy", npy_bytes(np.zeros((0, 3), np.float32)))
    v2 = bytearray(npy_bytes(np.arange(4, dtype="<f4")))  # the same array as format version 2.0
    header = bytes(v2[10:10 + int.from_bytes(v2[8:10], "little")])
    put("fuzz_npy", "v2.npy", b"\x93NUMPY\x02\x00" + len(header).to_bytes(4, "little") + header + bytes(v2[10 + len(header):]))
    arrays = {"x": x.astype("<f4"), "y": np.array([0, 1], "<i8"), "len": np.array([3, 2], "<i4")}
    put("fuzz_npy", "xy.npz", npz_bytes(arrays, False))
    put("fuzz_npy", "xy_deflate.npz", npz_bytes(arrays, True))


def csv_seeds():
    # First byte: fuzz_csv's options (bit 7: columns a, b by name; low bits: window, horizon, ...).
    put("fuzz_csv", "one_column.csv", b"\x03value\n1\n2\n3\n4\n5\n6\n")
    put("fuzz_csv", "named.csv", b"\x82a,b,c\n1,2,3\n4,5,6\n7,8,9\n10,11,12\n13,14,15\n")
    put("fuzz_csv", "quoted_semicolon.csv", b'\xa1"a";"b"\n"1,5";2\n3;"4"\n5;6\n7;8\n')
    put("fuzz_csv", "scaled_holdout.csv", b"\xe2a,b\n1,2\n1,3\n2,5\n3,7\n5,11\n8,13\n13,17\n")
    put("fuzz_csv", "tabs_crlf.csv", b"\x80a\tb\r\n0.5\t-1e3\r\n1.5\t2e-3\r\n2.5\t3\r\n")
    with open(os.path.join(ROOT, "data", "sunspots_monthly.csv"), "rb") as f:
        head = b"".join(f.readlines()[:40]).replace(b"date,year,month,sunspots", b"date,a,month,b")
    put("fuzz_csv", "sunspots_head.csv", b"\x8b" + head)


def zip_seeds():
    arrays = {"x": np.zeros((2, 3), "<f4"), "y": np.ones(2, "<f4")}
    put("fuzz_zip", "stored.npz", npz_bytes(arrays, False))
    put("fuzz_zip", "deflated.npz", npz_bytes(arrays, True))
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.15.1"}))
        z.writestr("dir/", b"")
        z.writestr("empty", b"")
    put("fuzz_zip", "dirs.zip", b.getvalue())


def binary_seeds(rnntrain):
    tmp = tempfile.mkdtemp()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 5, 2)).astype("<f4")
    with open(os.path.join(tmp, "seq_to_one.npz"), "wb") as f:
        f.write(npz_bytes({"x": x, "y": (rng.random((16, 1)) > 0.5).astype("<f4")}, False))
    with open(os.path.join(tmp, "seq_to_seq.npz"), "wb") as f:
        f.write(npz_bytes({"x": x, "y": rng.standard_normal((16, 5, 1)).astype("<f4")}, False))

    def run(*args):
        r = subprocess.run([rnntrain, *args], capture_output=True, cwd=tmp)
        if r.returncode != 0:
            sys.exit(f"make_seeds: rnntrain {' '.join(args)} failed:\n{r.stderr.decode(errors='replace')}")

    try:
        models = dict(EXTRA_MODELS, ckpt=CKPT_MODEL)
        for name, text in models.items():
            cfg = os.path.join(tmp, name + ".yaml")
            with open(cfg, "w") as f:
                f.write(text)
            rundir = os.path.join(tmp, "run_" + name)
            run("train", cfg, "output.dir=" + rundir)
            outs = {s: os.path.join(tmp, name + s) for s in (".h5", ".keras", ".weights.h5")}
            for out in outs.values():
                run("export", cfg, "--weights", rundir + "/last.h5", "-o", out)
            with zipfile.ZipFile(outs[".keras"]) as z:
                put("fuzz_keras_json", name + "_config.json", z.read("config.json"))
                put("fuzz_zip", name + ".keras", open(outs[".keras"], "rb").read())
            import h5py
            with h5py.File(outs[".h5"], "r") as h:
                mc = h.attrs["model_config"]
                put("fuzz_keras_json", name + "_model_config.json", mc if isinstance(mc, bytes) else mc.encode())
            if name == "ckpt":
                put("fuzz_h5_checkpoint", "last.h5", open(rundir + "/last.h5", "rb").read())
                put("fuzz_h5_checkpoint", "legacy.h5", open(outs[".h5"], "rb").read())
                put("fuzz_h5_checkpoint", "model.weights.h5", open(outs[".weights.h5"], "rb").read())
    finally:
        shutil.rmtree(tmp)


def main():
    config_seeds()
    npy_seeds()
    csv_seeds()
    zip_seeds()
    if len(sys.argv) > 1:
        binary_seeds(os.path.abspath(sys.argv[1]))
    else:
        print("make_seeds: no rnntrain binary given: the checkpoint, Keras and JSON seeds are left as they are",
              file=sys.stderr)


if __name__ == "__main__":
    main()
