# Generates tests/backend_keras_golden/*.txt: outputs and gradients of small Keras models, the
# reference the CPU backend is checked against (tests/backend_keras_test.cpp builds the same models).
# Run once with Keras 3 (JAX backend, CPU):  KERAS_BACKEND=jax python3 gen.py   (from this folder)
# Each file: one line per array, "name d0 d1 ... : v0 v1 ...", float32 values printed exactly.
# x, y (the output), w (the loss weights: loss = sum(w * y)), p<k> (weights in Keras order),
# g<k> (d loss / d p<k>), dx (d loss / d x; not for token ids).
import os
os.environ.setdefault("KERAS_BACKEND", "jax")
import numpy as np, jax, jax.numpy as jnp, keras
from keras import layers as L

B, T, I, H = 2, 5, 3, 4
rng = np.random.default_rng(0)

def holes(x):
    x = x.copy(); x[0, 2, :] = 0; x[1, 0, :] = 0; x[1, 4, :] = 0; return x

def cases():
    c = {}
    c["lstm_seq"] = ([L.LSTM(H, return_sequences=True)], False)
    c["lstm_last_hardsig"] = ([L.LSTM(H, recurrent_activation="hard_sigmoid")], False)
    c["gru_after_seq"] = ([L.GRU(H, return_sequences=True)], False)
    c["gru_before_seq"] = ([L.GRU(H, return_sequences=True, reset_after=False)], False)
    c["gru_nobias_last"] = ([L.GRU(H, use_bias=False, recurrent_activation="hard_sigmoid")], False)
    c["simplernn_relu_seq"] = ([L.SimpleRNN(H, activation="relu", return_sequences=True)], False)
    c["lstm_backwards_seq"] = ([L.LSTM(H, return_sequences=True, go_backwards=True)], False)
    c["gru_backwards_last_masked"] = ([L.Masking(0.0), L.GRU(H, go_backwards=True)], True)
    c["lstm_masked_seq"] = ([L.Masking(0.0), L.LSTM(H, return_sequences=True)], True)
    c["simplernn_masked_last"] = ([L.Masking(0.0), L.SimpleRNN(H)], True)
    for mode in ["concat", "sum", "mul", "ave"]:
        c["bidir_gru_%s_seq_masked" % mode] = ([L.Masking(0.0), L.Bidirectional(L.GRU(H, return_sequences=True), merge_mode=mode)], True)
        c["bidir_lstm_%s_last_masked" % mode] = ([L.Masking(0.0), L.Bidirectional(L.LSTM(H), merge_mode=mode)], True)
    c["stack_softmax"] = ([L.LSTM(H, return_sequences=True), L.GRU(H), L.Dense(3, activation="softmax")], False)
    c["td_sigmoid_masked"] = ([L.Masking(0.0), L.SimpleRNN(H, return_sequences=True), L.TimeDistributed(L.Dense(3, activation="sigmoid"))], True)
    c["dense_seq_tanh"] = ([L.Dense(3, activation="tanh")], False)
    c["embedding_lstm_seq"] = ("emb", True)
    # Dense with the activations whose derivative needs the pre-activation (issue 36); gelu_approximate
    # has no name in a Keras config, so the function itself.
    acts = {"gelu": "gelu", "gelu_approximate": lambda v: keras.activations.gelu(v, approximate=True),
            "elu": "elu", "selu": "selu", "softplus": "softplus", "softsign": "softsign", "silu": "silu"}
    for n, a in acts.items():
        c["dense_act_" + n] = ([L.GRU(H, return_sequences=True), L.Dense(3, activation=a)], False)
    # The layers around the recurrent stacks (issue 36).
    c["conv1d_same_gelu"] = ([L.Conv1D(4, 3, padding="same", activation="gelu"), L.GRU(H, return_sequences=True)], False)
    c["conv1d_causal_dilated"] = ([L.Conv1D(3, 2, padding="causal", dilation_rate=2), L.LSTM(H)], False)
    c["conv1d_valid_strided_nobias"] = ([L.Conv1D(4, 2, strides=2, use_bias=False), L.LSTM(H, return_sequences=True)], False)
    c["maxpool_same"] = ([L.LSTM(H, return_sequences=True), L.MaxPooling1D(2, padding="same")], False)
    c["avgpool_same_strides1"] = ([L.LSTM(H, return_sequences=True), L.AveragePooling1D(3, strides=1, padding="same")], False)
    c["avgpool_valid"] = ([L.GRU(H, return_sequences=True), L.AveragePooling1D(2)], False)
    c["gap_masked"] = ([L.Masking(0.0), L.LSTM(H, return_sequences=True), L.GlobalAveragePooling1D(), L.Dense(2)], True)
    c["gmp_keepdims"] = ([L.GRU(H, return_sequences=True), L.GlobalMaxPooling1D(keepdims=True)], False)
    c["layernorm_seq"] = ([L.LSTM(H, return_sequences=True), L.LayerNormalization(), L.GRU(H)], False)
    c["layernorm_noscale_masked"] = ([L.Masking(0.0), L.GRU(H, return_sequences=True), L.LayerNormalization(scale=False, epsilon=0.01),
                                      L.LSTM(H, return_sequences=True)], True)
    c["flatten_softmax"] = ([L.Conv1D(2, 2), L.Flatten(), L.Dense(3, activation="softmax")], False)
    c["activation_selu_masked"] = ([L.Masking(0.0), L.GRU(H, return_sequences=True), L.Activation("selu"), L.SimpleRNN(H)], True)
    # 'same' with strides: the odd padded zero goes on the right (T = 5, kernel 4, strides 2: 1 left, 2 right).
    c["conv1d_same_strided_even"] = ([L.Conv1D(3, 4, strides=2, padding="same"), L.MaxPooling1D(3, strides=2, padding="same")], False)
    c["avgpool_same_strided"] = ([L.LSTM(H, return_sequences=True), L.AveragePooling1D(2, padding="same")], False)
    return c

