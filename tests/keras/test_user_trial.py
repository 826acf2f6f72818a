# Issue 31: what a Keras user tripped over, checked against real Keras.
# 1. Mode "auto" with a higher-is-better metric: rnntrain's best.h5 and the weights restored into
#    final.h5 (restore_best_weights) are those Keras' own ModelCheckpoint and EarlyStopping pick from
#    the same val_auc history (Keras 3 maximises an AUC; rnntrain used to minimise it).
# 2. A .keras export compiles as Keras' own saves do: jit_compile "auto", which Keras on JAX
#    resolves to XLA (the user's exports ran uncompiled, 7x slower).
# 3. A model trained on CSV data: the export's NAME.scaling.json, applied as docs/keras.md says,
#    makes Keras' predictions on the raw CSV windows rnntrain's forecasts in the data's units.
# 4. bfloat16 and float16 Keras models import: their weights are read as float32, and rnntrain's
#    predictions equal Keras' float32 model with the same (rounded) weights.
# 5. Keras' regression metrics (RootMeanSquaredError, R2Score, MSLE, LogCoshError) import by class,
#    and rnntrain's eval of the imported model reports Keras' numbers.
# Usage: test_user_trial.py RNNTRAIN_BINARY
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import Suite, import_keras  # noqa: E402

keras, np, h5py = import_keras()
rng = np.random.default_rng(31)


def best_epoch_for_a_rising_metric(s):
    d = s.path("auc", "x")[:-1]
    n, nv, T = 96, 48, 8
    x = rng.standard_normal((n + nv, T, 2)).astype("float32")
    y = (x[:, :, 0].sum(axis=1) + 0.8 * rng.standard_normal(n + nv) > 0).astype("float32")[:, None]
    for name, a in [("x", x[:n]), ("y", y[:n]), ("xv", x[n:]), ("yv", y[n:])]:
        np.save(d + name + ".npy", a)
    cfg = d + "config.yaml"
    with open(cfg, "w") as f:
        f.write("model:\n  layers:\n    - {type: Input, shape: [8, 2]}\n    - {type: LSTM, units: 6}\n"
                "    - {type: Dense, units: 1, activation: sigmoid}\n"
                f"data:\n  train: {{format: npy, inputs: {d}x.npy, targets: {d}y.npy}}\n"
                f"  validation: {{format: npy, inputs: {d}xv.npy, targets: {d}yv.npy}}\n"
                "train:\n  epochs: 8\n  batch_size: 16\n  loss: binary_crossentropy\n  metrics: [auc]\n"
                "  optimizer: {type: adam, learning_rate: 0.01}\n"
                "  early_stopping: {monitor: val_auc, patience: 100, restore_best_weights: true}\n"
                "  checkpoint: {monitor: val_auc}\n"
                f"output: {{dir: {d}run}}\n")
    if s.rnntrain("train", cfg)[0] != 0:
        return
    log = open(d + "run/train.log").read()
    if "best.h5 by val_auc (higher is better)" not in log:
        s.fail("train.log does not say that a higher val_auc is better:\n" + log[-2000:])
    with open(d + "run/history.csv") as f:
        vals = [float(r["val_auc"]) for r in csv.DictReader(f)]
    if len(set(vals)) < 2:
        s.fail(f"val_auc never changed ({vals}): the case cannot tell max from min")
        return
    xv, yv = np.load(d + "xv.npy"), np.load(d + "yv.npy")
    model = keras.saving.load_model(d + "run/final.h5")
    model.evaluate(xv, yv, verbose=0)  # builds the compiled metrics, which Keras' callbacks read
    early = keras.callbacks.EarlyStopping(monitor="val_auc", patience=100, restore_best_weights=True)
    best = keras.callbacks.ModelCheckpoint(d + "keras_best.keras", monitor="val_auc", save_best_only=True)
    for cb in (early, best):
        cb.set_model(model)
        cb.on_train_begin()
    for e, v in enumerate(vals):
        for cb in (early, best):
            cb.on_epoch_end(e, {"val_auc": v})
    print(f"val_auc by epoch {vals}: Keras' EarlyStopping keeps epoch {early.best_epoch + 1} ({early.best}), "
          f"ModelCheckpoint {best.best}")
    s.close("Keras' EarlyStopping's best val_auc is the history's maximum", early.best, max(vals), atol=1e-6, rtol=0)
    for f, want in [("best.h5", best.best), ("final.h5", early.best)]:
        m = keras.saving.load_model(d + "run/" + f)
        got = m.evaluate(xv, yv, verbose=0, return_dict=True)["auc"]
        s.close(f"Keras' evaluate of rnntrain's {f}: the val_auc of the epoch Keras' callbacks pick", got, want,
                atol=1e-5, rtol=0)


