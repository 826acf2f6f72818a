# Keras -> rnntrain: for each model variant (every layer, option and masking case), build it in Keras
# with seeded weights, save it as .h5 (full), .keras, .weights.h5 and a legacy weights-only .h5, run
# `rnntrain import` and `rnntrain predict`, and require |Δ| ≤ 1e-5 + 1e-5·|ref| against Keras' predict.
# Also files that only Keras 2 writes, made here by hand from the documented layouts: Keras 2's
# hard_sigmoid, CuDNNLSTM and CuDNNGRU weights. Usage: test_import.py RNNTRAIN_BINARY
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import Suite, import_keras, seeded_weights  # noqa: E402

keras, np, h5py = import_keras()
from keras import layers as L  # noqa: E402
from keras.src.legacy.saving import legacy_h5_format  # noqa: E402

N, T, F, V = 4, 6, 3, 12
rng = np.random.default_rng(7)
X_FEAT = rng.standard_normal((N, T, F)).astype("float32")
X_HOLES = X_FEAT.copy()
X_HOLES[0, 4:] = 0.0        # right padding
X_HOLES[1, 0] = 0.0         # left padding
X_HOLES[2, 2:4] = 0.0       # holes
X_TOKENS = rng.integers(1, V, size=(N, T)).astype("int32")
X_TOKENS[0, 3:] = 0
X_TOKENS[1, :2] = 0
X_TOKENS[3, 2] = 0


def seq(inp, *layers):
    return keras.Sequential([inp, *layers])


def functional(inp, *layers):
    h = inp
    for layer in layers:
        h = layer(h)
    return keras.Model(inp, h)


