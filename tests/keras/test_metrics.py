# Issue 17 item 6: Keras' metrics beyond accuracy and the errors, against Keras' own numbers:
# TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy, Precision, Recall (thresholds, class_id),
# AUC (ROC and PR, the three summation methods, multi_label, from_logits), F1Score and FBetaScore
# (micro, macro, weighted; by the row's maximum or a threshold), the regression metrics
# RootMeanSquaredError, R2Score (both aggregations; Keras 3.15's adjusted R2 fails under JAX's jit),
# MeanSquaredLogarithmicError and LogCoshError, on outputs per sample and per masked timestep.
# rnntrain trains one epoch (one step), then one more from last.h5: the second
# epoch's training metrics are those of last.h5's predictions, which Keras' evaluate of last.h5
# must give. `rnntrain eval --json` of the final weights must equal Keras' evaluate of final.h5 and
# of the .keras export, in one batch and in batches of 5 (state accumulated over batches).
# Usage: test_metrics.py RNNTRAIN_BINARY
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import Suite, import_keras  # noqa: E402

keras, np, h5py = import_keras()

N, T = 24, 6
rng = np.random.default_rng(11)


def padded_tokens():
    x = rng.integers(1, 10, (N, T)).astype("float32")
    for i, n in enumerate(rng.integers(2, T + 1, N)):
        x[i, n:] = 0  # masked tail (mask_zero)
    return x


FEATURES = rng.standard_normal((N, T, 3)).astype("float32")
TOKENS = padded_tokens()

CASES = [
    dict(name="binary", x=FEATURES, y=rng.integers(0, 2, (N, 1)).astype("float32"),
         layers="    - {type: Input, shape: [6, 3]}\n    - {type: LSTM, units: 5}\n"
                "    - {type: Dense, units: 1, activation: sigmoid}\n",
         loss="binary_crossentropy",
         metrics="[accuracy, precision, recall, {type: precision, thresholds: 0.3, name: p03}, auc, "
                 "{type: auc, curve: PR, name: pr_auc}, {type: auc, summation_method: minoring, name: auc_min}, "
                 "{type: auc, curve: PR, summation_method: majoring, num_thresholds: 20, name: pr_maj}]"),
    dict(name="categorical", x=FEATURES, y=np.eye(4, dtype="float32")[rng.integers(0, 4, N)],
         layers="    - {type: Input, shape: [6, 3]}\n    - {type: GRU, units: 6}\n"
                "    - {type: Dense, units: 4, activation: softmax}\n",
         loss="categorical_crossentropy",
         metrics="[{type: top_k_categorical_accuracy, k: 2}, f1_score, {type: f1_score, average: micro, name: f1_micro}, "
                 "{type: fbeta_score, beta: 0.5, threshold: 0.3, average: weighted}, "
                 "{type: precision, class_id: 2, name: p2}, {type: recall, class_id: 1, name: r1}, "
                 "{type: auc, multi_label: true, name: auc_ml}]"),
    dict(name="sparse_masked", x=TOKENS, y=rng.integers(0, 7, (N, T)).astype("float32"),
         layers="    - {type: Input, shape: [6]}\n    - {type: Embedding, input_dim: 10, output_dim: 4, mask_zero: true}\n"
                "    - {type: LSTM, units: 5, return_sequences: true}\n    - {type: Dense, units: 7}\n",
         loss="{type: sparse_categorical_crossentropy, from_logits: true}",
         metrics="[accuracy, {type: sparse_top_k_categorical_accuracy, k: 3}]"),
    dict(name="binary_masked", x=TOKENS, y=rng.integers(0, 2, (N, T, 2)).astype("float32"),
         layers="    - {type: Input, shape: [6]}\n    - {type: Embedding, input_dim: 10, output_dim: 4, mask_zero: true}\n"
                "    - {type: LSTM, units: 5, return_sequences: true}\n    - {type: Dense, units: 2}\n",
         loss="{type: binary_crossentropy, from_logits: true}",
         metrics="[{type: precision, thresholds: 0.0}, {type: recall, thresholds: 0.0}, {type: auc, from_logits: true}, "
                 "{type: auc, from_logits: true, curve: PR, name: pr_auc}]"),
    dict(name="regression", x=FEATURES, y=np.abs(rng.standard_normal((N, 2))).astype("float32"),
         layers="    - {type: Input, shape: [6, 3]}\n    - {type: GRU, units: 5}\n    - {type: Dense, units: 2}\n",
         loss="mse",
         metrics="[root_mean_squared_error, r2_score, {type: r2_score, class_aggregation: variance_weighted_average, "
                 "name: r2_var}, msle, logcosh]"),
]


