#!/usr/bin/env python3
"""PyTorch side of rnntrain's benchmarks (issues 5 and 11): times complete PyTorch training steps
(forward, loss, backward, Adam) of the bench workloads, for fused (num_layers=L) and per-layer modules,
in each precision, run eagerly and as a CUDA graph, and writes JSON. Not a data pipeline benchmark: one
batch is made once and reused.

Usage:
  python3 bench/torch_bench.py --device cuda --json torch.json            # the five GPU workloads
  python3 bench/torch_bench.py --device cpu --threads 2 --json torch.json # charlm_small, blog_small
  python3 bench/torch_bench.py --device cuda --workloads blog,gru --steps 5 --repeats 3 --modes graphed

Eager mode ("mode": "eager"): a step is zero_grad(set_to_none=True), forward (under torch.autocast for
the AMP precisions), loss, backward and optimizer.step(): torch.optim.Adam(fused=True) on CUDA, plain
Adam on the CPU; fp16-amp scales the loss with torch.amp.GradScaler. Nothing is read back to the host
inside a step.

Graphed mode ("mode": "graphed", CUDA only): the whole step (forward, loss, backward, Adam) is
captured once as a CUDA graph and replayed, following PyTorch's "whole network capture" recipe: the
batch tensors are the static inputs, 3 eager steps run on a side stream first (so that Adam's state
and cuDNN's buffers exist), the gradients are set to None just before capture (backward then
allocates them from the graph's pool and every replay overwrites them, so no zero_grad is replayed),
Adam is torch.optim.Adam(fused=True, capturable=True) and autocast runs with cache_enabled=False.
fp16-amp cannot use GradScaler there (its dynamic scale and skipped steps are not captured), so it
uses a fixed loss scale: the loss is multiplied by 1024 and the gradients are divided by 1024
(torch._foreach_div_) before Adam, inside the graph; a step with inf/NaN gradients is not skipped.
bilstm is not graphed: its batches are packed variable-length sequences, and a graph fixes one set of
lengths; its JSON entry says so ("graphed_skipped"), as does every CPU workload's. A variant whose
capture fails records the error in "status" and the run goes on.

Variable lengths (bilstm, maskzero; "layout" in each variant): "packed" variants pack each batch
(pack_padded_sequence, enforce_sorted=False, lengths on the host) and take the final states of the
last layer. maskzero also runs "padded": the padded batch over all T steps, the output taken at each
sequence's last valid step: for a unidirectional LSTM that is the same function as the packed run (a
step never sees later ones), in a shape a graph can hold (graphed variants are padded; eager runs
both, since on the CPU PyTorch's fast LSTM takes no packed sequences). --stream gives every step a
new batch with fresh lengths from the workload's distribution (a pool of 32 batches made on the
device before timing, used in turn), as rnntrain bench --stream does; graphed variants copy each
batch into the captured input tensors before the replay (inside the timed step). --bucketing cuts the
stream as rnntrain's train.bucketing does (the pool sorted by length, cut into batches, shuffled, the
longest first, each padded only to its longest sequence rounded up as rnntrain rounds it); graphed
variants then capture one graph per batch shape, all in one memory pool, before timing.

Timing: --warmup untimed steps (graphed: untimed replays after capture), then --repeats loops of
--steps steps (CUDA events on the GPU, time.perf_counter on the CPU); ms_per_step is the median over
repeats. peak_mib is torch.cuda.max_memory_allocated for the variant, from a reset before its model is
made (GPU; graphed: includes the graph's memory pool; cuBLAS's per-stream workspaces are freed before
each variant and after the graphed warm-up, so each variant counts only its own), or the process's
peak RSS (CPU, a high-water mark over the whole run, as in rnntrain bench). Every variant starts from
the same seed and batch.

--inference times evaluation steps instead (as `rnntrain bench --inference`): the model in eval mode,
forward and loss under torch.no_grad(), eagerly and as a CUDA graph of the forward and loss; nothing
is read back inside a step (PyTorch's fastest evaluation loop; rnntrain's reads each loss back).
"""
import argparse
import datetime
import gc
import json
import os
import platform
import resource
import statistics
import sys
import time