def exports_compile_with_xla(s):
    d = s.path("jit", "x")[:-1]
    cfg = d + "config.yaml"
    with open(cfg, "w") as f:
        f.write("model:\n  layers:\n    - {type: Input, shape: [10, 2]}\n    - {type: GRU, units: 8}\n"
                "    - {type: Dense, units: 1}\n"
                "data:\n  train: {format: synthetic, task: adding, samples: 64, timesteps: 10, seed: 1}\n"
                f"train: {{epochs: 1, batch_size: 16, loss: mse, metrics: [mae]}}\noutput: {{dir: {d}run}}\n")
    if s.rnntrain("train", cfg)[0] != 0 or s.rnntrain("export", d + "run", "-o", d + "m.keras")[0] != 0:
        return
    import zipfile
    with zipfile.ZipFile(d + "m.keras") as z:
        written = json.loads(z.read("config.json"))["compile_config"]["jit_compile"]
    s.equal("compile_config jit_compile as model.compile() defaults it", np.array(str(written)), np.array("auto"))
    m = keras.saving.load_model(d + "m.keras")
    s.equal(f"jit_compile of the loaded export on {keras.backend.backend()}", np.array(bool(m.jit_compile)),
            np.array(keras.backend.backend() == "jax"))


def csv_scaling_travels_with_the_export(s):
    d = s.path("csv", "x")[:-1]
    R, W, H = 120, 6, 2
    t = np.arange(R)
    a = 50.0 + 10.0 * np.sin(0.2 * t) + rng.standard_normal(R)
    b = 3.0 + 0.5 * np.cos(0.15 * t) + 0.05 * rng.standard_normal(R)
    with open(d + "series.csv", "w") as f:
        f.write("step,a,b\n" + "".join(f"{i},{a[i]:.6f},{b[i]:.6f}\n" for i in range(R)))
    cfg = d + "config.yaml"
    with open(cfg, "w") as f:
        f.write(f"model:\n  layers:\n    - {{type: Input, shape: [{W}, 2]}}\n    - {{type: LSTM, units: 8}}\n"
                f"    - {{type: Dense, units: {H}}}\n"
                f"data:\n  train: {{format: csv, path: {d}series.csv, features: [a, b], targets: [b], window: {W}, "
                f"horizon: {H}, scaling: standard}}\n"
                f"train: {{epochs: 2, batch_size: 16, loss: mse}}\noutput: {{dir: {d}run}}\n")
    if s.rnntrain("train", cfg)[0] != 0:
        return
    if s.rnntrain("predict", d + "run", "-o", d + "p.npy")[0] != 0:  # forecasts in the data's units
        return
    if s.rnntrain("export", d + "run", "-o", d + "m.keras")[0] != 0:
        return
    with open(d + "m.scaling.json") as f:
        recipe = json.load(f)
    s.equal("the recipe names the columns", np.array([c["column"] for c in recipe["features"] + recipe["targets"]]),
            np.array(["a", "b", "b"]))
    # docs/keras.md's recipe, on the raw CSV values.
    raw = np.array([[float(r["a"]), float(r["b"])] for r in csv.DictReader(open(d + "series.csv"))])
    shift = np.array([c["shift"] for c in recipe["features"]])
    scale = np.array([c["scale"] for c in recipe["features"]])
    windows = np.stack([raw[i:i + recipe["window"]] for i in range(R - recipe["window"] + 1)])
    pred = keras.saving.load_model(d + "m.keras").predict(((windows - shift) / scale).astype("float32"), verbose=0)
    ts = np.array([c["shift"] for c in recipe["targets"]])
    tsc = np.array([c["scale"] for c in recipe["targets"]])
    k = np.arange(pred.shape[1]) % len(recipe["targets"])  # output k: step k // targets, column k % targets
    s.close("Keras' forecasts through the exported scaling against rnntrain predict's, in the data's units",
            pred * tsc[k] + ts[k], np.load(d + "p.npy"), atol=1e-4, rtol=1e-5)