def variants():
    I = lambda: keras.Input((T, F))  # noqa: E731
    tok = lambda: keras.Input((T,), dtype="int32")  # noqa: E731
    v = {
        "lstm_last": (seq(I(), L.LSTM(5)), X_FEAT),
        "lstm_seq_dense": (seq(I(), L.LSTM(5, return_sequences=True), L.Dense(2)), X_FEAT),
        "lstm_hardsig_nobias": (seq(I(), L.LSTM(4, recurrent_activation="hard_sigmoid", use_bias=False)), X_FEAT),
        "lstm_relu_noforget_back": (seq(I(), L.LSTM(4, activation="relu", unit_forget_bias=False, go_backwards=True,
                                                   return_sequences=True)), X_FEAT),
        "gru_after": (seq(I(), L.GRU(5)), X_FEAT),
        "gru_before_td": (seq(I(), L.GRU(5, reset_after=False, return_sequences=True),
                              L.TimeDistributed(L.Dense(3, activation="softmax"))), X_FEAT),
        "gru_nobias_backwards": (seq(I(), L.GRU(4, use_bias=False, go_backwards=True)), X_FEAT),
        "simplernn_relu_stack": (seq(I(), L.SimpleRNN(4, activation="relu", return_sequences=True), L.SimpleRNN(3)), X_FEAT),
        "bidir_lstm_concat_seq": (seq(I(), L.Bidirectional(L.LSTM(3, return_sequences=True)), L.Dense(1)), X_FEAT),
        "bidir_gru_sum": (seq(I(), L.Bidirectional(L.GRU(3), merge_mode="sum")), X_FEAT),
        "bidir_simplernn_mul_seq": (seq(I(), L.Bidirectional(L.SimpleRNN(3, return_sequences=True), merge_mode="mul")), X_FEAT),
        "bidir_lstm_ave": (seq(I(), L.Bidirectional(L.LSTM(3), merge_mode="ave"), L.Dense(2, activation="sigmoid")), X_FEAT),
        "masking_lstm_stack": (seq(I(), L.Masking(0.0), L.LSTM(4, return_sequences=True), L.LSTM(3)), X_HOLES),
        "masking_bidir_gru_td": (seq(I(), L.Masking(0.0), L.Bidirectional(L.GRU(3, return_sequences=True)),
                                     L.TimeDistributed(L.Dense(2, activation="softmax"))), X_HOLES),
        "masking_gru_before_backwards": (seq(I(), L.Masking(0.0), L.GRU(4, reset_after=False, go_backwards=True)), X_HOLES),
        "masking_simplernn_seq": (seq(I(), L.Masking(0.0), L.SimpleRNN(4, return_sequences=True)), X_HOLES),
        "embedding_mask_lstm": (seq(tok(), L.Embedding(V, 4, mask_zero=True), L.LSTM(5), L.Dense(3, activation="softmax")), X_TOKENS),
        "embedding_gru_seq": (seq(tok(), L.Embedding(V, 4), L.GRU(4, return_sequences=True), L.Dense(1, activation="sigmoid")), X_TOKENS),
        "embedding_mask_bidir_lstm_seq": (seq(tok(), L.Embedding(V, 4, mask_zero=True),
                                              L.Bidirectional(L.LSTM(3, return_sequences=True), merge_mode="concat")), X_TOKENS),
        "dropout_stack": (seq(I(), L.LSTM(4, return_sequences=True, dropout=0.2, recurrent_dropout=0.1), L.Dropout(0.3),
                              L.GRU(3), L.Dense(2, activation="tanh")), X_FEAT),
        "variable_timesteps": (seq(keras.Input((None, F)), L.LSTM(4, return_sequences=True), L.Dense(1, activation="relu")), X_FEAT),
        "dense_activations": (seq(I(), L.GRU(4, return_sequences=True), L.Dense(5, activation="gelu"),
                                  L.Dense(4, activation="swish"), L.Dense(4, activation="elu"),
                                  L.TimeDistributed(L.Dense(3, activation="selu")), L.GRU(3),
                                  L.Dense(3, activation="softplus"), L.Dense(2, activation="softsign")), X_FEAT),
        # The layers around the recurrent stacks (issue 36).
        "conv_pool_front": (seq(I(), L.Conv1D(4, 3, padding="same", activation="relu"), L.MaxPooling1D(2), L.LSTM(4),
                                L.Dense(2)), X_FEAT),
        "conv_causal_avgpool_same": (seq(I(), L.Conv1D(3, 2, padding="causal", dilation_rate=2, use_bias=False),
                                         L.AveragePooling1D(3, strides=1, padding="same"), L.GRU(3)), X_FEAT),
        "conv_strided_embedding": (seq(tok(), L.Embedding(V, 4), L.Conv1D(5, 2, strides=2, activation="gelu"),
                                       L.GRU(3, return_sequences=True), L.GlobalMaxPooling1D()), X_TOKENS),
        "masking_gap_layernorm": (seq(I(), L.Masking(0.0), L.LSTM(4, return_sequences=True), L.LayerNormalization(),
                                      L.GlobalAveragePooling1D(), L.Dense(2)), X_HOLES),
        "flatten_activation_spatial": (seq(I(), L.Conv1D(2, 2), L.SpatialDropout1D(0.2), L.Activation("silu"),
                                           L.Flatten(), L.Dense(3, activation="softmax")), X_FEAT),
        "td_dropout_layernorm_noscale": (seq(I(), L.LSTM(4, return_sequences=True), L.TimeDistributed(L.Dropout(0.3)),
                                             L.LayerNormalization(scale=False, epsilon=0.01),
                                             L.TimeDistributed(L.Dense(2))), X_FEAT),
        "gmp_keepdims": (seq(I(), L.GRU(3, return_sequences=True), L.GlobalMaxPooling1D(keepdims=True)), X_FEAT),
        "functional_masking_lstm": (functional(keras.Input((T, F)), L.Masking(0.0), L.LSTM(4), L.Dense(2)), X_HOLES),
        "functional_embedding_mask_gru": (functional(keras.Input((None,), dtype="int32"), L.Embedding(V, 3, mask_zero=True),
                                                     L.GRU(4), L.Dense(1)), X_TOKENS),
    }
    return v


def check_model(s, name, model, x, seed):
    seeded_weights(model, seed)
    ref = model.predict(x, verbose=0)
    d = s.path(name, "x")[:-1]
    np.save(d + "x.npy", x)
    model.save(d + "model.h5")
    model.save(d + "model.keras")
    model.save_weights(d + "model.weights.h5")
    with h5py.File(d + "legacy_weights.h5", "w") as f:  # what Keras 2's save_weights('w.h5') writes
        legacy_h5_format.save_weights_to_hdf5_group(f, model)
    for src in ["model.h5", "model.keras"]:
        cfg = d + src.replace(".", "_") + ".yaml"
        code, _, _ = s.rnntrain("import", d + src, "-o", cfg)
        if code != 0:
            continue
        weights = cfg[:-5] + "_weights.h5"
        runs = [(f"import {src}", weights)]
        if src == "model.h5":
            runs += [("--weights model.weights.h5", d + "model.weights.h5"),
                     ("--weights legacy weights-only .h5", d + "legacy_weights.h5"),
                     ("--weights model.keras", d + "model.keras")]
        for what, w in runs:
            out = d + "pred.npy"
            if os.path.exists(out):
                os.remove(out)
            code, _, _ = s.rnntrain("predict", cfg, "--weights", w, "--data", d + "x.npy", "-o", out)
            if code == 0:
                s.close(f"{name}: {what}", np.load(out), ref)