# Workload shapes (issue 5; bench/configs/*.yaml are the same models for rnntrain). kind: "dense" =
# features in, Dense on every step, MSE; "charlm" = Embedding in, Dense on every step, cross-entropy;
# "bilstm" = Embedding, Bidirectional layers over packed variable-length sequences, Dense on the final
# hidden states, cross-entropy; "maskzero" = the same with unidirectional layers.
WORKLOADS = {
    "blog": dict(kind="dense", cell="lstm", layers=4, hidden=512, input=512, batch=64, time=100, out=512),
    "large": dict(kind="dense", cell="lstm", layers=4, hidden=1024, input=1024, batch=128, time=100, out=1024),
    "gru": dict(kind="dense", cell="gru", layers=4, hidden=512, input=512, batch=64, time=100, out=512),
    "charlm": dict(kind="charlm", cell="lstm", layers=3, hidden=512, vocab=96, input=128, batch=256, time=50, out=96),
    "bilstm": dict(kind="bilstm", cell="lstm", layers=2, hidden=256, vocab=20000, input=128, batch=128, time=200,
                   out=5, min_length=50),
    # Embedding(mask_zero) -> 2 x LSTM(512) -> Dense on the last valid step; lengths log-normal (median
    # 60, sigma 0.8) clamped to [20, 400] (bench/configs/maskzero.yaml).
    "maskzero": dict(kind="maskzero", cell="lstm", layers=2, hidden=512, vocab=20000, input=128, batch=64, time=400,
                     out=5, min_length=20, lognormal=(60.0, 0.8)),
    "maskzero_small": dict(kind="maskzero", cell="lstm", layers=2, hidden=128, vocab=2000, input=64, batch=32, time=100,
                           out=5, min_length=5, lognormal=(30.0, 0.6)),
    "charlm_small": dict(kind="charlm", cell="lstm", layers=2, hidden=128, vocab=96, input=64, batch=32, time=50, out=96),
    "blog_small": dict(kind="dense", cell="lstm", layers=2, hidden=128, input=128, batch=32, time=50, out=128),
    "gru_small": dict(kind="dense", cell="gru", layers=2, hidden=128, input=128, batch=32, time=50, out=128),
}
DEFAULT_WORKLOADS = {"cuda": "blog,large,gru,charlm,bilstm", "cpu": "charlm_small,blog_small"}
IMPLS = ("fused", "per-layer")
MODES = ("eager", "graphed")
PRECISIONS = {"cuda": ("fp32", "tf32", "bf16-amp", "fp16-amp"), "cpu": ("fp32", "bf16-amp")}
SEED = 1234
STREAM_POOL = 32  # --stream: batches with fresh lengths, used in turn
GRAPH_SIDE_WARMUP = 3  # eager steps on a side stream before capture, as in PyTorch's recipe
FP16_GRAPH_LOSS_SCALE = 1024.0  # graphed fp16-amp: fixed loss scale (a power of two: dividing is exact)


def die(msg):
    print(f"torch_bench.py: {msg}", file=sys.stderr)
    sys.exit(2)


def import_torch():
    try:
        import torch  # noqa: F401  (imported here so that --help works without it)
    except ImportError as e:
        die(f"cannot import torch ({e}). Install PyTorch for {sys.executable} "
            "(scripts/bench_cpu.sh makes a venv with it; the GPU machine's python3 has it).")
    return torch


def make_model(torch, w, impl):
    """The workload's network: nn.LSTM/nn.GRU with num_layers=L ("fused") or L one-layer modules."""
    nn = torch.nn
    rnn_cls = nn.LSTM if w["cell"] == "lstm" else nn.GRU
    bidir = w["kind"] == "bilstm"
    dirs = 2 if bidir else 1
    H, L = w["hidden"], w["layers"]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(w["vocab"], w["input"]) if w["kind"] != "dense" else None
            if impl == "fused":
                self.rnns = nn.ModuleList([rnn_cls(w["input"], H, num_layers=L, batch_first=True, bidirectional=bidir)])
            else:
                self.rnns = nn.ModuleList([rnn_cls(w["input"] if i == 0 else H * dirs, H, batch_first=True,
                                                   bidirectional=bidir) for i in range(L)])
            self.head = nn.Linear(H * dirs, w["out"])

        def forward(self, x, lengths=None, last=None):
            # x: [B, T, I] features or [B, T] token ids; lengths: [B] (CPU int64): packed; last: [B]
            # (device int64, each sequence's last valid step): padded, the output taken there.
            h = self.embed(x) if self.embed is not None else x
            if lengths is None:
                for rnn in self.rnns:
                    h, _ = rnn(h)
                if last is not None:
                    return self.head(h[torch.arange(h.shape[0], device=h.device), last])  # [B, out]
                return self.head(h)  # [B, T, out]: Dense on every step
            h = nn.utils.rnn.pack_padded_sequence(h, lengths, batch_first=True, enforce_sorted=False)
            for rnn in self.rnns:
                h, (hn, _) = rnn(h)  # a PackedSequence goes straight into the next layer
            # hn: [L*D, B, H] (fused) or [D, B, H] (per-layer), in the input's batch order; the last
            # rows are the last layer's final states (forward, then backward when bidirectional).
            return self.head(torch.cat([hn[-2], hn[-1]], dim=1) if bidir else hn[-1])  # [B, out]

    return Net()


