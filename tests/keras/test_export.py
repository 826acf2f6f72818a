# rnntrain -> Keras -> rnntrain: train a few steps in rnntrain, export the checkpoint to .h5, .keras and
# .weights.h5, load each in Keras (load_model, load_weights; the checkpoint itself too, with its
# optimizer state in Keras' names and order) and require Keras' predictions to equal rnntrain's within 1e-5 + 1e-5·|ref|.
# Then save from Keras in every format, bring it back (import, --weights) and require every weight to
# be bit-identical to the checkpoint's. Usage: test_export.py RNNTRAIN_BINARY
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import Suite, import_keras  # noqa: E402

keras, np, h5py = import_keras()
from keras.src.legacy.saving import legacy_h5_format  # noqa: E402

N, T, F, V = 16, 6, 3, 10
rng = np.random.default_rng(11)
X = rng.standard_normal((N, T, F)).astype("float32")
XM = X.copy()
XM[0, 4:] = 0
XM[3, :2] = 0
XM[5, 2] = 0
XT = rng.integers(1, V, size=(N, T)).astype("int32")
XT[0, 3:] = 0
XT[2, :2] = 0

# name -> (layers YAML, inputs, target shape per sample, loss)
VARIANTS = {
    "lstm_stack": ("""
    - {type: Input, shape: [6, 3]}
    - {type: LSTM, units: 8, return_sequences: true}
    - {type: LSTM, units: 4, recurrent_activation: hard_sigmoid}
    - {type: Dense, units: 2}""", X, (2,), "mse"),
    "gru_before_td_softmax": ("""
    - {type: Input, shape: [null, 3]}
    - {type: GRU, units: 5, reset_after: false, return_sequences: true}
    - {type: TimeDistributed, layer: {type: Dense, units: 3, activation: softmax}}""", X, (T, 3), "mse"),
    "masking_bidir_gru_sum": ("""
    - {type: Input, shape: [6, 3]}
    - {type: Masking, mask_value: 0.0}
    - {type: Bidirectional, merge_mode: sum, layer: {type: GRU, units: 3, return_sequences: true}}
    - {type: TimeDistributed, layer: {type: Dense, units: 2}}""", XM, (T, 2), "mse"),
    "embedding_bidir_lstm_concat": ("""
    - {type: Input, shape: [6]}
    - {type: Embedding, input_dim: 10, output_dim: 4, mask_zero: true}
    - {type: Bidirectional, layer: {type: LSTM, units: 3}}
    - {type: Dense, units: 3, activation: softmax}""", XT, (3,), "categorical_crossentropy"),
    "simplernn_dropout_bidir_ave": ("""
    - {type: Input, shape: [6, 3]}
    - {type: SimpleRNN, units: 4, activation: relu, return_sequences: true, go_backwards: true}
    - {type: Dropout, rate: 0.2}
    - {type: Bidirectional, merge_mode: ave, layer: {type: SimpleRNN, units: 3, use_bias: false}}
    - {type: Dense, units: 1, activation: sigmoid}""", X, (1,), "binary_crossentropy"),
    "lstm_nobias_bidir_mul": ("""
    - {type: Input, shape: [6, 3]}
    - {type: LSTM, units: 4, use_bias: false, unit_forget_bias: false, return_sequences: true}
    - {type: Bidirectional, merge_mode: mul, layer: {type: GRU, units: 2}}
    - {type: Dense, units: 2, activation: tanh, use_bias: false}""", X, (2,), "mae"),
    "dense_activations": ("""
    - {type: Input, shape: [6, 3]}
    - {type: GRU, units: 4, return_sequences: true}
    - {type: TimeDistributed, layer: {type: Dense, units: 5, activation: gelu}}
    - {type: Dense, units: 4, activation: swish}
    - {type: Dense, units: 4, activation: elu}
    - {type: LSTM, units: 4}
    - {type: Dense, units: 4, activation: selu}
    - {type: Dense, units: 3, activation: softplus}
    - {type: Dense, units: 2, activation: softsign}""", X, (2,), "mse"),
    "conv_pool_layernorm": ("""
    - {type: Input, shape: [6, 3]}
    - {type: Conv1D, filters: 4, kernel_size: 3, padding: same, activation: relu}
    - {type: MaxPooling1D, pool_size: 2}
    - {type: LayerNormalization}
    - {type: LSTM, units: 4, return_sequences: true}
    - {type: AveragePooling1D, pool_size: 2, strides: 1, padding: same}
    - {type: GlobalAveragePooling1D}
    - {type: Dense, units: 2}""", X, (2,), "mse"),
    "conv_causal_flatten": ("""
    - {type: Input, shape: [6, 3]}
    - {type: Conv1D, filters: 3, kernel_size: 2, padding: causal, dilation_rate: 2, use_bias: false}
    - {type: SpatialDropout1D, rate: 0.2}
    - {type: Activation, activation: gelu}
    - {type: GRU, units: 3, return_sequences: true}
    - {type: TimeDistributed, layer: {type: Dropout, rate: 0.1}}
    - {type: Flatten}
    - {type: Dense, units: 3, activation: softmax}""", X, (3,), "categorical_crossentropy"),
    "masking_gap_gmp": ("""
    - {type: Input, shape: [6, 3]}
    - {type: Masking, mask_value: 0.0}
    - {type: GRU, units: 4, return_sequences: true}
    - {type: LayerNormalization, center: false, epsilon: 0.01}
    - {type: GlobalMaxPooling1D, keepdims: true}
    - {type: Conv1D, filters: 2, kernel_size: 1}
    - {type: GlobalAveragePooling1D}""", XM, (2,), "mse"),
}