def hard_sigmoid_keras2(s):
    """A Keras 2 file whose LSTM uses 'hard_sigmoid' must be read as 0.2x+0.5 (Keras 2's definition)."""
    k2 = lambda z: keras.ops.clip(0.2 * z + 0.5, 0.0, 1.0)  # noqa: E731
    ref_model = seq(keras.Input((T, F)), L.LSTM(4, recurrent_activation=k2), L.Dense(1))
    seeded_weights(ref_model, 99)
    ref = ref_model.predict(X_FEAT, verbose=0)
    k3_model = seq(keras.Input((T, F)), L.LSTM(4, recurrent_activation="hard_sigmoid"), L.Dense(1))
    k3_model.set_weights(ref_model.get_weights())
    d = s.path("hard_sigmoid_keras2", "x")[:-1]
    np.save(d + "x.npy", X_FEAT)
    k3_model.save(d + "model.h5")
    with h5py.File(d + "model.h5", "r+") as f:  # as Keras 2.15 would label it
        f.attrs["keras_version"] = "2.15.0"
        f["model_weights"].attrs["keras_version"] = "2.15.0"
    if s.rnntrain("import", d + "model.h5", "-o", d + "m.yaml")[0] != 0:
        return
    if "hard_sigmoid_keras2" not in open(d + "m.yaml").read():
        s.fail("hard_sigmoid_keras2: a Keras 2 file's hard_sigmoid was not read as hard_sigmoid_keras2")
    if s.rnntrain("predict", d + "m.yaml", "--weights", d + "m_weights.h5", "--data", d + "x.npy", "-o", d + "p.npy")[0] == 0:
        s.close("hard_sigmoid: Keras 2 file (0.2x+0.5)", np.load(d + "p.npy"), ref)


def to_cudnn_kernel(k, gates):
    # tf-keras _convert_rnn_weights: per gate block, k.T.reshape(k.shape, order='C').
    return np.hstack([b.T.reshape(b.shape, order="C") for b in np.hsplit(k, gates)])


def to_cudnn_recurrent(r, gates):
    return np.hstack([b.T for b in np.hsplit(r, gates)])


def cudnn_file(s, name, cls, keras_layer, convert):
    """A legacy .h5 as Keras 2 wrote CuDNNLSTM/CuDNNGRU models, made from a Keras 3 LSTM/GRU by the
    documented conversion; rnntrain must import it and predict what the Keras 3 layer predicts."""
    model = seq(keras.Input((T, F)), keras_layer, L.Dense(2))
    seeded_weights(model, 5)
    ref = model.predict(X_FEAT, verbose=0)
    d = s.path(name, "x")[:-1]
    np.save(d + "x.npy", X_FEAT)
    model.save(d + "model.h5")
    with h5py.File(d + "model.h5", "r+") as f:
        cfg = json.loads(f.attrs["model_config"])
        rnn = cfg["config"]["layers"][1]
        keep = {"name", "trainable", "dtype", "units", "kernel_initializer", "recurrent_initializer", "bias_initializer",
                "unit_forget_bias", "return_sequences", "return_state", "go_backwards", "stateful"}
        rnn["class_name"] = cls
        rnn["config"] = {k: v for k, v in rnn["config"].items() if k in keep}
        f.attrs["model_config"] = json.dumps(cfg).encode()
        f.attrs["keras_version"] = "2.3.1"
        g = f["model_weights"][keras_layer.name]
        names = [n.decode() if isinstance(n, bytes) else n for n in g.attrs["weight_names"]]
        vals = [g[n][()] for n in names]
        new = convert(vals)
        for n in names:
            del g[n]
        for n, v in zip(names, new):
            g.create_dataset(n, data=v)
    if s.rnntrain("import", d + "model.h5", "-o", d + "m.yaml")[0] != 0:
        return
    if s.rnntrain("predict", d + "m.yaml", "--weights", d + "m_weights.h5", "--data", d + "x.npy", "-o", d + "p.npy")[0] == 0:
        s.close(f"{name}: {cls} file", np.load(d + "p.npy"), ref)
    # The same weights into an existing LSTM/GRU config with --weights.
    if s.rnntrain("predict", d + "m.yaml", "--weights", d + "model.h5", "--data", d + "x.npy", "-o", d + "p2.npy")[0] == 0:
        s.close(f"{name}: {cls} weights via --weights", np.load(d + "p2.npy"), ref)