def variable(w):
    return w["kind"] in ("bilstm", "maskzero")


def draw_lengths(torch, w, g):
    """[B] lengths: uniform in [min_length, T], or log-normal clamped to it."""
    B, T, lo = w["batch"], w["time"], w["min_length"]
    if "lognormal" not in w:
        return torch.randint(lo, T + 1, (B,), generator=g)
    median, sigma = w["lognormal"]
    z = torch.randn(B, generator=g, dtype=torch.float64)
    return (median * torch.exp(sigma * z)).round().clamp(lo, T).to(torch.int64)


def bucket_steps(longest):
    """rnntrain's train/batching.h bucket_steps: the longest length rounded up to a multiple of 8, from
    128 on to one of 8 lengths per doubling (few batch shapes, so few CUDA graphs)."""
    q = 8
    while q * 16 <= longest:
        q *= 2
    return (max(longest, 1) + q - 1) // q * q


def bucketed_lengths(torch, w, g, count):
    """count batches' lengths as rnntrain's train.bucketing cuts a pool of count batches' worth of
    sequences (one window): sorted by length, cut into batches, the batches shuffled, the one with the
    most steps first; each with its padded length bucket_steps(longest), at most T."""
    B, T = w["batch"], w["time"]
    pool = torch.sort(draw_lengths(torch, dict(w, batch=count * B), g), stable=True).values
    groups = [pool[i * B:(i + 1) * B] for i in range(count)]
    groups = [groups[i] for i in torch.randperm(count, generator=g).tolist()]
    first = max(range(count), key=lambda i: int(groups[i].max()))
    groups[0], groups[first] = groups[first], groups[0]
    return [(lens, min(T, bucket_steps(int(lens.max())))) for lens in groups]


def make_batches(torch, w, device, count, bucketing=False):
    """count batches (x, y, lengths on the host, last valid steps on the device), from a fixed seed;
    bucketing (variable-length workloads): as rnntrain's train.bucketing makes them (bucketed_lengths)."""
    g = torch.Generator().manual_seed(SEED)
    B, T = w["batch"], w["time"]
    buckets = bucketed_lengths(torch, w, g, count) if bucketing else None
    out = []
    for i in range(count):
        lengths = last = None
        if buckets:
            T = buckets[i][1]
        if w["kind"] == "dense":
            x = torch.rand(B, T, w["input"], generator=g) * 2 - 1
            y = torch.rand(B, T, w["out"], generator=g) * 2 - 1
        else:
            x = torch.randint(1, w["vocab"], (B, T), generator=g)  # never the padding id 0
            if w["kind"] == "charlm":
                y = torch.randint(0, w["out"], (B, T), generator=g)
            else:
                y = torch.randint(0, w["out"], (B,), generator=g)
                lengths = buckets[i][0] if buckets else draw_lengths(torch, w, g)
                x[torch.arange(T)[None, :] >= lengths[:, None]] = 0  # padded steps hold the padding id
                last = (lengths - 1).to(device)
        out.append((x.to(device), y.to(device), lengths, last))
    return out