def history_row(path, epoch):
    with open(path) as f:
        return list(csv.DictReader(f))[epoch - 1]


def keras_eval(m, x, y, batch, metrics=None):
    """Keras' evaluate. With `metrics` (Keras metric configs) and a mask_zero input, the metrics are
    Keras' own classes updated batch by batch with the mask as sample_weight: Keras 3.15's compile()
    gives the mask to mean metrics only, so its evaluate counts padded steps in Precision, AUC, ...
    (docs/keras.md), which rnntrain leaves out as it does for every metric."""
    r = {k: float(v) for k, v in m.evaluate(x, y, batch_size=batch, verbose=0, return_dict=True).items()}
    if metrics is None or x.ndim != 2:
        return r
    pred = m.predict(x, batch_size=batch, verbose=0)
    for cfg in metrics:
        metric = keras.metrics.deserialize(cfg) if isinstance(cfg, dict) else keras.metrics.get(cfg)
        if isinstance(cfg, str) and cfg == "accuracy":
            continue  # Keras resolves it by the loss; a mean metric, masked by evaluate itself
        for b in range(0, len(x), batch):
            mask = (x[b:b + batch] != 0).astype("float32")
            metric.update_state(y[b:b + batch], pred[b:b + batch], sample_weight=mask)
        r[metric.name] = float(metric.result())
    return r


def case(s, c):
    name = c["name"]
    d = s.path(name, "x")[:-1]
    np.save(d + "x.npy", c["x"])
    np.save(d + "y.npy", c["y"])
    cfg = d + "config.yaml"
    with open(cfg, "w") as f:
        f.write(f"model:\n  layers:\n{c['layers']}"
                f"data:\n  train: {{format: npy, inputs: {d}x.npy, targets: {d}y.npy}}\n"
                f"train:\n  epochs: 1\n  batch_size: {N}\n  shuffle: false\n  loss: {c['loss']}\n"
                f"  metrics: {c['metrics']}\n  optimizer: {{type: adam, learning_rate: 0.05}}\n"
                f"output: {{dir: {d}run}}\n")
    if s.rnntrain("train", cfg)[0] != 0:
        return
    s.rnntrain("export", cfg, "--weights", d + "run/last.h5", "-o", d + "first.keras")
    first = keras.saving.load_model(d + "first.keras")
    metrics = first.get_compile_config()["metrics"]
    if s.rnntrain("train", "--resume", d + "run", "train.epochs=2")[0] != 0:
        return
    row = history_row(d + "run/history.csv", 2)
    ref = keras_eval(first, c["x"], c["y"], N, metrics)
    names = [k for k in row if k not in ("epoch", "loss", "lr", "learning_rate", "seconds") and not k.startswith("val_")]
    if len(names) < 2:
        s.fail(f"{name}: history.csv has columns {list(row)}")
    for k in names + ["loss"]:
        if k not in ref:
            s.fail(f"{name}: Keras' evaluate reports {sorted(ref)}, not {k}")
            continue
        s.close(f"{name}: epoch 2's training {k} against Keras' evaluate of epoch 1's weights", float(row[k]), ref[k])

    s.rnntrain("export", cfg, "--weights", d + "run/final.h5", "-o", d + "out.keras")
    code, out, _ = s.rnntrain("eval", cfg, "--weights", d + "run/final.h5", "--json")
    if code != 0:
        return
    ev = json.loads(out)
    for f in ["run/final.h5", "out.keras"]:
        m = keras.saving.load_model(d + f)
        for batch in [N, 5]:
            r = keras_eval(m, c["x"], c["y"], batch, metrics)
            for k, v in ev["metrics"].items():
                if k not in r:
                    s.fail(f"{name}: {f}: Keras' evaluate reports {sorted(r)}, not {k}")
                    continue
                s.close(f"{name}: eval's {k} against Keras' evaluate of {f} in batches of {batch}", v, r[k])
    fit = keras.saving.load_model(d + "out.keras").fit(c["x"], c["y"], batch_size=8, epochs=1, verbose=0).history
    for k in ev["metrics"]:
        if not np.isfinite(fit.get(k, [np.nan])[-1]):
            s.fail(f"{name}: Keras' fit from out.keras reports {k} = {fit.get(k)}")


def main():
    s = Suite(sys.argv[1])
    for c in CASES:
        case(s, c)
    s.finish("test_metrics")


main()
