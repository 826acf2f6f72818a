# Issue 17 item 6: Keras' class_weight and sample_weight in training, and sample weights in the
# validation loss. Keras compiles a seeded model and fits one step (one batch) with class_weight or
# sample_weight (per sample, and per timestep for an output per timestep, with a masked input);
# rnntrain imports the same model, starts from the same weights and trains one step with
# train.class_weight or data.train.sample_weight: its weights must land on Keras' (within
# 1e-5 + 1e-4·|ref|), its loss and val_loss equal Keras' (1e-5 relative). The check can fail: the
# same step without weights lands measurably elsewhere, and is reported.
# Usage: test_weights.py RNNTRAIN_BINARY
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import Suite, import_keras, legacy_weights, seeded_weights  # noqa: E402

keras, np, h5py = import_keras()
from keras import layers as L  # noqa: E402

N, T = 8, 6
rng = np.random.default_rng(9)


def case(s, name, layers, loss, X, Y, class_weight=None, sample_weight=None, optimizer="sgd"):
    d = s.path(name, "x")[:-1]
    np.save(d + "x.npy", X)
    np.save(d + "y.npy", Y)
    model = keras.Sequential(layers)
    seeded_weights(model, 17, scale=0.4)
    opt = keras.optimizers.SGD(learning_rate=0.5) if optimizer == "sgd" else keras.optimizers.Adam(learning_rate=0.05)
    model.compile(optimizer=opt, loss=loss)
    model.save(d + "init.h5")
    before = model.get_weights()
    val = (X[:5], Y[:5]) if sample_weight is None else (X[:5], Y[:5], sample_weight[:5])
    h = model.fit(X, Y, batch_size=N, epochs=1, shuffle=False, verbose=0, class_weight=class_weight,
                  sample_weight=sample_weight, validation_data=val)
    ref, ref_loss, ref_val = model.get_weights(), h.history["loss"][0], h.history["val_loss"][0]

    code, _, _ = s.rnntrain("import", d + "init.h5", "-o", d + "config.yaml")
    if code != 0:
        return
    args = [f"output.dir={d}run", "train.epochs=1", f"train.batch_size={N}", "train.shuffle=false"]
    src = f"format: npy, inputs: {d}x.npy, targets: {d}y.npy"
    if sample_weight is not None:
        np.save(d + "w.npy", sample_weight)
        np.save(d + "vx.npy", X[:5]), np.save(d + "vy.npy", Y[:5]), np.save(d + "vw.npy", sample_weight[:5])
        args += [f"data.train={{{src}, sample_weight: {d}w.npy}}",
                 f"data.validation={{format: npy, inputs: {d}vx.npy, targets: {d}vy.npy, sample_weight: {d}vw.npy}}"]
    else:
        np.save(d + "vx.npy", X[:5]), np.save(d + "vy.npy", Y[:5])
        args += [f"data.train={{{src}}}", f"data.validation={{format: npy, inputs: {d}vx.npy, targets: {d}vy.npy}}"]
    if class_weight is not None:
        args.append("train.class_weight={" + ", ".join(f"{k}: {v}" for k, v in class_weight.items()) + "}")
    if s.rnntrain("train", d + "config.yaml", "--weights", d + "init.h5", *args)[0] != 0:
        return
    for i, (g, r) in enumerate(zip(legacy_weights(d + "run/final.h5"), ref)):
        s.close(f"{name}: weight {i} after the weighted step", g, r, atol=1e-5, rtol=1e-4)
    with open(d + "run/history.csv") as f:
        row = list(csv.DictReader(f))[-1]
    s.close(f"{name}: the weighted step's loss", float(row["loss"]), ref_loss, rtol=1e-5)
    s.close(f"{name}: val_loss (validation sample weights, no class weights)", float(row["val_loss"]), ref_val, rtol=1e-5)

    # The check can fail: the same step unweighted lands elsewhere.
    model.set_weights(before)
    model.compile(optimizer=opt.__class__.from_config(opt.get_config()), loss=loss)
    model.fit(X, Y, batch_size=N, epochs=1, shuffle=False, verbose=0)
    gap = max(float(np.abs(a - b).max()) for a, b in zip(model.get_weights(), ref))
    print(f"{name}: an unweighted step lands up to {gap:.3g} away")
    if gap < 1e-3:
        s.fail(f"{name}: the test cannot tell a weighted step from an unweighted one (gap {gap:.3g})")


def main():
    s = Suite(sys.argv[1])
    X = rng.standard_normal((N, T, 3)).astype("float32")
    binary = rng.integers(0, 2, (N, 1)).astype("float32")
    case(s, "class_weight_binary", [keras.Input((T, 3)), L.LSTM(4), L.Dense(1, activation="sigmoid")],
         "binary_crossentropy", X, binary, class_weight={0: 0.5, 1: 4.0})
    onehot = np.eye(3, dtype="float32")[rng.integers(0, 3, N)]
    case(s, "class_weight_categorical", [keras.Input((T, 3)), L.GRU(5), L.Dense(3, activation="softmax")],
         "categorical_crossentropy", X, onehot, class_weight={1: 3.0, 2: 0.25}, optimizer="adam")
    labels = rng.integers(0, 3, (N,)).astype("float32")
    case(s, "class_weight_sparse", [keras.Input((T, 3)), L.SimpleRNN(4), L.Dense(3)],
         keras.losses.SparseCategoricalCrossentropy(from_logits=True), X, labels, class_weight={0: 2.0, 2: 0.0})
    case(s, "sample_weight", [keras.Input((T, 3)), L.LSTM(4), L.Dense(2)], "mse", X,
         rng.standard_normal((N, 2)).astype("float32"), sample_weight=rng.uniform(0, 3, N).astype("float32"))
    tokens = rng.integers(1, 9, (N, T)).astype("float32")
    tokens[2, 3:] = 0
    tokens[5, 1:] = 0
    case(s, "sample_weight_per_timestep_masked",
         [keras.Input((T,)), L.Embedding(9, 4, mask_zero=True), L.LSTM(4, return_sequences=True), L.Dense(5)],
         keras.losses.SparseCategoricalCrossentropy(from_logits=True), tokens,
         rng.integers(0, 5, (N, T)).astype("float32"), sample_weight=rng.uniform(0, 2, (N, T)).astype("float32"))
    s.finish("test_weights")


main()