def set_precision(torch, precision, device):
    """fp32: no TF32 anywhere; tf32: TF32 in cuDNN and cuBLAS; AMP: PyTorch's defaults plus autocast (on the
    CPU: bf16 autocast, which runs the LSTM on oneDNN's bf16 kernels where the CPU has them)."""
    if device != "cuda":
        return torch.bfloat16 if precision == "bf16-amp" else None
    # (cuDNN, cuBLAS) TF32 flags; for AMP, PyTorch's defaults (the ops autocast leaves in fp32).
    cudnn_tf32, matmul_tf32 = {"fp32": (False, False), "tf32": (True, True)}.get(precision, (True, False))
    torch.backends.cudnn.allow_tf32 = cudnn_tf32
    torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
    return {"bf16-amp": torch.bfloat16, "fp16-amp": torch.float16}.get(precision)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def graph_skip_reason(w, device):
    """Why a workload is not run as a CUDA graph, or None."""
    if device != "cuda":
        return "skipped: CUDA graphs need --device cuda"
    if w["kind"] == "bilstm":
        return ("skipped: packed variable-length batches; a CUDA graph fixes one set of lengths, and a padded "
                "bidirectional run is another function")
    return None


def error_text(e):
    """One line for a failed variant; a failed capture's real cause can be the exception's context."""
    text = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    c = e.__context__
    if c is not None:
        text += f" (after {type(c).__name__}: {str(c).splitlines()[0][:200] if str(c) else ''})"
    return text


def clear_cublas_workspaces(torch):
    """Frees cuBLAS's workspaces, which it keeps per stream it ran on. A graphed variant runs on two new
    streams (warm-up, capture): uncleared, their workspaces would stay allocated and count in every later
    variant's peak. (torch._inductor clears them around its CUDA graph warm-up and capture too.)"""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()


def layouts(w, mode):
    """How a variant feeds its batches: None (fixed lengths), "packed" or "padded" (the output taken at
    each sequence's last step: the same function for a unidirectional stack, so maskzero only)."""
    if not variable(w):
        return [None]
    if mode == "graphed":
        return ["padded"]
    return ["packed", "padded"] if w["kind"] == "maskzero" else ["packed"]


