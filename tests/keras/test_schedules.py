# Issue 17 item 4: Keras' learning-rate schedules move both ways. For each schedule Keras has
# (ExponentialDecay, CosineDecay with and without warmup, PolynomialDecay held and cycling,
# InverseTimeDecay, PiecewiseConstantDecay, CosineDecayRestarts) a Keras model compiled with it is
# saved as .keras and imported; rnntrain trains 12 epochs of one step, and the learning rate of each
# step (history.json) must be Keras' schedule at that step within 1e-6·|ref|. Then rnntrain exports
# the run as .keras and .h5: Keras loads the same schedule class, whose rates over 40 steps equal the
# original's. Usage: test_schedules.py RNNTRAIN_BINARY
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import Suite, import_keras  # noqa: E402

keras, np, h5py = import_keras()
from keras import layers as L  # noqa: E402

S = keras.optimizers.schedules
N, T, F, STEPS = 8, 5, 2, 12
rng = np.random.default_rng(7)
X = rng.standard_normal((N, T, F)).astype("float32")
Y = rng.standard_normal((N, 1)).astype("float32")

SCHEDULES = {
    "exponential": S.ExponentialDecay(0.05, decay_steps=4, decay_rate=0.6),
    "exponential_staircase": S.ExponentialDecay(0.05, decay_steps=4, decay_rate=0.6, staircase=True),
    "cosine": S.CosineDecay(0.05, decay_steps=9, alpha=0.1),
    "cosine_warmup": S.CosineDecay(0.0, decay_steps=6, alpha=0.2, warmup_target=0.04, warmup_steps=3),
    "polynomial": S.PolynomialDecay(0.05, decay_steps=7, end_learning_rate=0.001, power=2.0),
    "polynomial_cycle": S.PolynomialDecay(0.05, decay_steps=5, end_learning_rate=0.001, power=0.5, cycle=True),
    "inverse_time": S.InverseTimeDecay(0.05, decay_steps=3, decay_rate=0.5),
    "inverse_time_staircase": S.InverseTimeDecay(0.05, decay_steps=3, decay_rate=0.5, staircase=True),
    "piecewise": S.PiecewiseConstantDecay([2, 6], [0.05, 0.02, 0.005]),
    "cosine_restarts": S.CosineDecayRestarts(0.05, first_decay_steps=3, t_mul=2.0, m_mul=0.7, alpha=0.05),
    "cosine_restarts_t1": S.CosineDecayRestarts(0.05, first_decay_steps=4, t_mul=1.0, m_mul=0.5),
}


def rates(schedule, n):
    return np.array([float(schedule(i)) for i in range(n)])


def case(s, name, schedule):
    d = s.path(name, "x")[:-1]
    np.save(d + "x.npy", X)
    np.save(d + "y.npy", Y)
    m = keras.Sequential([keras.Input((T, F)), L.GRU(3), L.Dense(1)])
    m.compile(optimizer=keras.optimizers.SGD(schedule), loss="mse")
    m.save(d + "k.keras")
    if s.rnntrain("import", d + "k.keras", "-o", d + "config.yaml")[0] != 0:
        return
    run = d + "run"
    code, _, _ = s.rnntrain("train", d + "config.yaml", f"data.train={{format: npy, inputs: {d}x.npy, targets: {d}y.npy}}",
                            f"train.epochs={STEPS}", f"train.batch_size={N}", "train.shuffle=false", f"output.dir={run}")
    if code != 0:
        return
    with open(run + "/history.json") as f:
        got = np.array(json.load(f)["learning_rate"])
    s.close(f"{name}: rnntrain's learning rate at steps 0..{STEPS - 1}", got, rates(schedule, STEPS), atol=1e-9, rtol=1e-6)

    for suffix in [".keras", ".h5"]:
        out = d + "back" + suffix
        if s.rnntrain("export", d + "config.yaml", "--weights", run + "/final.h5", "-o", out)[0] != 0:
            continue
        back = keras.saving.load_model(out).optimizer._learning_rate
        if type(back) is not type(schedule):
            s.fail(f"{name}: export {suffix} loads in Keras as {type(back).__name__}, not {type(schedule).__name__}")
            continue
        s.close(f"{name}: the schedule exported to {suffix}, in Keras, over 40 steps", rates(back, 40), rates(schedule, 40),
                atol=1e-9, rtol=1e-6)


def main():
    s = Suite(sys.argv[1])
    for name, schedule in SCHEDULES.items():
        case(s, name, schedule)
    s.finish("keras schedules")


if __name__ == "__main__":
    main()
