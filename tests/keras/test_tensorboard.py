# Issue 18 item 1: TensorBoard event files in the run directory, read with TensorBoard's own reader
# (EventAccumulator from PyPI tensorboard). A run of 3 epochs with validation and `output.tensorboard:
# 2`: tensorboard/train holds epoch_loss, epoch_accuracy, epoch_learning_rate at steps 0, 1, 2 equal to
# history.csv's loss, accuracy, learning_rate (float32), and batch_loss, batch_accuracy,
# batch_learning_rate, batch_step_ms every 2 steps; tensorboard/validation holds epoch_loss and
# epoch_accuracy equal to val_loss and val_accuracy. A resumed epoch adds its step in a new file (a
# resume with nothing to do adds none); a
# run replaced with --overwrite starts with no old events; `tensorboard: off` writes none.
# Usage: test_tensorboard.py RNNTRAIN_BINARY
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import SKIP, Suite  # noqa: E402

try:
    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except Exception as e:  # ImportError
    print(f"SKIP: tensorboard is not importable ({type(e).__name__}: {e}); run scripts/setup.sh to install it")
    sys.exit(SKIP)


def scalars(d):
    """{tag: [(step, value), ...]} of every event file in d, as TensorBoard reads them."""
    ea = EventAccumulator(d, size_guidance={"scalars": 0})
    ea.Reload()
    return {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in ea.Tags()["scalars"]}


def history(run):
    with open(os.path.join(run, "history.csv")) as f:
        return list(csv.DictReader(f))


def main():
    s = Suite(sys.argv[1], atol=0, rtol=1e-6)  # float32 event values against history.csv's doubles
    rng = np.random.default_rng(7)
    d = s.path("tb", "x")[:-1]
    np.save(d + "x.npy", rng.standard_normal((64, 6, 3)).astype("float32"))
    np.save(d + "y.npy", rng.integers(0, 3, 64).astype("int32"))
    cfg = d + "config.yaml"
    with open(cfg, "w") as f:
        f.write("model:\n  layers:\n    - {type: Input, shape: [6, 3]}\n    - {type: LSTM, units: 5}\n"
                "    - {type: Dense, units: 3, activation: softmax}\n"
                f"data:\n  train: {{format: npy, inputs: {d}x.npy, targets: {d}y.npy}}\n  validation_split: 0.25\n"
                "train:\n  epochs: 3\n  batch_size: 16\n  loss: sparse_categorical_crossentropy\n"
                "  metrics: [accuracy]\n  optimizer: {type: adam, learning_rate: 0.01}\n"
                "  schedule: {type: step, step_size: 1, gamma: 0.5}\n"
                f"output: {{dir: {d}run, tensorboard: 2}}\n")
    run = d + "run"
    if s.rnntrain("train", cfg)[0] != 0:
        s.finish("tensorboard")
        return
    train, val = scalars(os.path.join(run, "tensorboard", "train")), scalars(os.path.join(run, "tensorboard", "validation"))
    rows = history(run)

    def epochs_match(tb, tag, column, n):
        got = tb.get(tag, [])
        if [step for step, _ in got] != list(range(n)):
            s.fail(f"{tag}: steps {[step for step, _ in got]}, expected 0..{n - 1} (one per epoch)")
            return
        s.close(tag, np.array([v for _, v in got]), np.array([float(r[column]) for r in rows[:n]]))

    for tag, column in [("epoch_loss", "loss"), ("epoch_accuracy", "accuracy"), ("epoch_learning_rate", "learning_rate")]:
        epochs_match(train, tag, column, 3)
    for tag, column in [("epoch_loss", "val_loss"), ("epoch_accuracy", "val_accuracy")]:
        epochs_match(val, tag, column, 3)
    if sorted(v for _, v in train.get("epoch_learning_rate", [])) == [0.01] * 3:
        s.fail("the learning rate did not change: the step schedule should halve it each epoch")
    if "epoch_seconds" not in train:
        s.fail(f"no epoch_seconds in {sorted(train)}")
    # 48 training samples, batches of 16: 3 steps an epoch, 9 in all; logged at steps 2, 4, 6, 8.
    for tag in ["batch_loss", "batch_accuracy", "batch_learning_rate", "batch_step_ms"]:
        steps = [step for step, _ in train.get(tag, [])]
        if steps != [2, 4, 6, 8]:
            s.fail(f"{tag}: steps {steps}, expected [2, 4, 6, 8] (every 2 steps)")
    if any(v <= 0 for _, v in train.get("batch_step_ms", [])):
        s.fail(f"batch_step_ms not positive: {train.get('batch_step_ms')}")
    if set(val) != {"epoch_loss", "epoch_accuracy"}:
        s.fail(f"validation tags {sorted(val)}, expected epoch_loss and epoch_accuracy")
    s.checks += 1

    # Resume for a 4th epoch: its step joins the curves (a new event file beside the first).
    if s.rnntrain("train", "--resume", run, "train.epochs=4")[0] == 0:
        train, rows = scalars(os.path.join(run, "tensorboard", "train")), history(run)
        epochs_match(train, "epoch_loss", "loss", 4)
        if len(os.listdir(os.path.join(run, "tensorboard", "train"))) != 2:
            s.fail(f"after a resume: {os.listdir(os.path.join(run, 'tensorboard', 'train'))}, expected two event files")
        # A resume with nothing to do writes no event file.
        if s.rnntrain("train", "--resume", run)[0] == 0 and len(os.listdir(os.path.join(run, "tensorboard", "train"))) != 2:
            s.fail(f"a resume with nothing to do added an event file: {os.listdir(os.path.join(run, 'tensorboard', 'train'))}")
    # --overwrite replaces the earlier run's events; tensorboard: off writes none.
    if s.rnntrain("train", cfg, "train.epochs=1", "--overwrite")[0] == 0:
        train, rows = scalars(os.path.join(run, "tensorboard", "train")), history(run)
        epochs_match(train, "epoch_loss", "loss", 1)
    off = d + "off"
    if s.rnntrain("train", cfg, "train.epochs=1", f"output.dir={off}", "output.tensorboard=off")[0] == 0:
        if os.path.exists(os.path.join(off, "tensorboard")):
            s.fail("output.tensorboard: off wrote event files")
    s.finish("tensorboard")


if __name__ == "__main__":
    main()
