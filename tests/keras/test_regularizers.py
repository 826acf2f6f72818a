# Issue 17 item 5: Keras' regularizers (L1, L2, L1L2 on kernel, recurrent kernel, bias, embeddings
# and outputs, a Bidirectional's both directions, masked steps) and constraints (MaxNorm, UnitNorm,
# MinMaxNorm, NonNeg on every kind of weight and axis) train in rnntrain as in Keras. Keras trains a few
# steps and saves a checkpoint; rnntrain imports it (the regularizers with it, no warning about
# them), evaluates it (loss with the penalty equal to Keras' evaluate), resumes one step and must
# land on Keras' next step (weights within 1e-5 + 1e-4·|ref|, the step's reported loss, penalty
# included, within 1e-5 relative). The check can fail: the same step without the regularizers lands
# measurably elsewhere, and is reported. rnntrain's export then loads in Keras with the same
# regularizers. Weights are seeded away from 0 (Keras on JAX takes sign(0) = +1, rnntrain 0).
# Usage: test_regularizers.py RNNTRAIN_BINARY
import csv
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import Suite, import_keras, legacy_weights, seeded_weights  # noqa: E402

keras, np, h5py = import_keras()
from keras import layers as L  # noqa: E402
from keras import constraints as C  # noqa: E402
from keras import regularizers as R  # noqa: E402

N, T = 8, 6


def regularizer_configs(model):
    """(layer, key, class, config) of every regularizer set in the model, wrapped layers included."""
    out = []
    for layer in model.layers:
        c = layer.get_config()
        for cfg in [c, c.get("layer", {}).get("config", {}), c.get("backward_layer", {}).get("config", {})]:
            for k, v in sorted(cfg.items()):
                if (k.endswith("_regularizer") or k.endswith("_constraint")) and v is not None:
                    out.append((layer.name, k, v["class_name"],
                                {a: round(b, 9) if isinstance(b, float) else b for a, b in v["config"].items()}))
    return out


def without_regularizers(config):
    return {k: None if k.endswith(("_regularizer", "_constraint")) else without_regularizers(v) if isinstance(v, dict)
            else v for k, v in config.items()}


def case(s, name, optimizer, inputs, layers, X, Y, loss="mse"):
    d = s.path(name, "x")[:-1]
    np.save(d + "x.npy", X)
    np.save(d + "y.npy", Y)
    model = keras.Sequential([inputs, *layers])
    seeded_weights(model, 21, scale=0.3)
    model.compile(optimizer=optimizer, loss=loss)
    model.fit(X, Y, batch_size=N, epochs=3, shuffle=False, verbose=0)
    model.save(d + "ckpt.h5")
    before = model.get_weights()
    keras_eval = model.evaluate(X, Y, batch_size=N, verbose=0)
    h = model.fit(X, Y, batch_size=N, epochs=1, shuffle=False, verbose=0)  # the step rnntrain must reproduce
    ref, ref_loss = model.get_weights(), h.history["loss"][0]

    run = d + "run/"
    os.makedirs(run, exist_ok=True)
    code, _, err = s.rnntrain("import", d + "ckpt.h5", "-o", run + "config.yaml")
    if code != 0:
        return
    if "regularizer" in err:
        s.fail(f"{name}: import warns about a regularizer it carries:\n{err}")
    data = f"data.train={{format: npy, inputs: {d}x.npy, targets: {d}y.npy}}"
    code, out, _ = s.rnntrain("eval", run + "config.yaml", "--weights", d + "ckpt.h5", data, "--json")
    if code == 0:
        s.close(f"{name}: eval loss (penalty included) against Keras' evaluate", json.loads(out)["loss"], keras_eval,
                rtol=1e-5)
    shutil.copy(d + "ckpt.h5", run + "last.h5")
    code, _, _ = s.rnntrain("train", "--resume", run, data, "train.epochs=4", f"train.batch_size={N}",
                            "train.shuffle=false")
    if code != 0:
        return
    got = legacy_weights(run + "final.h5")
    for i, (g, r) in enumerate(zip(got, ref)):
        s.close(f"{name}: weight {i} after one resumed step", g, r, atol=1e-5, rtol=1e-4)
    with open(run + "history.csv") as f:
        rows = list(csv.DictReader(f))
    s.close(f"{name}: the resumed step's loss (penalty included)", float(rows[-1]["loss"]), ref_loss, rtol=1e-5)

    # The check can fail: the same step without regularizers lands elsewhere.
    plain = keras.models.clone_model(model, clone_function=lambda layer: layer.__class__.from_config(
        without_regularizers(layer.get_config())))
    plain.set_weights(before)
    if regularizer_configs(plain):
        s.fail(f"{name}: the plain model still has regularizers {regularizer_configs(plain)}")
    plain.compile(optimizer=optimizer.__class__.from_config(optimizer.get_config()), loss=loss)
    h = plain.fit(X, Y, batch_size=N, epochs=1, shuffle=False, verbose=0)
    gap = max(float(np.abs(a - b).max()) for a, b in zip(plain.get_weights(), ref))
    print(f"{name}: without the regularizers and constraints the step's loss is {h.history['loss'][0]:.6g} (Keras {ref_loss:.6g}) "
          f"and its weights differ by up to {gap:.3g}")
    if gap < 1e-4:
        s.fail(f"{name}: the test cannot tell a regularized, constrained step from a plain one (gap {gap:.3g})")

    # Back to Keras: the export carries the same regularizers.
    for suffix in [".keras", ".h5"]:
        if s.rnntrain("export", run + "config.yaml", "--weights", run + "final.h5", "-o", d + "out" + suffix)[0] != 0:
            continue
        back = keras.saving.load_model(d + "out" + suffix)
        want, have = regularizer_configs(model), regularizer_configs(back)
        s.checks += 1
        if want != have:
            s.fail(f"{name}: out{suffix} has the regularizers {have}, Keras' model {want}")
        s.close(f"{name}: out{suffix} evaluated in Keras (penalty included)",
                back.evaluate(X, Y, batch_size=N, verbose=0), model.evaluate(X, Y, batch_size=N, verbose=0), rtol=1e-5)