def low_precision_models_import(s):
    d = s.path("bf16", "x")[:-1]
    m = keras.Sequential([keras.Input((5, 3)),
                          keras.layers.LSTM(4, dtype="bfloat16", recurrent_initializer="glorot_uniform",
                                            return_sequences=True),
                          keras.layers.GRU(3, dtype="float16", recurrent_initializer="glorot_uniform"),
                          keras.layers.Dense(2)])
    m.compile(loss="mse", optimizer="adam")
    x = rng.standard_normal((7, 5, 3)).astype("float32")
    np.save(d + "x.npy", x)
    f32 = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4, return_sequences=True), keras.layers.GRU(3),
                            keras.layers.Dense(2)])
    f32.set_weights([np.asarray(w).astype("float32") for w in m.get_weights()])
    ref = f32.predict(x, verbose=0)
    for f in ["m.keras", "m.h5"]:
        m.save(d + f)
        code, _, err = s.rnntrain("import", d + f, "-o", d + f + ".yaml")
        if code != 0:
            continue
        if "converted to float32" not in err:
            s.fail(f"import of {f} does not say that bfloat16 weights are converted:\n{err[-1500:]}")
        base = d + f + ".yaml"
        if s.rnntrain("predict", base, "--weights", d + f + "_weights.h5", "--data", d + "x.npy", "-o",
                      d + f + ".npy")[0] == 0:
            s.close(f"rnntrain's predictions of the imported {f} (bfloat16 LSTM, float16 GRU) against Keras' float32 "
                    "model with the same weights", np.load(d + f + ".npy"), ref, atol=1e-5, rtol=1e-5)


def regression_metrics_import(s):
    """Keras' RootMeanSquaredError, R2Score, MeanSquaredLogarithmicError and LogCoshError come in with
    `rnntrain import`, settings and names kept, and eval reports what Keras' evaluate does."""
    d = s.path("regimport", "x")[:-1]
    m = keras.Sequential([keras.Input((6, 2)), keras.layers.GRU(4), keras.layers.Dense(2)])
    m.compile(loss="mse", optimizer="adam",
              metrics=[keras.metrics.RootMeanSquaredError(), keras.metrics.R2Score(class_aggregation="variance_weighted_average", name="r2v"),
                       keras.metrics.MeanSquaredLogarithmicError(name="msle"), keras.metrics.LogCoshError()])
    x = rng.standard_normal((20, 6, 2)).astype("float32")
    y = np.abs(rng.standard_normal((20, 2))).astype("float32")
    m.fit(x, y, epochs=1, batch_size=20, verbose=0)
    m.save(d + "m.keras")
    np.save(d + "x.npy", x)
    np.save(d + "y.npy", y)
    if s.rnntrain("import", d + "m.keras", "-o", d + "m.yaml")[0] != 0:
        return
    code, out, _ = s.rnntrain("eval", d + "m.yaml", "--data", d + "x.npy", "--targets", d + "y.npy", "--json")
    if code != 0:
        return
    got = json.loads(out)["metrics"]
    ref = m.evaluate(x, y, batch_size=20, verbose=0, return_dict=True)
    for k in ["root_mean_squared_error", "r2v", "msle", "logcosh"]:
        if k not in got:
            s.fail(f"import of Keras' regression metrics: eval reports {sorted(got)}, not {k}")
            continue
        s.close(f"imported metric {k} against Keras' evaluate", got[k], ref[k], atol=1e-5, rtol=1e-5)


def main():
    s = Suite(sys.argv[1])
    regression_metrics_import(s)
    best_epoch_for_a_rising_metric(s)
    exports_compile_with_xla(s)
    csv_scaling_travels_with_the_export(s)
    low_precision_models_import(s)
    s.finish("test_user_trial")


main()
