# Keras 2 (tf-keras with TensorFlow CPU) <-> rnntrain, opt-in: tf-keras writes .h5 models and weights
# that rnntrain imports and predicts, and tf-keras loads rnntrain's exports (load_model, load_weights);
# predictions within 1e-5 + 1e-5·|ref|, hard_sigmoid read as Keras 2's 0.2x+0.5. Runs with the Python
# in $RNNTRAIN_TF_KERAS_PYTHON (scripts/setup.sh makes one with RNNTRAIN_TF_KERAS=1: TensorFlow is a
# 2 GB install, kept out of the default CI setup); skips with the reason otherwise.
# Usage: test_tf_keras.py RNNTRAIN_BINARY
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import SKIP, Suite  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
try:
    import numpy as np
    import tf_keras as keras
    from tf_keras import layers as L
except Exception as e:
    other = os.environ.get("RNNTRAIN_TF_KERAS_PYTHON", os.path.expanduser("~/.cache/rnntrain-tf-keras/bin/python"))
    if os.path.exists(other) and not os.environ.get("RNNTRAIN_TF_KERAS_REEXEC"):
        os.environ["RNNTRAIN_TF_KERAS_REEXEC"] = "1"  # once: a venv's python may resolve to this very binary
        os.execv(other, [other, *sys.argv])
    print(f"SKIP: tf-keras is not importable ({type(e).__name__}: {e}); run scripts/setup.sh with RNNTRAIN_TF_KERAS=1 "
          "and set RNNTRAIN_TF_KERAS_PYTHON to that Python")
    sys.exit(SKIP)

print(f"tf-keras {keras.__version__}, numpy {np.__version__}")
rng = np.random.default_rng(0)
X = rng.standard_normal((4, 6, 3)).astype("float32")
X[0, 4:] = 0
X[2, 1] = 0
XT = rng.integers(1, 10, (4, 6)).astype("int32")
XT[0, 3:] = 0


def models():
    seq = lambda i, *ls: keras.Sequential([i, *ls])  # noqa: E731
    I = lambda: keras.Input((6, 3))  # noqa: E731
    return {
        "lstm_seq_dense": (seq(I(), L.LSTM(4, return_sequences=True), L.Dense(2)), X),
        "lstm_hard_sigmoid": (seq(I(), L.LSTM(4, recurrent_activation="hard_sigmoid")), X),
        "gru_reset_after": (seq(I(), L.GRU(4)), X),
        "gru_reset_before_td": (seq(I(), L.GRU(4, reset_after=False, return_sequences=True), L.TimeDistributed(L.Dense(2))), X),
        "masking_bidir_lstm_ave": (seq(I(), L.Masking(0.0), L.Bidirectional(L.LSTM(3, return_sequences=True), merge_mode="ave")), X),
        "embedding_mask_bidir_gru_sum": (seq(keras.Input((6,), dtype="int32"), L.Embedding(10, 3, mask_zero=True),
                                             L.Bidirectional(L.GRU(3), merge_mode="sum"), L.Dense(1)), XT),
        "simplernn_relu_backwards": (seq(I(), L.SimpleRNN(3, activation="relu", go_backwards=True), L.Dropout(0.2),
                                         L.Dense(2, activation="softmax")), X),
    }


def main():
    s = Suite(sys.argv[1])
    for name, (m, x) in models().items():
        m.set_weights([(rng.standard_normal(w.shape) * 0.4).astype("float32") for w in m.get_weights()])
        m.compile(optimizer="adam", loss="mse")
        ref = m.predict(x, verbose=0)
        p = s.path(name, "m")
        np.save(p + "_x.npy", x)
        m.save(p + ".h5")
        m.save_weights(p + "_w.h5")
        if s.rnntrain("import", p + ".h5", "-o", p + ".yaml")[0] != 0:
            continue
        for what, w in [("tf-keras model.save .h5 -> import", p + "_weights.h5"), ("tf-keras save_weights .h5 -> --weights", p + "_w.h5")]:
            if s.rnntrain("predict", p + ".yaml", "--weights", w, "--data", p + "_x.npy", "-o", p + "_p.npy")[0] == 0:
                s.close(f"{name}: {what}", np.load(p + "_p.npy"), ref)
        if s.rnntrain("export", p + ".yaml", "--weights", p + "_weights.h5", "-o", p + "_exp.h5")[0] == 0:
            s.close(f"{name}: rnntrain export -> tf-keras load_model", keras.models.load_model(p + "_exp.h5").predict(x, verbose=0), ref)
            k = keras.models.clone_model(m)
            k.load_weights(p + "_exp.h5")
            s.close(f"{name}: rnntrain export -> tf-keras load_weights", k.predict(x, verbose=0), ref)
    s.finish("tf-keras")


if __name__ == "__main__":
    main()