def line(name, a):
    a = np.asarray(a, dtype=np.float32)
    dims = " ".join(str(s) for s in a.shape)
    return "%s %s : %s" % (name, dims, " ".join("%.9g" % v for v in a.ravel()))

for name, (ls, masked) in cases().items():
    if ls == "emb":
        inp = keras.Input((T,)); ls = [L.Embedding(7, 3, mask_zero=True), L.LSTM(H, return_sequences=True)]
        x = np.array([[0, 3, 6, 0, 2], [2, 2, 5, 1, 0]], dtype=np.float32)
    else:
        inp = keras.Input((T, I))
        x = rng.uniform(-1, 1, (B, T, I)).astype(np.float32)
        if masked: x = holes(x)
    model = keras.Sequential([inp] + ls)
    ws = [rng.uniform(-0.6, 0.6, w.shape).astype(np.float32) for w in model.get_weights()]
    model.set_weights(ws)
    y = np.asarray(model(x, training=False))
    wt = rng.uniform(-1, 1, y.shape).astype(np.float32)
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
    def loss(tv, xx):
        out, _ = model.stateless_call(tv, ntv, xx, training=False)
        return jnp.sum(out * wt)
    if name == "embedding_lstm_seq":
        g = jax.grad(loss)(tv, jnp.asarray(x.astype(np.int32)))
        gx = None
    else:
        g, gx = jax.grad(loss, argnums=(0, 1))(tv, jnp.asarray(x))
    out = ["# keras %s backend %s" % (keras.__version__, keras.backend.backend()), line("x", x), line("y", y), line("w", wt)]
    out += [line("p%d" % k, w) for k, w in enumerate(ws)]
    out += [line("g%d" % k, gg) for k, gg in enumerate(g)]
    if gx is not None:
        out.append(line("dx", gx))
    with open(name + ".txt", "w") as f:
        f.write("\n".join(out) + "\n")
    print(name, y.shape, [w.shape for w in ws])