def warnings(s):
    """Issue 17 item 8: what import cannot carry is named with what rnntrain does instead; a model
    with nothing of the kind imports without a warning."""
    x = np.zeros((4, 5, 3), "float32")
    y = np.zeros((4,), "int32")
    plain = keras.Sequential([keras.Input((5, 3)), L.LSTM(4), L.Dense(3, activation="softmax")])
    plain.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    plain.fit(x, y, verbose=0)
    extras = keras.Sequential([
        keras.Input((5, 3)),
        L.LSTM(4, kernel_regularizer=keras.regularizers.L2(0.01), recurrent_constraint=keras.constraints.MaxNorm(2.0),
               activity_regularizer=keras.regularizers.OrthogonalRegularizer(0.001)),
        L.Dense(3, activation="softmax", bias_regularizer=keras.regularizers.OrthogonalRegularizer(0.01))])
    extras.compile(optimizer=keras.optimizers.Adam(0.01, use_ema=True, gradient_accumulation_steps=2),
                   loss=keras.losses.SparseCategoricalCrossentropy(ignore_class=0), loss_weights=[2.0],
                   metrics=["accuracy", keras.metrics.AUC()])  # saved compiled, unbuilt
    for suffix in [".keras", ".h5"]:
        for name, model in [("plain", plain), ("extras", extras)]:
            path = s.path("warnings", name + suffix)
            model.save(path)
            code, _, err = s.rnntrain("import", path, "-o", path + ".yaml")
            warned = [line for line in err.splitlines() if "warn" in line]
            if name == "plain":
                if warned:
                    s.fail(f"import of a plain compiled model ({suffix}) warns: {warned}")
                continue
            if any("kernel_regularizer" in w or "constraint" in w for w in warned):
                s.fail(f"import ({suffix}) warns about kernel_regularizer L2 or the MaxNorm constraint, which it "
                       f"carries: {warned}")
            for phrase in ["activity_regularizer OrthogonalRegularizer", "no penalty added to the loss",
                           "bias_regularizer OrthogonalRegularizer", "use_ema true",
                           "gradient_accumulation_steps 2", "'ignore_class' 0", "metric", "AUC", "loss_weights [2.0]"]:
                if not any(phrase in w for w in warned):
                    s.fail(f"import ({suffix}) does not warn about {phrase!r}; it warns: {warned}")
            s.checks += 1
    # Muon: Keras always writes exclude_layers; an empty list is what rnntrain does, a pattern is named.
    for suffix in [".keras", ".h5"]:
        for excluded in [[], ["dense"]]:
            m = keras.Sequential([keras.Input((5, 3)), L.LSTM(4), L.Dense(3, activation="softmax")])
            m.compile(optimizer=keras.optimizers.Muon(0.01, exclude_layers=excluded),
                      loss="sparse_categorical_crossentropy")
            path = s.path("warnings", f"muon{len(excluded)}{suffix}")
            m.save(path)
            code, _, err = s.rnntrain("import", path, "-o", path + ".yaml")
            warned = [line for line in err.splitlines() if "warn" in line]
            named = any("exclude_layers" in w and "dense" in w for w in warned)
            if code != 0 or (warned if not excluded else not named):
                s.fail(f"import of Muon with exclude_layers={excluded} ({suffix}): code {code}, warnings {warned}")
            elif "type: muon" not in open(path + ".yaml").read():
                s.fail(f"import of Muon ({suffix}) did not configure muon")
            s.checks += 1


def main():
    s = Suite(sys.argv[1])
    warnings(s)
    names = []
    for i, (name, (model, x)) in enumerate(variants().items()):
        check_model(s, name, model, x, seed=100 + i)
        names.append(name)
    hard_sigmoid_keras2(s)
    u = 4
    cudnn_file(s, "cudnn_lstm", "CuDNNLSTM", L.LSTM(u, return_sequences=False),
               lambda w: [to_cudnn_kernel(w[0], 4), to_cudnn_recurrent(w[1], 4), np.tile(0.5 * w[2], 2)])
    cudnn_file(s, "cudnn_gru", "CuDNNGRU", L.GRU(u, return_sequences=True),
               lambda w: [to_cudnn_kernel(w[0], 3), to_cudnn_recurrent(w[1], 3), w[2].reshape(-1)])
    print(f"variants ({len(names)} models x 5 loads, plus hard_sigmoid_keras2, cudnn_lstm, cudnn_gru): {', '.join(names)}")
    s.finish("keras import")


if __name__ == "__main__":
    main()
