#!/usr/bin/env python3
"""The bad-input corpus: writes malformed configs, data, weights and Keras files into a scratch
directory and returns the cases, each an rnntrain command with the exit code (1: bad data or weights
file, runtime failure; 2: usage or config error; README "Exit codes") and the message fragments its
stderr must hold. tests/robust/run_cases.py runs them; this file only builds them.

    python3 tests/robust/make_cases.py RNNTRAIN_BINARY DIR   # writes DIR/cases.json (for a look)

Case fields: name, args (run in DIR), exit, expect (fragments, all required), absent (fragments
that must not appear: a misleading hint), protect (files that exist before the run and must be
unchanged after), pending ("defect ...": expected to fail until a fix lands; reported apart). The weights and Keras cases derive from one checkpoint of a tiny model
that rnntrain trains here first (about a second)."""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile

import h5py
import numpy as np

BASE_MODEL = """model:
  layers:
    - {type: Input, shape: [5, 2]}
    - {type: LSTM, units: 3}
    - {type: Dense, units: 1}
"""
BASE_TRAIN = "train: {epochs: 1, batch_size: 8, optimizer: adam, loss: mse}\n"


class Corpus:
    def __init__(self, binary, root):
        self.binary, self.root, self.cases = binary, root, []
        self.zip = True
        self.rng = np.random.default_rng(7)

    def path(self, name):
        return os.path.join(self.root, name)

    def write(self, name, data):
        os.makedirs(os.path.dirname(self.path(name)) or self.root, exist_ok=True)
        with open(self.path(name), "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return name

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def case(self, name, args, code, expect, pending=None, protect=(), absent=()):
        if not self.zip and any(a.endswith((".npz", ".keras")) for a in args):
            return
        assert not any(c["name"] == name for c in self.cases), name
        c = {"name": name, "args": list(args), "exit": code, "expect": list(expect), "protect": list(protect),
             "absent": list(absent)}
        if pending:
            c["pending"] = pending
        self.cases.append(c)

    def run(self, *args, required=True):
        r = subprocess.run([self.binary, *args], cwd=self.root, capture_output=True, timeout=300)
        if r.returncode != 0 and required:
            sys.exit(f"make_cases: setting up the corpus: rnntrain {' '.join(args)} failed ({r.returncode}):\n"
                     + r.stderr.decode(errors="replace"))
        return r.returncode == 0


def npy(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def npz(compressed=False, **arrays):
    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, **arrays)
    return b.getvalue()


def npy_raw(header, body=b"", version=1):
    h = header.encode()
    pad = (64 - (10 + len(h) + 1) % 64) % 64
    h = h + b" " * pad + b"\n"
    n = len(h).to_bytes(2, "little") if version == 1 else len(h).to_bytes(4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + n + h + body


def zip_of(members, compression=zipfile.ZIP_STORED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return b.getvalue()


# ---------------------------------------------------------------------------------------------
def setup(c):
    x = c.rng.standard_normal((16, 5, 2)).astype("<f4")
    y = c.rng.standard_normal((16, 1)).astype("<f4")
    c.write("good.npz", npz(x=x, y=y))
    with h5py.File(c.path("train.h5"), "w") as h:
        h.create_dataset("x", data=x)
        h.create_dataset("y", data=y)
    c.write("good_x.npy", npy(x))
    c.write("good_y.npy", npy(y))
    c.write("base.yaml", BASE_MODEL + "data:\n  train: {path: train.h5}\n" + BASE_TRAIN + "output: {dir: runs/base}\n")
    c.run("train", "base.yaml")
    shutil.copy(c.path("runs/base/last.h5"), c.path("good.h5"))
    for out in ("good_legacy.h5", "good.weights.h5"):
        c.run("export", "base.yaml", "--weights", "good.h5", "-o", out)
    # A build without libzip reads no .npz or .keras: those cases are left out (with a note).
    c.zip = c.run("export", "base.yaml", "--weights", "good.h5", "-o", "good.keras", required=False)
    if not c.zip:
        print("make_cases: this rnntrain has no libzip: the .npz and .keras cases are left out", file=sys.stderr)
    # An existing output that a failed run must leave alone.
    c.write("keep.npy", npy(np.arange(6, dtype="<f4")))
    c.write("keep.yaml", "# an existing file\n")
    c.write("keep.h5", c.read("good_legacy.h5"))


def cfg(c, name, text):
    return c.write(name, text)


def config_cases(c):
    def bad(name, text, expect, code=2, pending=None, cmd="plan"):
        f = cfg(c, "cfg_" + name + ".yaml", text)
        c.case("config_" + name, [cmd, f], code, [f] + expect, pending)

    def model(layers):
        return "model:\n  layers:\n" + "".join("    - " + l + "\n" for l in layers)

    inp, lstm, dense = "{type: Input, shape: [5, 2]}", "{type: LSTM, units: 3}", "{type: Dense, units: 1}"
    # metric names that are the history's own columns
    for name in ["epoch", "learning_rate", "loss", "val_mae"]:
        bad("metric_named_" + name, model([inp, lstm, dense]) + f"train: {{metrics: [{{type: auc, name: {name}}}]}}\n",
            [name, "history's own columns"])
    # YAML syntax
    bad("unclosed_flow", "model:\n  layers: [{type: Input, shape: [5, 2]}\n", ["YAML"])
    bad("bad_indent", "model:\n  layers:\n    - {type: Input, shape: [5, 2]}\n   - {type: LSTM, units: 3}\n", [":"])
    bad("tab_indent", "model:\n\tlayers: []\n", [":2"])
    bad("unterminated_quote", 'model:\n  layers:\n    - {type: "LSTM, units: 3}\n', [":"])
    bad("duplicate_key", model([inp, lstm, dense]) + "train: {epochs: 1, epochs: 2}\n", ["epochs"])
    bad("stray_colon", "model: : :\n", [":1"])
    bad("anchor_loop", "model: &a\n  layers: *a\n", ["layers"])
    bad("empty", "", ["model"])
    bad("comments_only", "# nothing\n# here\n", ["model"])
    bad("scalar_top", "42\n", ["map"])
    bad("list_top", "- model\n- train\n", ["map"])
    bad("binary", bytes(range(256)) * 4, [])
    bad("nul_bytes", b"model:\x00\x00layers: []\n", [":1:"])
    bad("deep_flow", "[" * 20000, ["deep"])
    bad("deep_maps", "model: " + "{a: " * 20000 + "1" + "}" * 20000 + "\n", ["deep"])
    # wrong types
    bad("units_string", model([inp, "{type: LSTM, units: abc}", dense]), ["units"])
    bad("units_float", model([inp, "{type: LSTM, units: 3.5}", dense]), ["units"])
    bad("units_list", model([inp, "{type: LSTM, units: [3]}", dense]), ["units"])
    bad("layers_scalar", "model:\n  layers: 5\n", ["layers"])
    bad("model_list", "model: [1, 2]\n", ["model"])
    bad("epochs_string", model([inp, lstm, dense]) + "train: {epochs: many}\n", ["epochs"])
    bad("batch_bool", model([inp, lstm, dense]) + "train: {batch_size: true}\n", ["batch_size"])
    bad("lr_string", model([inp, lstm, dense]) + "train: {optimizer: {type: adam, learning_rate: fast}}\n", ["learning_rate"])
    bad("shape_string", model(["{type: Input, shape: '5'}", lstm, dense]), ["shape"])
    bad("metrics_scalar", model([inp, lstm, dense]) + "train: {metrics: 5}\n", ["metrics"])
    bad("dropout_string_nan", model([inp, "{type: LSTM, units: 3, dropout: nan}", dense]), ["dropout"])
    # unknown keys
    bad("unknown_model_key", "model:\n  layer: []\n", ["layer"])
    bad("unknown_train_key", model([inp, lstm, dense]) + "train: {epoch: 3}\n", ["epoch"])
    bad("unknown_layer_key", model([inp, "{type: LSTM, unit: 3}", dense]), ["unit"])
    bad("unknown_top_key", model([inp, lstm, dense]) + "trian: {epochs: 3}\n", ["trian"])
    bad("unknown_optimizer_key", model([inp, lstm, dense]) + "train: {optimizer: {type: adam, lr: 0.1}}\n", ["lr"])
    # bad values
    bad("units_zero", model([inp, "{type: LSTM, units: 0}", dense]), ["units"])
    bad("units_negative", model([inp, "{type: LSTM, units: -1}", dense]), ["units"])
    bad("epochs_zero", model([inp, lstm, dense]) + "train: {epochs: 0}\n", ["epochs"])
    bad("batch_zero", model([inp, lstm, dense]) + "train: {batch_size: 0}\n", ["batch_size"])
    bad("dropout_big", model([inp, "{type: LSTM, units: 3, dropout: 1.5}", dense]), ["dropout"])
    bad("dropout_negative", model([inp, "{type: LSTM, units: 3, recurrent_dropout: -0.1}", dense]), ["recurrent_dropout"])
    bad("validation_split_one", model([inp, lstm, dense]) + "data: {validation_split: 1.0}\n", ["validation_split"])
    bad("lr_negative", model([inp, lstm, dense]) + "train: {optimizer: {type: adam, learning_rate: -1}}\n", ["learning_rate"])
    bad("loss_unknown", model([inp, lstm, dense]) + "train: {loss: msee}\n", ["msee"])
    bad("optimizer_unknown", model([inp, lstm, dense]) + "train: {optimizer: adamx}\n", ["adamx"])
    bad("activation_unknown", model([inp, "{type: LSTM, units: 3, activation: reluu}", dense]), ["reluu"])
    bad("merge_mode_unknown", model([inp, "{type: Bidirectional, merge_mode: avg, layer: {type: LSTM, units: 2}}", dense]), ["avg"])
    bad("layer_type_unknown", model([inp, "{type: Conv1D, filters: 3}", dense]), ["Conv1D"])
    bad("shape_empty", model(["{type: Input, shape: []}", lstm, dense]), ["shape"])
    bad("shape_zero", model(["{type: Input, shape: [0, 2]}", lstm, dense]), ["shape"])
    bad("shape_negative", model(["{type: Input, shape: [-5, 2]}", lstm, dense]), ["shape"])
    bad("no_input", model([lstm, dense]), ["Input"])
    bad("input_twice", model([inp, inp, lstm, dense]), ["Input"])
    bad("layers_empty", "model:\n  layers: []\n", ["layers"])
    bad("bidirectional_no_layer", model([inp, "{type: Bidirectional}", dense]), ["layer"])
    bad("rnn_after_vector", model([inp, lstm, "{type: LSTM, units: 2}", dense]), ["lstm"])
    bad("dense_units_zero", model([inp, lstm, "{type: Dense, units: 0}"]), ["units"])
    bad("deep_bidirectional", model([inp, "{type: Bidirectional, layer: " * 300 + "{type: LSTM, units: 2}" + "}" * 300, dense]), ["deeper"])
    # huge sizes
    bad("units_too_large", model([inp, "{type: LSTM, units: 16777217}", dense]), ["units"])
    bad("units_1e7", model([inp, "{type: LSTM, units: 10000000}", dense]) + "data:\n  train: {path: train.h5}\n" + BASE_TRAIN,
        ["units"], code=1, cmd="train")
    bad("embedding_2p24", model(["{type: Input, shape: [5]}", "{type: Embedding, input_dim: 16777216, output_dim: 16777216}", lstm, dense])
        + "data:\n  train: {format: synthetic, task: classify, samples: 8, timesteps: 5, seed: 1}\n" + BASE_TRAIN,
        ["mbedding"], code=1, cmd="train")
    bad("epochs_huge", model([inp, lstm, dense]) + "train: {epochs: 100000000000000000000}\n", ["epochs"])
    bad("batch_huge", model([inp, lstm, dense]) + "train: {batch_size: 1099511627776}\n", ["batch_size"])
    bad("samples_huge", model([inp, lstm, dense]) + "data:\n  train: {format: synthetic, task: adding, samples: 1000000000000, timesteps: 5}\n",
        ["samples"], cmd="train")
    bad("timesteps_huge", model([inp, lstm, dense]) + "data:\n  train: {format: synthetic, task: adding, samples: 10, timesteps: 99999999999}\n",
        ["timesteps"], cmd="train")
    # NaN / inf
    bad("lr_nan", model([inp, lstm, dense]) + "train: {optimizer: {type: adam, learning_rate: .nan}}\n", ["learning_rate"])
    bad("lr_inf", model([inp, lstm, dense]) + "train: {optimizer: {type: adam, learning_rate: .inf}}\n", ["learning_rate"])
    bad("dropout_nan", model([inp, "{type: LSTM, units: 3, dropout: .nan}", dense]), ["dropout"])
    bad("clipnorm_neg_inf", model([inp, lstm, dense]) + "train: {optimizer: {type: adam, clipnorm: -.inf}}\n", ["clipnorm"])
    bad("lr_1e300", model([inp, lstm, dense]) + "train: {optimizer: {type: adam, learning_rate: 1e300}}\n", ["learning_rate"])
    bad("validation_split_nan", model([inp, lstm, dense]) + "data: {validation_split: .nan}\n", ["validation_split"])
    # files that are not configs
    c.case("config_missing", ["plan", "no_such_config.yaml"], 2, ["no_such_config.yaml"])
    os.makedirs(c.path("a_directory.yaml"), exist_ok=True)
    c.case("config_directory", ["plan", "a_directory.yaml"], 2, ["a_directory.yaml"])
    c.case("config_dev_zero", ["plan", "/dev/zero"], 2, ["/dev/zero"])
    # overrides
    c.case("override_bad_type", ["plan", "base.yaml", "model.layers.1.units=abc"], 2, ["model.layers.1.units=abc"])
    c.case("override_index_range", ["plan", "base.yaml", "model.layers.9.units=3"], 2, ["model.layers.9.units=3"])
    c.case("override_no_equals", ["plan", "base.yaml", "nokey"], 2, ["nokey"])
    c.case("override_empty_key", ["plan", "base.yaml", "=3"], 2, ["=3"])
    c.case("override_unknown_key", ["plan", "base.yaml", "train.nonexistent=1"], 2, ["nonexistent"])
    c.case("override_negative", ["plan", "base.yaml", "model.layers.1.units=-4"], 2, ["units"])
    c.case("override_yaml_garbage", ["plan", "base.yaml", "train.epochs=[1, {"], 2, ["train.epochs"])
    c.case("override_nan_lr", ["plan", "base.yaml", "train.optimizer.learning_rate=.nan"], 2, ["learning_rate"])


def data_cases(c):
    def predict_npy(name, data, expect, code=1, pending=None):
        f = c.write("d_" + name + ".npy", data)
        c.case("npy_" + name, ["predict", "base.yaml", "--weights", "good.h5", "--data", f, "-o", "keep.npy"], code,
               [f] + expect, pending, protect=["keep.npy"])

    x = c.rng.standard_normal((4, 5, 2)).astype("<f4")
    good = npy(x)
    predict_npy("truncated_body", good[:-7], [])
    predict_npy("truncated_header", good[:30], [])
    predict_npy("bad_magic", b"\x93NUMPX" + good[6:], [])
    predict_npy("header_not_dict", npy_raw("[1, 2, 3]", bytes(96)), [])
    predict_npy("fortran", npy_raw("{'descr': '<f4', 'fortran_order': True, 'shape': (4, 5, 2), }", x.tobytes()), ["ortran"])
    predict_npy("big_endian", npy(x.astype(">f4")), [">f4"])
    predict_npy("unicode", npy(np.array([["a" * 5] * 5] * 4)), ["U"])
    predict_npy("object", npy_raw("{'descr': '|O', 'fortran_order': False, 'shape': (4, 5, 2), }", bytes(320)), ["O"])
    predict_npy("complex", npy(x.astype("<c8")), ["c8"])
    predict_npy("huge_shape", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 5, 2), }", bytes(64)), [])
    predict_npy("overflow_shape", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }"), [])
    predict_npy("negative_shape", npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (-4, 5, 2), }", x.tobytes()), [])
    predict_npy("version9", good[:6] + b"\x09\x00" + good[8:], [])
    predict_npy("empty_file", b"", [])
    predict_npy("zero_samples", npy(np.zeros((0, 5, 2), "<f4")), [])
    predict_npy("rank1", npy(np.zeros(10, "<f4")), [])
    predict_npy("wrong_features", npy(np.zeros((4, 5, 3), "<f4")), [])
    predict_npy("wrong_steps", npy(np.zeros((4, 6, 2), "<f4")), [])
    xn = x.copy(); xn[1, 2, 0] = np.nan
    predict_npy("nan_input", npy(xn), ["NaN"])
    xi = x.copy(); xi[3, 4, 1] = np.inf
    predict_npy("inf_input", npy(xi), ["nf"])
    predict_npy("garbage", bytes(c.rng.integers(0, 256, 4000, dtype=np.uint8)), [])
    predict_npy("text", "x,y\n1,2\n", [])
    c.write("not_a_dir_data", "")
    c.case("npy_missing", ["predict", "base.yaml", "--weights", "good.h5", "--data", "no_such.npy", "-o", "keep.npy"], 1,
           ["no_such.npy"], protect=["keep.npy"])
    os.makedirs(c.path("dir_data.npy"), exist_ok=True)
    c.case("npy_directory", ["predict", "base.yaml", "--weights", "good.h5", "--data", "dir_data.npy", "-o", "keep.npy"], 1,
           ["dir_data.npy"], protect=["keep.npy"])

    # npz through eval --data
    def eval_data(name, fname, data, expect, code=1, pending=None):
        f = c.write(fname, data) if data is not None else fname
        c.case(name, ["eval", "base.yaml", "--weights", "good.h5", "--data", f], code, [f] + expect, pending)

    y = c.rng.standard_normal((4, 1)).astype("<f4")
    goodz = npz(x=x, y=y)
    eval_data("npz_not_zip", "z_not_zip.npz", good, [])
    eval_data("npz_truncated", "z_truncated.npz", goodz[: len(goodz) // 2], [])
    eval_data("npz_truncated_deflate", "z_truncated_deflate.npz", npz(True, x=x, y=y)[:-40], [])
    eval_data("npz_no_x", "z_no_x.npz", npz(inputs=x, y=y), ["x"])
    eval_data("npz_no_y", "z_no_y.npz", npz(x=x), ["y"])
    eval_data("npz_member_not_npy", "z_member_text.npz", zip_of({"x.npy": b"hello", "y.npy": npy(y)}), ["x"])
    eval_data("npz_wrong_shape", "z_wrong_shape.npz", npz(x=np.zeros((4, 5, 7), "<f4"), y=y), [])
    eval_data("npz_count_mismatch", "z_counts.npz", npz(x=x, y=np.zeros((3, 1), "<f4")), [])
    eval_data("npz_empty_zip", "z_empty.npz", zip_of({}), [])
    eval_data("npz_nan_target", "z_nan_y.npz", npz(x=x, y=np.full((4, 1), np.nan, "<f4")), ["NaN"])
    eval_data("npz_garbage", "z_garbage.npz", b"PK\x03\x04" + bytes(c.rng.integers(0, 256, 3000, dtype=np.uint8)), [])
    eval_data("npz_missing", "z_missing.npz", None, [])
    eval_data("npz_dev_null", "/dev/null", None, [])
    eval_data("data_unknown_suffix", "d_data.xyz", "1 2 3\n", ["format"])
    # lengths through a config
    for name, lens in [("lengths_too_long", [5, 6, 5, 5]), ("lengths_fraction", [1.5, 2, 3, 4]), ("lengths_negative", [-1, 2, 3, 4])]:
        z = c.write("z_" + name + ".npz", npz(x=x, y=y, len=np.array(lens, dtype="<f4")))
        f = cfg(c, "cfg_" + name + ".yaml", BASE_MODEL + f"data:\n  train: {{path: {z}, lengths: len}}\n" + BASE_TRAIN
                + f"output: {{dir: runs/{name}}}\n")
        c.case("npz_" + name, ["train", f], 1, [z, "len"])
    # sample weights of the wrong rank (a scalar crashed train, eval and predict)
    for name, w in [("scalar", np.float32(2.0)), ("rank3", np.ones((16, 5, 2), "<f4")), ("count", np.ones(3, "<f4"))]:
        with h5py.File(c.path("h_sw_" + name + ".h5"), "w") as h:
            h.create_dataset("x", data=c.rng.standard_normal((16, 5, 2)).astype("<f4"))
            h.create_dataset("y", data=np.zeros((16, 1), "<f4"))
            h.create_dataset("sw", data=w)
        f = cfg(c, "cfg_sw_" + name + ".yaml", BASE_MODEL + f"data:\n  train: {{path: h_sw_{name}.h5, sample_weight: sw}}\n"
                + BASE_TRAIN + f"output: {{dir: runs/sw_{name}}}\n")
        c.case("h5_sample_weight_" + name, ["train", f], 1, ["h_sw_" + name + ".h5", "sw"])
        c.case("h5_sample_weight_" + name + "_eval", ["eval", f, "--weights", "good.h5"], 1, ["h_sw_" + name + ".h5", "sw"])
    # npy format with separate files
    c.write("n_y3.npy", npy(np.zeros((3, 1), "<f4")))
    f = cfg(c, "cfg_npy_counts.yaml", BASE_MODEL + "data:\n  train: {format: npy, inputs: good_x.npy, targets: n_y3.npy}\n"
            + BASE_TRAIN + "output: {dir: runs/npy_counts}\n")
    c.case("npy_count_mismatch", ["train", f], 1, ["n_y3.npy"])

    # hdf5 data
    def h5data(name, build, expect, code=1):
        fname = "h_" + name + ".h5"
        with h5py.File(c.path(fname), "w") as h:
            build(h)
        eval_data("h5_" + name, fname, None, expect, code)

    h5data("no_x", lambda h: h.create_dataset("y", data=y), ["x"])
    h5data("no_y", lambda h: h.create_dataset("x", data=x), ["y"])
    h5data("x_string", lambda h: (h.create_dataset("x", data=np.array([b"abc"] * 4)), h.create_dataset("y", data=y)), ["x"])
    h5data("x_rank1", lambda h: (h.create_dataset("x", data=np.zeros(4, "<f4")), h.create_dataset("y", data=y)), ["x"])
    h5data("x_empty", lambda h: (h.create_dataset("x", data=np.zeros((0, 5, 2), "<f4")), h.create_dataset("y", data=np.zeros((0, 1), "<f4"))), [])
    h5data("x_group", lambda h: (h.create_group("x"), h.create_dataset("y", data=y)), ["x"])
    h5data("x_compound", lambda h: (h.create_dataset("x", data=np.zeros((4, 5), dtype=[("a", "<f4"), ("b", "<i4")])), h.create_dataset("y", data=y)), ["x"])
    h5data("x_huge_declared", lambda h: (h.create_dataset("x", shape=(2 ** 40, 5, 2), dtype="<f4", chunks=(1, 5, 2)), h.create_dataset("y", data=y)), ["x"])
    h5data("x_soft_link", lambda h: (h.create_dataset("real", data=x), h.create_dataset("y", data=y), h.__setitem__("x", h5py.SoftLink("/real"))),
           [], code=0)  # a link inside the file is fine; one out of it (below) is refused
    h5data("x_external_link", lambda h: (h.create_dataset("y", data=y), h.__setitem__("x", h5py.ExternalLink("train.h5", "/x"))),
           ["external link"])
    h5data("x_nan", lambda h: (h.create_dataset("x", data=xn), h.create_dataset("y", data=y)), ["NaN"])
    h5data("count_mismatch", lambda h: (h.create_dataset("x", data=x), h.create_dataset("y", data=np.zeros((2, 1), "<f4"))), [])
    eval_data("h5_not_hdf5", "h_not_hdf5.h5", "this is not an HDF5 file\n" * 20, [])
    eval_data("h5_truncated", "h_truncated.h5", c.read("h_no_x.h5")[:900], [])
    eval_data("h5_garbage_signature", "h_garbage.h5", b"\x89HDF\r\n\x1a\n" + bytes(c.rng.integers(0, 256, 2000, dtype=np.uint8)), [])

    # csv via train (window 4 over column v)
    def csv(name, text, expect, pending=None, window=4, extra=""):
        f = c.write("c_" + name + ".csv", text)
        conf = cfg(c, "cfg_csv_" + name + ".yaml", "model:\n  layers:\n    - {type: Input, shape: [%d, 1]}\n"
                   "    - {type: LSTM, units: 2}\n    - {type: Dense, units: 1}\n" % window
                   + f"data:\n  train: {{path: {f}, window: {window}, features: [v], targets: [v]{extra}}}\n"
                   + BASE_TRAIN + f"output: {{dir: runs/csv_{name}}}\n")
        c.case("csv_" + name, ["train", conf], 1, [f] + expect, pending)

    rows = "".join(f"{i},{i * 0.5}\n" for i in range(20))
    csv("empty", "", ["empty"])
    csv("header_only", "t,v\n", [])
    csv("no_column_v", "t,w\n" + rows, ["'v'"])
    csv("non_numeric", "t,v\n" + rows + "20,abc\n" + rows, ["abc"])
    csv("huge_cell", "t,v\n" + rows + "20," + "9" * 5_000_000 + "x\n", [])
    csv("unterminated_quote", 't,v\n' + rows + '20,"1.5\n' + rows, ["quote"])
    csv("duplicate_header", "v,v\n" + rows, ["duplicate"])
    csv("ragged", "t,v\n" + rows + "20\n" + rows, [])
    csv("too_few_rows", "t,v\n1,2\n2,3\n", [])
    csv("nan_cell", "t,v\n" + rows + "20,nan\n" + rows, [])
    csv("inf_cell", "t,v\n" + rows + "20,inf\n" + rows, [])
    csv("binary", b"t,v\n" + bytes(c.rng.integers(0, 256, 3000, dtype=np.uint8)), [])
    csv("window_huge", "t,v\n" + rows, [], window=1000)
    # non-regular and missing data files through a config
    for name, path, fmt in [("dev_zero", "/dev/zero", "npz"), ("dev_zero_csv", "/dev/zero", "csv"),
                            ("directory", "dir_data.npy", "npz"), ("missing", "no_such_train.npz", "npz")]:
        extra = ", window: 4, features: [v]" if fmt == "csv" else ""
        f = cfg(c, "cfg_data_" + name + ".yaml", BASE_MODEL + f"data:\n  train: {{path: {path}, format: {fmt}{extra}}}\n"
                + BASE_TRAIN + f"output: {{dir: runs/data_{name}}}\n")
        c.case("data_" + name, ["train", f], 1, [path])
    # text
    for name, text, expect in [("empty", "", []), ("short", "ab", ["seq_len"]), ("bad_utf8", b"abc\xff\xfe def" * 10, ["UTF-8"])]:
        f = c.write("t_" + name + ".txt", text)
        conf = cfg(c, "cfg_text_" + name + ".yaml", "model:\n  layers:\n    - {type: Input, shape: [8]}\n"
                   "    - {type: Embedding, input_dim: 40, output_dim: 4}\n    - {type: LSTM, units: 2, return_sequences: true}\n"
                   "    - {type: Dense, units: 40}\n" + f"data:\n  train: {{path: {f}, seq_len: 8}}\n"
                   "train: {epochs: 1, loss: {type: sparse_categorical_crossentropy, from_logits: true}}\n"
                   f"output: {{dir: runs/text_{name}}}\n")
        c.case("text_" + name, ["train", conf], 1, [f] + expect)


def find_kernel(h):
    names = []
    h.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and n.startswith("model_weights") else None)
    return sorted(n for n in names if n.endswith("kernel") or n.endswith("kernel:0"))[0]


def weights_cases(c):
    def ev(name, fname, expect, code=1, pending=None, cmd="eval"):
        args = [cmd, "base.yaml", "--weights", fname]
        args += ["--data", "train.h5"] if cmd == "eval" else ["--data", "good_x.npy", "-o", "keep.npy"]
        c.case("weights_" + name, args, code, [fname] + expect, pending, protect=["keep.npy"] if cmd == "predict" else [])

    def forge(name, edit, expect, code=1, pending=None, src="good.h5", cmd="eval"):
        fname = "w_" + name + ".h5"
        shutil.copy(c.path(src), c.path(fname))
        with h5py.File(c.path(fname), "r+") as h:
            edit(h)
        ev(name, fname, expect, code, pending, cmd)

    good = c.read("good.h5")
    ev("missing", "no_such_weights.h5", [])
    os.makedirs(c.path("w_directory.h5"), exist_ok=True)
    ev("directory", "w_directory.h5", [])
    ev("empty", c.write("w_empty.h5", b""), [])
    ev("text", c.write("w_text.h5", "not hdf5\n" * 100), [])
    ev("truncated_half", c.write("w_truncated_half.h5", good[: len(good) // 2]), [])
    ev("truncated_1k", c.write("w_truncated_1k.h5", good[:1024]), [])
    ev("truncated_tail", c.write("w_truncated_tail.h5", good[:-100]), [])
    ev("signature_garbage", c.write("w_signature_garbage.h5", good[:8] + bytes(c.rng.integers(0, 256, 4000, dtype=np.uint8))), [])
    ev("npz_as_weights", "good.npz", [])
    ev("dev_zero", "/dev/zero", [])
    # other models than the checkpoint's
    f = cfg(c, "cfg_two_lstm.yaml", "model:\n  layers:\n    - {type: Input, shape: [5, 2]}\n    - {type: LSTM, units: 3, return_sequences: true}\n"
            "    - {type: LSTM, units: 3}\n    - {type: Dense, units: 1}\n" + BASE_TRAIN)
    c.case("weights_layer_count", ["eval", f, "--weights", "good.h5", "--data", "train.h5"], 1, ["good.h5", "layer"])
    f = cfg(c, "cfg_units4.yaml", BASE_MODEL.replace("units: 3", "units: 4") + BASE_TRAIN)
    c.case("weights_wrong_units", ["eval", f, "--weights", "good.h5", "--data", "train.h5"], 1, ["good.h5", "shape"])
    f = cfg(c, "cfg_gru.yaml", BASE_MODEL.replace("LSTM", "GRU") + BASE_TRAIN)
    c.case("weights_wrong_cell", ["eval", f, "--weights", "good.h5", "--data", "train.h5"], 1, ["good.h5"])

    def replace(h, path, **kw):
        del h[path]
        h.create_dataset(path, **kw)

    forge("kernel_shape", lambda h: replace(h, find_kernel(h), data=np.zeros((3, 99), "<f4")), ["shape"])
    forge("kernel_huge", lambda h: replace(h, find_kernel(h), shape=(2, 2 ** 40), dtype="<f4", chunks=(1, 1024)), ["kernel"])
    forge("kernel_string", lambda h: replace(h, find_kernel(h), data=np.array([b"abc"] * 6)), ["kernel"])
    def kernel_group(h):
        k = find_kernel(h)
        del h[k]
        h.create_group(k)

    forge("kernel_group", kernel_group, [])
    forge("kernel_scalar", lambda h: replace(h, find_kernel(h), data=np.float32(1)), ["kernel"])
    forge("kernel_nan", lambda h: h[find_kernel(h)].__setitem__(Ellipsis, np.nan), ["NaN"])
    forge("kernel_inf_predict", lambda h: h[find_kernel(h)].__setitem__(Ellipsis, np.inf), ["finite"], cmd="predict")
    forge("no_model_weights", lambda h: h.__delitem__("model_weights"), [])
    forge("layer_names_missing", lambda h: h["model_weights"].attrs.__delitem__("layer_names"), [])
    forge("layer_names_bogus", lambda h: h["model_weights"].attrs.__setitem__("layer_names", [b"nope", b"nada"]), ["nope"])
    forge("weight_names_int", lambda h: [h["model_weights"][g].attrs.__setitem__("weight_names", np.arange(3))
                                         for g in h["model_weights"] if "weight_names" in h["model_weights"][g].attrs], [])
    forge("legacy_kernel_shape", lambda h: replace(h, find_kernel(h), data=np.zeros((7,), "<f4")), [], src="good_legacy.h5")
    forge("weights_h5_empty_layers", lambda h: [h.__delitem__(k) for k in list(h.keys())], [], src="good.weights.h5")

    # resume state
    def resume(name, edit, expect, pending=None, code=1):
        run = "runs/resume_" + name
        os.makedirs(c.path(run), exist_ok=True)
        shutil.copy(c.path("runs/base/config.yaml"), c.path(run + "/config.yaml"))
        shutil.copy(c.path("good.h5"), c.path(run + "/last.h5"))
        with h5py.File(c.path(run + "/last.h5"), "r+") as h:
            edit(h)
        c.case("resume_" + name, ["train", "--resume", run, "output.dir=" + run, "train.epochs=2"], code, [run + "/last.h5"] + expect, pending)

    resume("rng_short", lambda h: h["rnntrain"].attrs.__setitem__("rng", np.arange(3, dtype="<u8")), ["rng"])
    resume("no_optimizer", lambda h: h["rnntrain"].__delitem__("optimizer_weights"), ["optimizer"])
    resume("history_garbage", lambda h: (h["rnntrain"].__delitem__("history"),
                                         h["rnntrain"].create_dataset("history", data=[b"{not json"])), ["history"])
    resume("config_empty", lambda h: (h["rnntrain"].__delitem__("config"),
                                      h["rnntrain"].create_dataset("config", shape=(0,), dtype=h5py.string_dtype())), ["config"])
    resume("history_empty", lambda h: (h["rnntrain"].__delitem__("history"),
                                       h["rnntrain"].create_dataset("history", shape=(0,), dtype=h5py.string_dtype())), ["history"])
    resume("epoch_missing", lambda h: h["rnntrain"].attrs.__delitem__("epoch"), ["epoch"])
    resume("schedule_string", lambda h: h["rnntrain"].attrs.__setitem__("schedule", "abc"), ["schedule"])
    def stopped(partial, samples=16):  # last.h5 as if stopped after 2 steps of 8 inside epoch 2
        def edit(h):
            a = h["rnntrain"].attrs
            a["step"] = np.int64(2)
            a["epoch_rng"] = a["rng"]
            a["partial"] = np.array(partial, "<f8")
            a["epoch_plan"] = np.array([8, 1, 0, 32, samples], "<u8")
        return edit
    resume("partial_nan", stopped([np.nan, 16]), ["damaged", "nan"])
    resume("partial_negative", stopped([-3.0, 16]), ["damaged", "negative"])
    resume("partial_count", stopped([1.0, 40]), ["damaged", "40 samples"])
    resume("epoch_plan_short", lambda h: (stopped([1.0, 16])(h), h["rnntrain"].attrs.__setitem__("epoch_plan", np.arange(3, dtype="<u8"))),
           ["epoch_plan"])
    c.case("resume_missing_dir", ["train", "--resume", "runs/no_such_run"], 2, ["runs/no_such_run"])
    os.makedirs(c.path("runs/resume_empty"), exist_ok=True)
    c.case("resume_no_last", ["train", "--resume", "runs/resume_empty"], 2, ["runs/resume_empty"])


def keras_cases(c):
    if not c.zip:
        return
    kz = c.read("good.keras")
    with zipfile.ZipFile(io.BytesIO(kz)) as z:
        members = {n: z.read(n) for n in z.namelist()}
    config = json.loads(members["config.json"])

    def keras(name, mem, expect, code=1, pending=None, raw=None, absent=()):
        f = "k_" + name + ".keras"
        c.write(f, raw if raw is not None else zip_of(mem))
        c.case("keras_" + name, ["import", f, "-o", "keep.yaml"], code, [f] + expect, pending, protect=["keep.yaml"],
               absent=absent)

    def with_config(cfgobj):
        return dict(members, **{"config.json": json.dumps(cfgobj)})

    keras("not_zip", None, ["zip"], raw=b"hello, not a zip\n" * 10)
    def raw_zip(entries):  # (name, bytes, compression), duplicates allowed
        b = io.BytesIO()
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with zipfile.ZipFile(b, "w") as z:
                for n, data, comp in entries:
                    z.writestr(n, data, compress_type=comp)
        return b.getvalue()
    plain = [(n, b, zipfile.ZIP_STORED) for n, b in members.items()]
    keras("duplicate_member", None, ["config.json", "twice"], raw=raw_zip(plain + [("config.json", b"{}", zipfile.ZIP_STORED)]))
    keras("bzip2_member", None, ["config.json", "method 12"],
          raw=raw_zip([(n, b, zipfile.ZIP_BZIP2 if n == "config.json" else zipfile.ZIP_STORED) for n, b in members.items()]))
    keras("dotdot_member", None, ["../x.json", "plain name"], raw=raw_zip(plain + [("../x.json", b"{}", zipfile.ZIP_STORED)]))
    keras("absolute_member", None, ["/etc/x", "plain name"], raw=raw_zip(plain + [("/etc/x", b"{}", zipfile.ZIP_STORED)]))
    keras("truncated", None, ["keras"], raw=kz[: len(kz) // 2], absent=["npz"])
    keras("truncated_end", None, ["keras"], raw=kz[:-30], absent=["npz"])
    keras("no_config", {k: v for k, v in members.items() if k != "config.json"}, ["config.json"])
    keras("no_weights", {k: v for k, v in members.items() if k != "model.weights.h5"}, ["model.weights.h5"])
    keras("config_garbage", dict(members, **{"config.json": b"{not json"}), ["config.json"])
    keras("config_binary", dict(members, **{"config.json": bytes(range(256))}), ["config.json"])
    keras("config_list", with_config([1, 2, 3]), [])
    keras("config_is_5", with_config({"class_name": "Sequential", "config": 5}), ["config"])
    keras("config_layers_5", with_config({"class_name": "Sequential", "config": {"layers": 5}}), ["layers"])
    keras("lambda_layer", with_config({"class_name": "Sequential", "config": {"layers": [
        {"class_name": "InputLayer", "config": {"batch_shape": [None, 5, 2]}},
        {"class_name": "Lambda", "config": {"name": "evil", "function": "os.system"}}]}}), ["Lambda"])
    keras("conv_layer", with_config({"class_name": "Sequential", "config": {"layers": [
        {"class_name": "InputLayer", "config": {"batch_shape": [None, 5, 2]}},
        {"class_name": "Conv1D", "config": {"name": "conv", "filters": 3}}]}}), ["Conv1D"])
    # 100000 levels of wrappers, as text (too deep for json.dumps)
    def deep(wrapper, inner, n=100000):
        return ('{"class_name": "%s", "config": {"name": "w", "layer": ' % wrapper) * n + inner + "}}" * n

    def sequential(layer, shape_key="batch_shape"):
        return ('{"class_name": "Sequential", "config": {"layers": [{"class_name": "InputLayer", "config": {"%s": '
                '[null, 5, 2]}}, %s]}}' % (shape_key, layer))

    deep_lstm = deep("Bidirectional", '{"class_name": "LSTM", "config": {"name": "l", "units": 2}}')
    deep_dense = deep("TimeDistributed", '{"class_name": "Dense", "config": {"name": "d", "units": 1}}')
    keras("deep_bidirectional", dict(members, **{"config.json": sequential(deep_lstm)}), ["deep"])
    keras("deep_time_distributed", dict(members, **{"config.json": sequential(deep_dense)}), ["deep"])
    cfg_nan = json.loads(json.dumps(config))
    for layer in cfg_nan["config"]["layers"]:
        if layer["class_name"] == "LSTM":
            layer["config"]["dropout"] = "nan"
    keras("dropout_nan", with_config(cfg_nan), ["dropout"])
    cfg_units = json.loads(json.dumps(config))
    for layer in cfg_units["config"]["layers"]:
        if layer["class_name"] == "LSTM":
            layer["config"]["units"] = -3
    keras("units_negative", with_config(cfg_units), ["units"])
    keras("weights_garbage", dict(members, **{"model.weights.h5": b"garbage" * 100}), ["model.weights.h5"])
    keras("metadata_garbage", dict(members, **{"metadata.json": b"\x00\x01{"}), ["metadata.json"])
    keras("empty_zip", {}, ["no model.weights.h5"], absent=["not a zip"])
    # forged central directory: the weights member claims 4 GiB uncompressed
    b = bytearray(zip_of(members))
    pos = 0
    while True:
        pos = b.find(b"PK\x01\x02", pos)
        if pos < 0:
            break
        struct.pack_into("<I", b, pos + 24, 0xFFFFFFF0)  # uncompressed size
        pos += 4
    keras("forged_sizes", None, ["keras"], raw=bytes(b))
    c.case("keras_missing", ["import", "no_such.keras", "-o", "keep.yaml"], 1, ["no_such.keras"], protect=["keep.yaml"])
    c.case("keras_suffix_txt", ["import", c.write("k_model.txt", "hello"), "-o", "keep.yaml"], 1, ["k_model.txt"],
           protect=["keep.yaml"])

    # legacy .h5 full models
    def legacy(name, edit, expect, code=1, pending=None):
        f = "l_" + name + ".h5"
        shutil.copy(c.path("good_legacy.h5"), c.path(f))
        with h5py.File(c.path(f), "r+") as h:
            edit(h)
        c.case("legacy_" + name, ["import", f, "-o", "keep.yaml"], code, [f] + expect, pending, protect=["keep.yaml"])

    legacy("no_model_config", lambda h: h.attrs.__delitem__("model_config"), ["model_config"])
    legacy("model_config_garbage", lambda h: h.attrs.__setitem__("model_config", "{garbage"), ["model_config"])
    legacy("model_config_number", lambda h: h.attrs.__setitem__("model_config", "5"), [])
    legacy("model_config_is_5", lambda h: h.attrs.__setitem__("model_config", json.dumps({"class_name": "Sequential", "config": 5})),
           ["config"])
    legacy("model_config_deep", lambda h: h.attrs.__setitem__("model_config", sequential(deep_lstm, "batch_input_shape")), ["deep"])
    legacy("model_config_conv", lambda h: h.attrs.__setitem__("model_config", sequential(
        '{"class_name": "Conv2D", "config": {"name": "c"}}', "batch_input_shape")), ["Conv2D"])
    legacy("model_config_int", lambda h: h.attrs.__setitem__("model_config", np.int64(3)), ["model_config"])
    legacy("no_model_weights", lambda h: h.__delitem__("model_weights"), ["model_weights"])
    legacy("training_config_garbage", lambda h: h.attrs.__setitem__("training_config", "{oops"), ["training_config"])
    c.case("legacy_truncated", ["import", c.write("l_truncated.h5", c.read("good_legacy.h5")[:2000]), "-o", "keep.yaml"], 1,
           ["l_truncated.h5"], protect=["keep.yaml"])
    # export must not damage an existing output when the weights are bad
    c.case("export_bad_weights_keeps_output", ["export", "base.yaml", "--weights", "w_text.h5", "-o", "keep.h5"], 1,
           ["w_text.h5"], protect=["keep.h5"])
    c.case("export_bad_suffix", ["export", "base.yaml", "--weights", "good.h5", "-o", "model.onnx"], 2, ["model.onnx"])
    c.case("export_to_directory", ["export", "base.yaml", "--weights", "good.h5", "-o", "a_directory.yaml/"], 2, ["a_directory.yaml"])


def cli_cases(c):
    def cli(name, args, code, expect):
        c.case("cli_" + name, args, code, expect)

    cli("no_args", [], 2, ["subcommand"])
    cli("unknown_subcommand", ["trian", "base.yaml"], 2, ["'trian' is not a command", "train, eval"])
    cli("unknown_flag", ["train", "base.yaml", "--epochz", "3"], 2, ["--epochz"])
    cli("train_no_config", ["train"], 2, ["config"])
    cli("eval_no_weights", ["eval", "base.yaml"], 2, ["--weights"])
    cli("predict_no_output", ["predict", "base.yaml", "--weights", "good.h5"], 2, ["--output"])
    cli("predict_bad_suffix", ["predict", "base.yaml", "--weights", "good.h5", "--data", "good_x.npy", "-o", "out.txt"], 2, ["out.txt"])
    cli("export_no_output", ["export", "base.yaml", "--weights", "good.h5"], 2, ["--output"])
    cli("import_no_file", ["import"], 2, ["required"])
    cli("bench_steps_negative", ["bench", "base.yaml", "--steps", "-1"], 2, ["steps"])
    cli("bench_repeats_text", ["bench", "base.yaml", "--repeats", "abc"], 2, ["--repeats"])
    cli("weights_flag_no_value", ["eval", "base.yaml", "--weights"], 2, ["--weights"])
    cli("resume_and_weights", ["train", "--resume", "runs/base", "--weights", "good.h5"], 2, ["--weights"])
    cli("plan_two_configs", ["plan", "base.yaml", "base.yaml"], 2, ["base.yaml"])
    # Named pipes where files are read: each would block the open forever.
    for f in ["fifo.yaml", "fifo.h5", "fifo.keras", "runs/fifo_run/last.h5", "runs/fifo_plot/history.json"]:
        os.makedirs(os.path.dirname(c.path(f)) or c.root, exist_ok=True)
        if not os.path.exists(c.path(f)):
            os.mkfifo(c.path(f))
    shutil.copy(c.path("runs/base/config.yaml"), c.path("runs/fifo_run/config.yaml"))
    cli("fifo_config", ["train", "fifo.yaml"], 2, ["fifo.yaml", "named pipe"])
    cli("fifo_weights", ["eval", "base.yaml", "--weights", "fifo.h5"], 1, ["fifo.h5", "named pipe"])
    cli("fifo_import", ["import", "fifo.keras", "-o", "keep.yaml"], 1, ["fifo.keras"])
    cli("fifo_last", ["train", "--resume", "runs/fifo_run"], 1, ["last.h5", "named pipe"])
    cli("fifo_history", ["plot", "runs/fifo_plot"], 1, ["history.json", "named pipe"])


def make(binary, root):
    c = Corpus(binary, root)
    setup(c)
    config_cases(c)
    data_cases(c)
    weights_cases(c)
    keras_cases(c)
    cli_cases(c)
    return c.cases


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    os.makedirs(sys.argv[2], exist_ok=True)
    cases = make(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]))
    with open(os.path.join(sys.argv[2], "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    print(f"{len(cases)} cases in {sys.argv[2]}/cases.json", file=sys.stderr)
