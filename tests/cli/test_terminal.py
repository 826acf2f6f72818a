# Issue 18 items 4 and 9: the terminal as a person sees it. `rnntrain train` runs under a
# pseudo-terminal: each epoch starts with "Epoch i/N" and ends with Keras' progress line,
# `94/94 ━━━━ 2s 15ms/step - loss: … - mae: … - val_loss: … - val_mae: …`, rewritten in place (\r)
# while the epoch runs; the epoch's log line goes to train.log only. Ctrl-C (SIGINT to the process,
# as the terminal sends it) stops the run with last.h5 saved, says so and prints the command that
# goes on, and exits 130. Without a terminal (pipes) there is no bar and no escape code: one
# `[info] epoch=…` line per epoch.
# Usage: test_terminal.py RNNTRAIN_BINARY
import atexit
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BIN = os.path.abspath(sys.argv[1])
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
failures = []


def check(ok, what, text=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
        print(text[-3000:])


def config(d, epochs, samples):
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "cfg.yaml")
    with open(path, "w") as f:
        f.write("model:\n  layers:\n    - {type: Input, shape: [12, 2]}\n    - {type: LSTM, units: 16}\n"
                "    - {type: Dense, units: 1}\n"
                f"data:\n  train: {{format: synthetic, task: adding, samples: {samples}, timesteps: 12, seed: 3}}\n"
                "  validation: {format: synthetic, task: adding, samples: 64, timesteps: 12, seed: 4}\n"
                f"train: {{epochs: {epochs}, batch_size: 16, metrics: [mae], loss: mse}}\n"
                f"output: {{dir: {d}/run}}\n")
    return path


def run_on_pty(args, stop_when=None, timeout=120):
    """Runs the binary with stdin/stdout/stderr on a pseudo-terminal; sends SIGINT once `stop_when`
    (a string) has appeared. Returns (exit code, everything the terminal received)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([BIN, *args], stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out, sent, end = b"", False, time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        if stop_when and not sent and stop_when.encode() in out:
            p.send_signal(signal.SIGINT)
            sent = True
        if p.poll() is not None and not r:
            break
    if p.poll() is None:
        p.kill()
    code = p.wait()
    os.close(master)
    return code, out.decode("utf-8", "replace")


def main():
    d = tempfile.mkdtemp(prefix="rnntrain_tty_")
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    cfg = config(d, 2, 256)
    code, text = run_on_pty(["train", cfg])
    plain = ANSI.sub("", text)
    check(code == 0, f"train on a terminal exits 0 (got {code})", plain)
    check("Epoch 1/2" in plain and "Epoch 2/2" in plain, "each epoch starts with 'Epoch i/N'", plain)
    final = re.compile(r"16/16 ━{20} \d+s \d+(us|ms|s)/step - loss: \d+\.\d{4} - mae: \d+\.\d{4} - "
                       r"val_loss: \d+\.\d{4} - val_mae: \d+\.\d{4}")
    check(len(final.findall(plain)) == 2, "each epoch ends with Keras' progress line, validation included", plain)
    check("\r" in text and "\x1b[32m" in text, "the line is rewritten in place, its bar in colour", repr(text[:400]))
    check("epoch=1/2" not in plain, "the epoch's log line is not repeated on the terminal", plain)
    log = open(os.path.join(d, "run", "train.log")).read()
    check("epoch=1/2" in log and "learning_rate=0.001 " in log, "train.log holds the epoch lines", log)

    cfg = config(d + "/long", 200, 4096)
    code, text = run_on_pty(["train", cfg], stop_when="Epoch 2/200")
    plain = ANSI.sub("", text)
    check(code == 130, f"Ctrl-C exits 130 (got {code})", plain)
    check(f"To go on: rnntrain train --resume {d}/long/run" in plain, "Ctrl-C says how to go on", plain)
    check(os.path.exists(f"{d}/long/run/last.h5"), "Ctrl-C leaves last.h5")
    check(re.search(r"\n\[warning\] stopped by SIGINT", plain) is not None, "the message starts on its own line", plain)

    r = subprocess.run([BIN, "train", config(d + "/pipe", 2, 256)], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "train with pipes exits 0", r.stderr)
    check("\x1b" not in r.stderr and "━" not in r.stderr, "no bar and no escape codes without a terminal", r.stderr)
    check(len(re.findall(r"^\[info\] epoch=\d/2 learning_rate=0.001 loss=", r.stderr, re.M)) == 2,
          "one [info] line per epoch without a terminal", r.stderr)
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
    print("all passed")


main()