def run_variant(torch, w, impl, precision, mode, device, args, layout=None):
    """Times one variant; returns its JSON entry (ms in milliseconds per step)."""
    cuda = device == "cuda"
    graphed = mode == "graphed"
    padded = layout == "padded"
    if cuda:
        gc.collect()  # the previous variant's graph and model may still be referenced (e.g. by a traceback)
        clear_cublas_workspaces(torch)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    amp_dtype = set_precision(torch, precision, device)
    torch.manual_seed(SEED)
    model = make_model(torch, w, impl).to(device)
    infer = args.inference
    model.train(not infer)
    params = list(model.parameters())
    if infer:
        opt = None
    elif cuda:  # capturable: Adam's step count stays on the device, as a captured step needs
        opt = torch.optim.Adam(params, lr=1e-3, fused=True, capturable=graphed)
    else:
        opt = torch.optim.Adam(params, lr=1e-3)
    loss_fn = torch.nn.MSELoss() if w["kind"] == "dense" else torch.nn.CrossEntropyLoss()
    stream = args.stream and variable(w)
    batches = make_batches(torch, w, device, STREAM_POOL if stream else 1, stream and args.bucketing)
    out_dim = w["out"]
    at = [0]  # the next batch of the pool

    def forward_loss(static=None):
        # Autocast's cast cache must be off in a captured region (PyTorch's CUDA graphs notes).
        with torch.autocast(device_type=device, dtype=amp_dtype, enabled=amp_dtype is not None,
                            cache_enabled=False if graphed else None):
            if graphed:
                x, y, last = static
                out = model(x, None, last)
                return loss_fn(out.reshape(-1, out_dim), y.reshape(-1)) if w["kind"] == "charlm" else loss_fn(out, y)
            bx, by, blen, blast = batches[at[0]]
            at[0] = (at[0] + 1) % len(batches)
            out = model(bx, None, blast) if padded else model(bx, blen)
            return loss_fn(out.reshape(-1, out_dim), by.reshape(-1)) if w["kind"] == "charlm" else loss_fn(out, by)

    if not graphed and infer:
        def step():
            with torch.no_grad():
                return forward_loss()
    elif not graphed:
        scaler = torch.amp.GradScaler("cuda") if precision == "fp16-amp" else None

        def step():
            opt.zero_grad(set_to_none=True)
            loss = forward_loss()
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            return loss
    else:
        scale = FP16_GRAPH_LOSS_SCALE if precision == "fp16-amp" and not infer else None

        def graph_body(static):
            if infer:
                with torch.no_grad():
                    return forward_loss(static)
            loss = forward_loss(static)
            if scale is not None:  # fixed loss scale: scale, backward, unscale, then Adam
                (loss * scale).backward()
                torch._foreach_div_([p.grad for p in params if p.grad is not None], scale)
            else:
                loss.backward()
            opt.step()
            return loss

        # One graph per batch shape (bucketed streams have several), captured in turn into one memory
        # pool: replays run one at a time, and each step reads only its own graph's loss.
        graphs = {}  # timesteps -> (graph, its input tensors, its loss)
        for bx, by, _, blast in batches:
            if bx.shape[1] in graphs:
                continue
            static = (bx.clone(), by.clone(), None if blast is None else blast.clone())  # each step copies into them
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(GRAPH_SIDE_WARMUP):
                    if opt is not None:
                        opt.zero_grad(set_to_none=True)
                    graph_body(static)
            torch.cuda.current_stream().wait_stream(side)
            side.synchronize()
            clear_cublas_workspaces(torch)  # the warm-up stream's workspace is not needed any more
            if opt is not None:  # backward inside the capture allocates the grads in the graph's pool
                opt.zero_grad(set_to_none=True)
            graph = torch.cuda.CUDAGraph()
            first = next(iter(graphs.values()), None)
            with torch.cuda.graph(graph, pool=first[0].pool() if first else None):
                graphs[bx.shape[1]] = (graph, static, graph_body(static))

        def step():
            bx, by, _, blast = batches[at[0]]
            at[0] = (at[0] + 1) % len(batches)
            graph, (x, y, last), static_loss = graphs[bx.shape[1]]
            if len(batches) > 1:
                x.copy_(bx), y.copy_(by), last.copy_(blast)
            graph.replay()
            return static_loss

    for _ in range(args.warmup):
        loss = step()
    if cuda:
        torch.cuda.synchronize()
    repeats = []
    for _ in range(args.repeats):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.steps):
                loss = step()
            end.record()
            end.synchronize()
            repeats.append(start.elapsed_time(end) / args.steps)
        else:
            t0 = time.perf_counter()
            for _ in range(args.steps):
                loss = step()
            repeats.append((time.perf_counter() - t0) * 1000.0 / args.steps)
    last_loss = float(loss.detach().float().cpu())
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else peak_rss_mib()
    v = {"impl": impl, "precision": precision, "mode": mode, "ms_per_step": statistics.median(repeats),
         "layout": layout,
         "ms_per_step_repeats": repeats, "peak_mib": peak, "last_loss": last_loss, "status": "ok"}
    if stream:
        v["bucketing"] = args.bucketing
    if graphed:
        v["graph_warmup_steps"] = GRAPH_SIDE_WARMUP
        v["graphs"] = len(graphs)
        if scale is not None:
            v["loss_scale"] = scale  # fixed; eager fp16-amp uses GradScaler's dynamic scale
    if cuda:  # the TF32 switches as the variant ran, for the record
        v["allow_tf32"] = {"cudnn": torch.backends.cudnn.allow_tf32, "matmul": torch.backends.cuda.matmul.allow_tf32}
    return v


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--workloads", help="comma-separated, from: " + ", ".join(WORKLOADS) +
                   " (default: blog,large,gru,charlm,bilstm on cuda; charlm_small,blog_small on cpu)")
    p.add_argument("--impls", default=",".join(IMPLS), help="comma-separated subset of: fused, per-layer")
    p.add_argument("--precisions", help="comma-separated subset of: fp32, tf32, bf16-amp, fp16-amp (default: all "
                   "four on cuda, fp32 and bf16-amp on cpu)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of: eager, graphed (default: "
                   "both; graphed is skipped on the CPU and for bilstm)")
    p.add_argument("--steps", type=int, default=10, help="steps per timed repeat (default 10)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats, at least 3 (default 5)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads, torch.set_num_threads (default 2)")
    p.add_argument("--stream", action="store_true", help="variable-length workloads: a new batch with fresh "
                   "lengths every step (a pool of 32, used in turn)")
    p.add_argument("--bucketing", action="store_true", help="with --stream: batches as rnntrain's train.bucketing "
                   "makes them (similar lengths, trimmed; graphed: one CUDA graph per batch shape)")
    p.add_argument("--inference", action="store_true", help="time evaluation steps (eval mode, forward and loss "
                   "under no_grad) instead of training steps")
    p.add_argument("--json", help="write the results to this file")
    a = p.parse_args()
    if a.steps < 1 or a.repeats < 3 or a.warmup < 0 or a.threads < 1:
        p.error("need --steps >= 1, --repeats >= 3, --warmup >= 0, --threads >= 1")
    if a.bucketing and not a.stream:
        p.error("--bucketing cuts a stream of batches: add --stream")
    a.workloads = [s.strip().replace("-", "_") for s in (a.workloads or DEFAULT_WORKLOADS[a.device]).split(",") if s.strip()]
    for name in a.workloads:
        if name not in WORKLOADS:
            p.error(f"unknown workload '{name}'; choices: {', '.join(WORKLOADS)}")
    a.impls = [s.strip() for s in a.impls.split(",") if s.strip()]
    a.precisions = [s.strip() for s in (a.precisions or ",".join(PRECISIONS[a.device])).split(",") if s.strip()]
    a.modes = [s.strip() for s in a.modes.split(",") if s.strip()]
    for s in a.modes:
        if s not in MODES:
            p.error(f"unknown mode '{s}'; choices: {', '.join(MODES)}")
    for s in a.impls:
        if s not in IMPLS:
            p.error(f"unknown impl '{s}'; choices: {', '.join(IMPLS)}")
    for s in a.precisions:
        if s not in PRECISIONS[a.device]:
            p.error(f"precision '{s}' is not benchmarked on {a.device}; choices: {', '.join(PRECISIONS[a.device])}")
    return a