def legacy_weights(path):
    """Every weight of a legacy .h5 (full or weights-only) in file order."""
    dec = lambda n: n.decode() if isinstance(n, bytes) else str(n)  # noqa: E731
    with h5py.File(path, "r") as f:
        g = f["model_weights"] if "model_weights" in f else f
        out = []
        for n in g.attrs["layer_names"]:
            lg = g[dec(n)]
            for w in lg.attrs["weight_names"]:
                out.append(lg[dec(w)][()])
        return out


def predict_rnntrain(s, cfg, weights, x_path, out):
    if os.path.exists(out):
        os.remove(out)
    code, _, _ = s.rnntrain("predict", cfg, "--weights", weights, "--data", x_path, "-o", out)
    return np.load(out) if code == 0 else None


def run_variant(s, name, layers, x, yshape, loss):
    d = s.path(name, "x")[:-1]
    np.save(d + "x.npy", x)
    y = rng.random((N, *yshape)).astype("float32")
    if loss == "categorical_crossentropy":
        y = np.eye(yshape[-1], dtype="float32")[rng.integers(0, yshape[-1], N)]
    if loss == "binary_crossentropy":
        y = (y > 0.5).astype("float32")
    np.save(d + "y.npy", y)
    cfg = d + "config.yaml"
    with open(cfg, "w") as f:
        f.write(f"model:\n  layers:{layers}\n"
                f"data:\n  train: {{format: npy, inputs: {d}x.npy, targets: {d}y.npy}}\n"
                f"train: {{epochs: 2, batch_size: 8, loss: {loss}, optimizer: {{type: adam, learning_rate: 0.01}}}}\n"
                f"output: {{dir: {d}run}}\n")
    if s.rnntrain("train", cfg)[0] != 0:
        return
    ckpt = d + "run/last.h5"
    ref = predict_rnntrain(s, cfg, ckpt, d + "x.npy", d + "p.npy")
    if ref is None:
        return
    for suffix in [".h5", ".keras", ".weights.h5"]:
        s.rnntrain("export", cfg, "--weights", ckpt, "-o", d + "out" + suffix)

    m = keras.saving.load_model(d + "out.h5")
    s.close(f"{name}: Keras load_model(export .h5)", m.predict(x, verbose=0), ref)
    m = keras.saving.load_model(d + "out.keras")
    s.close(f"{name}: Keras load_model(export .keras)", m.predict(x, verbose=0), ref)
    for w in ["out.weights.h5", "out.h5", "run/last.h5"]:
        m.set_weights([np.zeros_like(v) for v in m.get_weights()])
        m.load_weights(d + w)
        s.close(f"{name}: Keras load_weights({w})", m.predict(x, verbose=0), ref)

    # The checkpoint as a compiled Keras model, and its optimizer variables (in /rnntrain, where Keras 3's
    # legacy loader does not trip over them: docs/keras.md) in Keras' own variable order and names.
    c = keras.saving.load_model(ckpt)
    s.close(f"{name}: Keras load_model(checkpoint last.h5)", c.predict(x, verbose=0), ref)
    steps = 2 * ((N + 7) // 8)
    fresh = keras.optimizers.Adam(learning_rate=0.01)
    fresh.build(c.trainable_variables)
    with h5py.File(ckpt, "r") as f:
        fresh.set_weights(legacy_h5_format.load_optimizer_weights_from_hdf5_group(f["rnntrain"]))
        og = f["rnntrain/optimizer_weights"]
        names = [n.decode() if isinstance(n, bytes) else n for n in og.attrs["weight_names"]]
        values = [og[n][()] for n in names]
    if int(fresh.iterations.numpy()) != steps:
        s.fail(f"{name}: the checkpoint's optimizer is at step {int(fresh.iterations.numpy())}, expected {steps}")
    tail = lambda ps: [q.split("/", 1)[1] for q in ps]  # noqa: E731 (Keras numbers its optimizers adam_1, ...)
    if tail(v.path for v in fresh.variables) != tail(names):
        s.fail(f"{name}: optimizer variable names differ from Keras': {names[:4]} vs {[v.path for v in fresh.variables][:4]}")
    for v, n, value in zip(fresh.variables[2:], names[2:], values[2:]):
        s.equal(f"{name}: Keras optimizer variable {v.path}", np.asarray(v.numpy()), value)
    if all(float(np.abs(np.asarray(v.numpy())).sum()) == 0 for v in fresh.variables[2:]):
        s.fail(f"{name}: every restored Adam slot is zero")

    # Back: Keras saves what it loaded; rnntrain reads it; every weight must be bit-identical.
    m = keras.saving.load_model(d + "out.keras")
    m.save(d + "k.h5")
    m.save(d + "k.keras")
    m.save_weights(d + "k.weights.h5")
    with h5py.File(d + "k_legacy.h5", "w") as f:
        legacy_h5_format.save_weights_to_hdf5_group(f, m)
    orig = legacy_weights(ckpt)
    for src in ["k.h5", "k.keras"]:
        y_cfg = d + src.replace(".", "_") + ".yaml"
        if s.rnntrain("import", d + src, "-o", y_cfg)[0] == 0:
            got = legacy_weights(y_cfg[:-5] + "_weights.h5")
            for i, (a, b) in enumerate(zip(got, orig)):
                s.equal(f"{name}: weight {i} after rnntrain -> Keras -> import {src}", a, b)
            if len(got) != len(orig):
                s.fail(f"{name}: import {src} gave {len(got)} weights, the checkpoint has {len(orig)}")
    for src in ["k.weights.h5", "k_legacy.h5", "k.keras"]:
        back = d + "back_" + src.replace(".", "_") + ".h5"
        if s.rnntrain("export", cfg, "--weights", d + src, "-o", back)[0] == 0:
            got = legacy_weights(back)
            for i, (a, b) in enumerate(zip(got, orig)):
                s.equal(f"{name}: weight {i} after rnntrain -> Keras {src} -> --weights", a, b)


def main():
    s = Suite(sys.argv[1])
    for name, (layers, x, yshape, loss) in VARIANTS.items():
        run_variant(s, name, layers, x, yshape, loss)
    print(f"variants: {', '.join(VARIANTS)}")
    s.finish("keras export")


if __name__ == "__main__":
    main()