def main():
    s = Suite(sys.argv[1])
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, T, 3)).astype("float32")
    X[1, 4:] = 0.0
    Y = rng.standard_normal((N, 2)).astype("float32")
    case(s, "sgd", keras.optimizers.SGD(learning_rate=0.1), keras.Input((T, 3)),
         [L.Masking(0.0),
          L.LSTM(4, return_sequences=True, kernel_regularizer=R.L1(0.01), recurrent_regularizer=R.L2(0.02),
                 bias_regularizer=R.L1L2(0.003, 0.004), activity_regularizer=R.L2(0.05),
                 kernel_constraint=C.MaxNorm(0.4), recurrent_constraint=C.UnitNorm(axis=1)),
          L.Bidirectional(L.GRU(3, kernel_regularizer=R.L2(0.01), bias_regularizer=R.L2(0.005),  # L1 at NonNeg's 0s: JAX's sign(0) is 1
                                activity_regularizer=R.L1(0.02), bias_constraint=C.NonNeg(),
                                recurrent_constraint=C.MinMaxNorm(0.2, 0.5, rate=0.7, axis=[0, 1]))),
          L.Dense(2, kernel_regularizer=R.L1L2(0.001, 0.002), bias_regularizer="l2",
                  activity_regularizer=R.L1L2(0.01, 0.03))], X, Y)
    case(s, "adam_clipnorm", keras.optimizers.Adam(learning_rate=0.01, clipnorm=0.5), keras.Input((T, 3)),
         [L.SimpleRNN(4, return_sequences=True, recurrent_regularizer=R.L1(0.01)),  # Keras 3 drops its activity one
          L.GRU(3, reset_after=False, kernel_regularizer=R.L2(0.05), bias_regularizer=R.L1L2(0.01, 0.01),
                activity_regularizer=R.L1L2(0.02, 0.1)),
          L.Dense(2, kernel_regularizer="l1", kernel_constraint=C.MinMaxNorm(0.1, 0.3, axis=0))], X, Y)
    tokens = rng.integers(1, 9, (N, T)).astype("int32")
    labels = rng.integers(0, 3, N).astype("int32")
    case(s, "tokens", keras.optimizers.SGD(learning_rate=0.5, momentum=0.5), keras.Input((T,), dtype="int32"),
         [L.Embedding(9, 4, embeddings_regularizer=R.L2(0.01), activity_regularizer=R.L2(0.05),
                      embeddings_constraint=C.MaxNorm(0.5, axis=1)),
          L.LSTM(5, kernel_regularizer=R.L1L2(0.002, 0.01)),
          L.Dense(3, activation="softmax", bias_regularizer=R.L2(0.03))], tokens, labels,
         loss="sparse_categorical_crossentropy")
    s.finish("keras regularizers")


if __name__ == "__main__":
    main()