def main():
    args = parse_args()
    torch = import_torch()
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        die(f"--device cuda: torch {torch.__version__} sees no CUDA device (torch.version.cuda = {torch.version.cuda})")
    torch.set_num_threads(args.threads)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "hardware": {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "cpu": cpu_model(),
                     "threads": torch.get_num_threads()},
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                     "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                     "python": platform.python_version()},
        "steps": args.steps, "repeats": args.repeats, "warmup": args.warmup, "modes": args.modes,
        "stream": args.stream, "bucketing": args.stream and args.bucketing,
        "workload": "inference" if args.inference else "training",
        "workloads": {},
    }
    print(f"torch {torch.__version__} on {result['hardware']['device']}, {args.steps} "
          f"{'evaluation' if args.inference else 'training'} steps x {args.repeats} repeats "
          f"after {args.warmup} warm-up steps", file=sys.stderr)
    for name in args.workloads:
        w = WORKLOADS[name]
        entry = {"shape": w, "variants": []}
        modes = list(args.modes)
        skip = graph_skip_reason(w, device) if "graphed" in modes else None
        if skip:
            modes.remove("graphed")
            entry["graphed_skipped"] = skip
            print(f"torch workload={name} mode=graphed {skip}", flush=True)
        for impl in args.impls:
            for precision in args.precisions:
                for mode, layout in [(m, lay) for m in modes for lay in layouts(w, m)]:
                    try:
                        v = run_variant(torch, w, impl, precision, mode, device, args, layout)
                    except Exception as e:  # e.g. out of memory, a precision this GPU lacks, a failed capture
                        v = {"impl": impl, "precision": precision, "mode": mode, "ms_per_step": None,
                             "ms_per_step_repeats": [], "peak_mib": None, "status": f"failed: {error_text(e)}",
                             "layout": layout}
                    if device == "cuda":
                        try:  # a failed capture can leave its capture stream current; finish its work
                            torch.cuda.set_stream(torch.cuda.default_stream())
                            torch.cuda.synchronize()
                        except Exception as e:
                            print(f"torch_bench.py: synchronize after {name} {impl} {precision} {mode}: {e}",
                                  file=sys.stderr)
                    entry["variants"].append(v)
                    ms = f"{v['ms_per_step']:9.3f} ms/step" if v["ms_per_step"] is not None else "      n/a"
                    peak = f"{v['peak_mib']:8.1f} MiB" if v["peak_mib"] is not None else ""
                    print(f"torch workload={name} impl={impl} precision={precision} mode={mode}{' layout=' + layout if layout else ''} {ms} {peak} "
                          f"{v['status']}", flush=True)
        result["workloads"][name] = entry
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
