# Keras -> rnntrain resume: Keras trains a few steps with each optimizer (Adam, SGD with momentum, Lion, Adamax,
# Adadelta, Nadam, Ftrl, Lamb, ScheduleFreeAdamW, Muon), saves a legacy
# .h5 checkpoint with its optimizer state, and takes one more step. rnntrain imports the checkpoint,
# resumes from it (`train --resume`: at epoch 4, as Keras' initial_epoch would) for its one step, and
# its weights must match Keras' within
# 1e-5 + 1e-4·|ref| (one optimizer step of float32 gradients computed in a different order).
# Usage: test_resume.py RNNTRAIN_BINARY
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import Suite, import_keras, legacy_weights, seeded_weights  # noqa: E402

keras, np, h5py = import_keras()
from keras import layers as L  # noqa: E402

N, T, F = 8, 6, 3
rng = np.random.default_rng(3)
X = rng.standard_normal((N, T, F)).astype("float32")
X[1, 4:] = 0.0
Y = rng.standard_normal((N, 2)).astype("float32")


def case(s, name, optimizer, layers):
    d = s.path(name, "x")[:-1]
    np.save(d + "x.npy", X)
    np.save(d + "y.npy", Y)
    model = keras.Sequential([keras.Input((T, F)), *layers])
    seeded_weights(model, 21, scale=0.3)
    model.compile(optimizer=optimizer, loss="mse")
    model.fit(X, Y, batch_size=N, epochs=3, shuffle=False, verbose=0)  # 3 steps of optimizer state
    model.save(d + "ckpt.h5")
    model.fit(X, Y, batch_size=N, epochs=1, shuffle=False, verbose=0)  # the step rnntrain must reproduce
    ref = model.get_weights()

    run = d + "run/"
    os.makedirs(run, exist_ok=True)
    if s.rnntrain("import", d + "ckpt.h5", "-o", run + "config.yaml")[0] != 0:
        return
    shutil.copy(d + "ckpt.h5", run + "last.h5")
    code, _, _ = s.rnntrain("train", "--resume", run, f"data.train={{format: npy, inputs: {d}x.npy, targets: {d}y.npy}}",
                            "train.epochs=4", f"train.batch_size={N}", "train.shuffle=false")
    if code != 0:
        return
    got = legacy_weights(run + "final.h5")
    if len(got) != len(ref):
        s.fail(f"{name}: {len(got)} weights after resume, Keras has {len(ref)}")
    before = legacy_weights(d + "ckpt.h5")
    for i, (g, r, b) in enumerate(zip(got, ref, before)):
        s.close(f"{name}: weight {i} after one resumed step", g, r, atol=1e-5, rtol=1e-4)
        if np.array_equal(g, b):
            s.fail(f"{name}: weight {i} did not change in the resumed step")
    # The check can fail: from the same weights, a step with a fresh optimizer lands far from Keras'.
    fresh = keras.models.clone_model(model)
    fresh.set_weights(before)
    fresh.compile(optimizer=optimizer.__class__.from_config(optimizer.get_config()), loss="mse")
    fresh.fit(X, Y, batch_size=N, epochs=1, shuffle=False, verbose=0)
    gap = max(float(np.abs(a - b).max()) for a, b in zip(fresh.get_weights(), ref))
    print(f"{name}: a fresh optimizer's step would differ from Keras' by up to {gap:.3g}")
    if gap < 1e-4:
        s.fail(f"{name}: the test cannot tell restored optimizer state from a fresh one (gap {gap:.3g})")
    with h5py.File(run + "final.h5", "r") as f:
        it, epoch = int(f["rnntrain"].attrs["iterations"]), int(f["rnntrain"].attrs["epoch"])
    if it != 4:
        s.fail(f"{name}: rnntrain's optimizer is at step {it} after resuming from step 3, expected 4")
    if epoch != 4:  # 3 epochs of one step in Keras, then one more: Keras' fit(initial_epoch=3, epochs=4)
        s.fail(f"{name}: rnntrain's run ends at epoch {epoch}, expected 4 (Keras' 3 epochs and one more)")


def main():
    s = Suite(sys.argv[1])
    case(s, "adam", keras.optimizers.Adam(learning_rate=0.01),
         [L.LSTM(4, return_sequences=True), L.Bidirectional(L.GRU(3)), L.Dense(2)])
    case(s, "adam_amsgrad", keras.optimizers.Adam(learning_rate=0.005, amsgrad=True),
         [L.Masking(0.0), L.SimpleRNN(4), L.Dense(2)])
    case(s, "sgd_momentum", keras.optimizers.SGD(learning_rate=0.05, momentum=0.9),
         [L.GRU(4, reset_after=False), L.Dense(2)])
    case(s, "lion", keras.optimizers.Lion(learning_rate=0.003, beta_2=0.9), [L.LSTM(4), L.Dense(2)])
    case(s, "adamax", keras.optimizers.Adamax(learning_rate=0.01, beta_2=0.99), [L.GRU(4), L.Dense(2)])
    case(s, "adadelta", keras.optimizers.Adadelta(learning_rate=1.0, rho=0.9, epsilon=1e-3),
         [L.LSTM(4), L.Dense(2)])
    case(s, "nadam", keras.optimizers.Nadam(learning_rate=0.01, beta_2=0.99), [L.GRU(4), L.Dense(2)])
    case(s, "ftrl", keras.optimizers.Ftrl(learning_rate=0.05, l1_regularization_strength=0.001,
                                          l2_regularization_strength=0.01, l2_shrinkage_regularization_strength=0.01,
                                          beta=0.1, learning_rate_power=-0.6, initial_accumulator_value=0.2),
         [L.LSTM(4), L.Dense(2)])
    case(s, "lamb", keras.optimizers.Lamb(learning_rate=0.01, beta_2=0.99),
         [L.LSTM(4, return_sequences=True), L.GRU(3), L.Dense(2)])
    # Step 4 of a 5-step warmup: the rate is 0.8 of the configured one.
    case(s, "schedule_free_adamw", keras.optimizers.ScheduleFreeAdamW(learning_rate=0.01, warmup_steps=5),
         [L.Masking(0.0), L.GRU(4), L.Dense(2)])
    # Muon on the GRU's kernels and its [2, 3H] bias, AdamW on the Dense bias.
    case(s, "muon", keras.optimizers.Muon(learning_rate=0.02, momentum=0.9, nesterov=False, weight_decay=0.01),
         [L.GRU(4), L.Dense(2)])
    # Not Adafactor: Keras 3.15 cannot save it to .h5 (the unused r and c of a 1-D weight are both named
    # after the weight: "name already exists"); test_compiled.py checks its steps against Keras'.
    s.finish("keras resume")


if __name__ == "__main__":
    main()
