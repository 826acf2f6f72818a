#!/usr/bin/env python3
"""Writes bench/RESULTS.md from the JSON that scripts/bench_gpu.sh and scripts/bench_cpu.sh leave in
bench/results/gpu/ and bench/results/cpu/: the machine, per workload rnntrain's best candidates,
PyTorch's and raw cuDNN's times and peak memory, and issue 5's targets, each met or missed by how much.
It measures nothing itself; a missing directory or file leaves its section out or marks a row n/a.
"PyTorch's fastest" is the fastest of all torch_bench.py variants, eager and graphed (CUDA graph)
alike; torch.json without a "mode" per variant (written before graphed mode existed) counts as eager.

Usage:
  python3 bench/write_results.py [--results bench/results] [--out bench/RESULTS.md]
  python3 bench/write_results.py --cudnn-args rnntrain_blog.json   # prints "--precision P --algo A [--per-layer]"
                                                                  # of rnntrain's winner, for rnntrain_cudnn_bench

Files read (each optional): DIR/gpu/machine.txt, rnntrain_<workload>.json (`rnntrain bench --json`),
torch.json (bench/torch_bench.py), cudnn_<workload>.json (rnntrain_cudnn_bench), own_graph_<workload>.json
(rnntrain_wavefront_bench); DIR/cpu/machine.txt,
rnntrain_<workload>.json, torch.json; DIR/notes.md (hand-written reasons, copied in as the closing note).
"""
import argparse
import json
import os
import re
import sys

GPU_WORKLOADS = ("blog", "large", "gru", "charlm", "bilstm")
CPU_WORKLOADS = ("charlm_small", "blog_small", "gru_small", "maskzero_small")
CLASSES = ("fp32/tf32", "fp16/bf16")
# Targets: blog and gru against PyTorch's num_layers module in fp32; rnntrain within 1.15x of raw cuDNN.
VS_FUSED_FP32 = {"blog": 2.0, "gru": 2.5}
CUDNN_LIMIT = 1.15
# Issue 11's targets against PyTorch's fastest, eager or graphed: rnntrain's fastest fp16/bf16 this
# many times faster than PyTorch's fastest fp16/bf16, and the same for fp32/tf32; the recurrent part
# alone twice as fast as the raw cuDNN calls replayed as a graph (timed by rnntrain_wavefront_bench).
GRAPHED_HALF = {"blog": 1.5, "gru": 1.5, "charlm": 1.5, "large": 1.2}
GRAPHED_FP32 = {"blog": 1.2, "gru": 1.2, "charlm": 1.2}
RECURRENT_VS_RAW = {"blog": 2.0, "gru": 2.0}
# Issue 33 (the own kernels' second design): rnntrain's fastest full step this many times faster than
# PyTorch's fastest of any precision (GRAPHED_HALF's factors), the recurrent part timed alone
# (own_graph_<workload>.json, bench/wavefront_bench.cpp) within RECURRENT_VS_RAW of raw cuDNN replayed
# as a graph, and on blog the kernels' time per wave step within these (us; the probes' floor beside).
WAVE_STEP_US = {"forward": 5.0, "backward": 8.0}
WAVE_STEP_FLOOR = {"forward": "3-5 us", "backward": "5-8 us"}  # issue 33, from the probes (docs/cuda.md)
# Issue 12: variable lengths, a new batch every step (bench_gpu.sh's stream runs): rnntrain this many
# times faster than PyTorch's fastest run of the same function, per precision class.
STREAM_WORKLOADS = ("bilstm", "maskzero")
STREAM_VS_TORCH = 2.0
STREAM_VS_RAW = 1.25  # issue 12: rnntrain's step against the raw cuDNN calls of the same batches, graphed
# CPU targets (issue 13): rnntrain this many times faster than PyTorch's fastest and Keras/JAX.
CPU_VS_TORCH, CPU_VS_KERAS = 1.3, 2.0


def precision_class(p):
    return "fp32/tf32" if p in ("fp32", "tf32") else "fp16/bf16"


def load_json(path):
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"write_results.py: {path}: cannot read it as JSON ({e})")


def load_machine(path):
    """machine.txt: 'key: value' lines written by the bench scripts."""
    info = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    info[k.strip()] = v.strip()
    return info


def rnntrain_candidates(j):
    """rnntrain bench candidates with defaults for keys older JSON lacks (CPU: fp32, standard)."""
    out = []
    for c in (j or {}).get("candidates", []):
        ms = c.get("ms_per_step")
        status = c.get("status", "ok")
        out.append({"name": c.get("name", "?"), "fuse": c.get("fuse", "auto"), "precision": c.get("precision") or "fp32",
                    "algo": c.get("algo") or "standard", "ms": ms, "status": status, "ok": status == "ok" and ms is not None,
                    "peak": c.get("peak_device_mib"), "graphs": c.get("graph_share"),
                    "host": c.get("peak_host_rss_mib")})
    return out


def torch_variants(tj, workload):
    """torch_bench.py variants, eager and graphed; older JSON has no "mode" and ran eagerly."""
    out = []
    for v in ((tj or {}).get("workloads", {}).get(workload) or {}).get("variants", []):
        ms = v.get("ms_per_step")
        status = v.get("status", "ok")
        out.append({"impl": v.get("impl"), "precision": v.get("precision"), "mode": v.get("mode") or "eager",
                    "ms": ms, "peak": v.get("peak_mib"), "status": status, "ok": status == "ok" and ms is not None,
                    "layout": v.get("layout")})
    return out


def graphed_skipped(tj, workload):
    """torch_bench.py's reason for not graphing a workload (bilstm, the CPU), or None."""
    return ((tj or {}).get("workloads", {}).get(workload) or {}).get("graphed_skipped")


def fastest(items, cls=None):
    """The fastest item that ran, of precision class cls (None: any); PyTorch's "bf16-amp" counts as bf16."""
    pool = [x for x in items if x["ok"] and (cls is None or precision_class(x["precision"].replace("-amp", "")) == cls)]
    return min(pool, key=lambda x: x["ms"]) if pool else None


def fmt_ms(x):
    return f"{x:.2f}" if isinstance(x, (int, float)) else "n/a"


def fmt_mib(x):
    return f"{x:.0f}" if isinstance(x, (int, float)) else "n/a"


def rn_label(c):
    return f"{c['name']} ({c['precision']}, {c['algo']}, fuse {c['fuse']})" if c else "none ran"


def torch_label(v):
    if not v:
        return "none ran"
    return f"{v['mode']} {v['impl']} {v['precision']}" + (f" ({v['layout']})" if v.get("layout") else "")


def at_least(ratio, target):
    """A speed ratio that must be >= target: 'met' or 'missed by N%'."""
    if ratio is None:
        return "n/a"
    if ratio >= target:
        return "met"
    return f"missed by {100 * (1 - ratio / target):.0f}% ({ratio:.2f}x, needs {target:.2f}x)"


def at_most(value, limit, unit="x"):
    if value is None or limit is None:
        return "n/a"
    if value <= limit:
        return "met"
    return f"missed by {100 * (value / limit - 1):.0f}% ({value:.2f}{unit} vs {limit:.2f}{unit})"


def cudnn_version(v):
    """torch.backends.cudnn.version() is an int, 91900 for 9.19.0."""
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if isinstance(v, int) else str(v if v is not None else "n/a")


def ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else None


def gpu_section(d, out, targets):
    m = load_machine(os.path.join(d, "machine.txt"))
    tj = load_json(os.path.join(d, "torch.json")) or {}
    tv, th = tj.get("versions", {}), tj.get("hardware", {})
    # rnntrain bench's hardware.gpu ends "..., cuDNN 9.14.0)": the cuDNN it loaded.
    first = next((j for j in (load_json(os.path.join(d, f"rnntrain_{w}.json")) for w in GPU_WORKLOADS) if j), {})
    found = re.search(r"cuDNN ([0-9.]+)", str(first.get("hardware", {}).get("gpu", "")))
    m.setdefault("rnntrain_cudnn", found.group(1) if found else "n/a")
    out.append("## GPU\n")
    out.append(f"- date: {m.get('date', tj.get('date', 'n/a'))}")
    out.append(f"- GPU: {m.get('gpu', th.get('device', 'n/a'))}; driver {m.get('driver', 'n/a')}")
    out.append(f"- CUDA: toolkit {m.get('nvcc', 'n/a')} (rnntrain); PyTorch's {tv.get('cuda', 'n/a')}")
    out.append(f"- cuDNN: rnntrain {m.get('rnntrain_cudnn', 'n/a')}; PyTorch's {cudnn_version(tv.get('cudnn'))}")
    out.append(f"- PyTorch {tv.get('torch', 'n/a')}, Python {tv.get('python', 'n/a')}; rnntrain commit {m.get('commit', 'n/a')}")
    out.append(f"- timing: {m.get('timing', 'n/a')}; ms/step is the median of the repeats\n")
    out.append("rnntrain and PyTorch time a whole training step (forward, loss, backward, Adam); raw cuDNN times "
               "only the RNN stack's cudnnRNNForward + BackwardData + BackwardWeights, in rnntrain's winning "
               "precision, algorithm and fusion. Peak MiB: device memory allocated at the peak (rnntrain's own "
               "count, torch.cuda.max_memory_allocated, cudaMemGetInfo difference for raw cuDNN).\n")
    tw = tj.get("workloads", {}).values()
    if any(x.get("graphed_skipped") or any(v.get("mode") == "graphed" for v in x.get("variants", [])) for x in tw):
        out.append("PyTorch runs each variant eagerly and, except on bilstm, with the whole step captured once as a "
                   "CUDA graph and replayed (graphed). PyTorch's fastest, and every target that uses it, is the "
                   "fastest of both modes; the configuration column names the mode.\n")
    elif tj:
        out.append("PyTorch ran eagerly only (this torch.json has no graphed variants).\n")
    summary = []
    for w in GPU_WORKLOADS:
        rj = load_json(os.path.join(d, f"rnntrain_{w}.json"))
        cj = load_json(os.path.join(d, f"cudnn_{w}.json"))
        cg = load_json(os.path.join(d, f"cudnn_graph_{w}.json"))
        og = load_json(os.path.join(d, f"own_graph_{w}.json"))
        og_ok = og is not None and og.get("status") == "ok" and og.get("ms_per_step") is not None
        if rj is None and w not in tj.get("workloads", {}) and cj is None and cg is None:
            continue
        cands, variants = rnntrain_candidates(rj), torch_variants(tj, w)
        rn_best = fastest(cands)
        rn_cls = {k: fastest(cands, k) for k in CLASSES}
        # The num_layers fp32 target (issue 5) is against the module as it runs by default: eagerly.
        t_ref = next((v for v in variants if v["ok"] and v["mode"] == "eager" and v["impl"] == "fused"
                      and v["precision"] == "fp32"), None)
        t_cls = {k: fastest(variants, k) for k in CLASSES}
        ok_raw = [j for j in (cj, cg) if j is not None and j.get("status", "ok") == "ok" and j.get("ms_per_step") is not None]
        raws = [j for j in (cj, cg) if j is not None]
        cj = min(ok_raw, key=lambda j: j["ms_per_step"]) if ok_raw else cj  # the faster call sequence is the reference
        cudnn_ok = bool(ok_raw)
        module = "nn.GRU" if w == "gru" else "nn.LSTM"
        out.append(f"### {w}\n")
        out.append("| | configuration | ms/step | peak MiB |")
        out.append("|---|---|---|---|")
        out.append(f"| rnntrain, fastest | {rn_label(rn_best)} | {fmt_ms(rn_best and rn_best['ms'])} | {fmt_mib(rn_best and rn_best['peak'])} |")
        for k in CLASSES:
            c = rn_cls[k]
            out.append(f"| rnntrain, fastest {k} | {rn_label(c)} | {fmt_ms(c and c['ms'])} | {fmt_mib(c and c['peak'])} |")
        wf = fastest([c for c in cands if c["algo"] == "wavefront"])
        if wf:
            out.append(f"| rnntrain, own kernels (wavefront), fastest | {rn_label(wf)} | {fmt_ms(wf['ms'])} | {fmt_mib(wf['peak'])} |")
        out.append(f"| PyTorch {module}(num_layers), fp32 | {torch_label(t_ref)} | {fmt_ms(t_ref and t_ref['ms'])} | {fmt_mib(t_ref and t_ref['peak'])} |")
        t_best = fastest(variants)
        out.append(f"| PyTorch, fastest | {torch_label(t_best)} | {fmt_ms(t_best and t_best['ms'])} | {fmt_mib(t_best and t_best['peak'])} |")
        for k in CLASSES:
            v = t_cls[k]
            out.append(f"| PyTorch, fastest {k} | {torch_label(v)} | {fmt_ms(v and v['ms'])} | {fmt_mib(v and v['peak'])} |")
        for j in raws:
            cfg = f"{j.get('precision')}, {j.get('algo')}, {'per-layer' if j.get('per_layer') else 'fused'}"
            if j.get("status", "ok") != "ok":
                cfg += f" ({j.get('status')})"
            how = ", replayed as a CUDA graph" if j.get("graph") else ", launched one by one"
            out.append(f"| raw cuDNN, RNN calls only{how} | {cfg} | {fmt_ms(j.get('ms_per_step'))} | {fmt_mib(j.get('peak_mib'))} |")
        if not raws:
            out.append("| raw cuDNN, RNN calls only | not run | n/a | n/a |")
        if og is not None:
            cfg = f"{og.get('precision')}, design {'/'.join(map(str, og.get('design', [])))} (forward/backward)" \
                if og_ok else f"{og.get('precision')} ({og.get('status')})"
            out.append(f"| rnntrain's own kernels, recurrent part only, replayed as a CUDA graph | {cfg} | "
                       f"{fmt_ms(og.get('ms_per_step'))} | {fmt_mib(og.get('peak_mib'))} |")
        failed = [f"rnntrain {c['name']} ({c['precision']}, {c['algo']}): {c['status']}" for c in cands if not c["ok"]]
        failed += [f"PyTorch {torch_label(v)}: {v['status']}" for v in variants if not v["ok"]]
        if failed:
            out.append("\nDid not run: " + "; ".join(failed) + ".")
        torch_modes_table(variants, graphed_skipped(tj, w), out)

        # The targets of issue 5, each (what, measured, result).
        rows = []
        for k in CLASSES:
            r = ratio(t_cls[k] and t_cls[k]["ms"], rn_cls[k] and rn_cls[k]["ms"])
            rows.append((f"{k}: at least as fast as PyTorch's fastest {k}",
                         f"{fmt_ms(t_cls[k] and t_cls[k]['ms'])} / {fmt_ms(rn_cls[k] and rn_cls[k]['ms'])} ms = "
                         f"{r:.2f}x" if r else "n/a", at_least(r, 1.0)))
        if w in VS_FUSED_FP32:
            r = ratio(t_ref and t_ref["ms"], rn_best and rn_best["ms"])
            rows.append((f"{VS_FUSED_FP32[w]:g}x faster than {module}(num_layers) fp32",
                         f"{fmt_ms(t_ref and t_ref['ms'])} / {fmt_ms(rn_best and rn_best['ms'])} ms = {r:.2f}x" if r else "n/a",
                         at_least(r, VS_FUSED_FP32[w])))
        r = ratio(rn_best and rn_best["ms"], cj.get("ms_per_step") if cudnn_ok else None)
        same = cj is not None and rn_best is not None and (cj.get("precision"), cj.get("algo"), bool(cj.get("per_layer"))) == \
            (rn_best["precision"], rn_best["algo"], rn_best["fuse"] == "never")
        note = "" if same or cj is None else " (raw cuDNN ran another configuration)"
        note += " (raw: as a CUDA graph, the faster)" if cudnn_ok and cj.get("graph") else ""
        rows.append((f"within {CUDNN_LIMIT}x of raw cuDNN", (f"{fmt_ms(rn_best and rn_best['ms'])} / "
                     f"{fmt_ms(cj.get('ms_per_step'))} ms = {r:.2f}x" if r else "n/a") + note, at_most(r, CUDNN_LIMIT)))
        for k in CLASSES:
            a, b = rn_cls[k] and rn_cls[k]["peak"], t_cls[k] and t_cls[k]["peak"]
            rows.append((f"{k}: peak memory no higher than PyTorch's fastest {k}",
                         f"{fmt_mib(a)} vs {fmt_mib(b)} MiB", at_most(a, b, " MiB") if a is not None and b is not None else "n/a"))
        # Issue 11's targets.
        for k, need in (("fp16/bf16", GRAPHED_HALF.get(w)), ("fp32/tf32", GRAPHED_FP32.get(w))):
            if need is None:
                continue
            r = ratio(t_cls[k] and t_cls[k]["ms"], rn_cls[k] and rn_cls[k]["ms"])
            rows.append((f"issue 11, {k}: {need:g}x faster than PyTorch's fastest {k} (eager or graphed)",
                         f"{fmt_ms(t_cls[k] and t_cls[k]['ms'])} / {fmt_ms(rn_cls[k] and rn_cls[k]['ms'])} ms = "
                         f"{r:.2f}x" if r else "n/a", at_least(r, need)))
        raw_graph = cg.get("ms_per_step") if cg is not None and cg.get("status", "ok") == "ok" else None
        if w in RECURRENT_VS_RAW:
            r = ratio(raw_graph, og.get("ms_per_step") if og_ok else None)
            rows.append((f"issues 11, 33: recurrent part {RECURRENT_VS_RAW[w]:g}x faster than raw cuDNN replayed as a graph",
                         f"{fmt_ms(raw_graph)} / {fmt_ms(og.get('ms_per_step'))} ms = {r:.2f}x (own kernels, "
                         "bench/wavefront_bench.cpp)" if r else "n/a (no own_graph or cudnn_graph JSON)",
                         at_least(r, RECURRENT_VS_RAW[w])))
        if w in GRAPHED_HALF:
            r = ratio(t_best and t_best["ms"], rn_best and rn_best["ms"])
            rows.append((f"issue 33: full step {GRAPHED_HALF[w]:g}x faster than PyTorch's fastest (any precision)",
                         f"{fmt_ms(t_best and t_best['ms'])} / {fmt_ms(rn_best and rn_best['ms'])} ms = {r:.2f}x"
                         if r else "n/a", at_least(r, GRAPHED_HALF[w])))
        if w == "blog":
            for k, limit in WAVE_STEP_US.items():
                us = og.get(f"{k}_us_per_wave_step") if og_ok else None
                waves = og.get(f"{k}_waves") if og_ok else None
                rows.append((f"issue 33: {k} kernels at most {limit:g} us per wave step (the probes' floor: {WAVE_STEP_FLOOR[k]})",
                             f"{us:.2f} us ({og[k + '_kernels_ms']:.3f} ms over {waves} wave steps)" if us else "n/a",
                             at_most(us, limit, " us")))
        if w in GRAPHED_HALF:
            a, b = rn_best and rn_best["peak"], t_best and t_best["peak"]
            rows.append(("issues 11, 33: peak memory no higher than PyTorch's fastest configuration",
                         f"{fmt_mib(a)} vs {fmt_mib(b)} MiB", at_most(a, b, " MiB") if a is not None and b is not None else "n/a"))
        target_table(rows, f"GPU {w}", out, targets, summary)
    stream_section(d, out, targets, summary)
    met = sum(1 for r in summary if r == "met")
    out.append(f"GPU targets met: {met} of {len(summary)} ({summary.count('n/a')} not measured).\n")
    graphs_section(d, out)


def stream_section(d, out, targets, summary):
    """Issue 12: every step a new batch with fresh lengths; rnntrain and PyTorch, without and with bucketing."""
    tj = load_json(os.path.join(d, "torch_stream.json")) or {}
    tjb = load_json(os.path.join(d, "torch_stream_bucketed.json")) or {}
    for w in STREAM_WORKLOADS:
        plain = rnntrain_candidates(load_json(os.path.join(d, f"stream_{w}.json")))
        bucketed = rnntrain_candidates(load_json(os.path.join(d, f"stream_{w}_bucketed.json")))
        variants, variants_b = torch_variants(tj, w), torch_variants(tjb, w)
        if not plain and not bucketed and not variants:
            continue
        out.append(f"### {w}, a new batch every step (issue 12)\n")
        out.append("rnntrain bench --stream and torch_bench.py --stream: every timed step takes a new batch with "
                   "fresh lengths from the workload's distribution. PyTorch packs each batch (eager); on maskzero "
                   "it also runs the padded batch as a CUDA graph, taking each sequence's output at its last step "
                   "(the same function for a unidirectional stack). Without bucketing the batches hold the "
                   "workload's full length, padded; bucketed (rnntrain's train.bucketing, torch_bench.py "
                   "--bucketing: the same procedure) they hold sequences of similar lengths, trimmed to the "
                   "longest rounded up onto 8 lengths per doubling, and PyTorch graphed captures one graph per "
                   "batch shape. rnntrain's graphs column: the share of timed steps replayed as CUDA graphs.\n")
        out.append("| | configuration | ms/step | peak MiB | graphs |")
        out.append("|---|---|---|---|---|")
        rows = []
        for label, cands in (("rnntrain", plain), ("rnntrain, bucketed", bucketed)):
            for k in (None,) + CLASSES:
                c = fastest(cands, k)
                share = c and c.get("graphs")
                out.append(f"| {label}, fastest{'' if k is None else ' ' + k} | {rn_label(c)} | "
                           f"{fmt_ms(c and c['ms'])} | {fmt_mib(c and c['peak'])} | "
                           f"{'n/a' if share is None else f'{100 * share:.0f}%'} |")
        for label, vs in (("PyTorch", variants), ("PyTorch, bucketed", variants_b)):
            for k in (None,) + CLASSES:
                v = fastest(vs, k)
                out.append(f"| {label}, fastest{'' if k is None else ' ' + k} | {torch_label(v)} | "
                           f"{fmt_ms(v and v['ms'])} | {fmt_mib(v and v['peak'])} | |")
        for how, cands, vs in (("neither bucketed", plain, variants), ("both bucketed", bucketed, variants_b)):
            for k in CLASSES:
                t, r = fastest(vs, k), fastest(cands, k)
                if not t and not r:
                    continue
                q = ratio(t and t["ms"], r and r["ms"])
                rows.append((f"{k}, {how}: {STREAM_VS_TORCH:g}x faster than PyTorch's fastest {k}",
                             f"{fmt_ms(t and t['ms'])} / {fmt_ms(r and r['ms'])} ms = {q:.2f}x" if q else "n/a",
                             at_least(q, STREAM_VS_TORCH)))
                packed = fastest([v for v in vs if v.get("layout") == "packed"], k)
                a, b = r and r["peak"], packed and packed["peak"]
                rows.append((f"{k}, {how}: peak memory no higher than PyTorch's packed run",
                             f"{fmt_mib(a)} vs {fmt_mib(b)} MiB",
                             at_most(a, b, " MiB") if a is not None and b is not None else "n/a"))
        raw = load_json(os.path.join(d, f"cudnn_graph_stream_{w}.json"))
        if raw and raw.get("ms_per_step") and plain:
            r = next((c for c in plain if c["ok"] and c["precision"] == raw.get("precision")
                      and c["fuse"] == ("never" if raw.get("per_layer") else "auto") and c["algo"] == raw.get("algo")),
                     None) or fastest(plain)
            q = r["ms"] / raw["ms_per_step"]
            rows.append((f"not bucketed: within {STREAM_VS_RAW:g}x of the raw cuDNN calls replayed as a graph "
                         f"({raw.get('precision')}, all {raw.get('time', 'T')} steps)",
                         f"{fmt_ms(r['ms'])} / {fmt_ms(raw['ms_per_step'])} ms = {q:.2f}x",
                         at_most(q, STREAM_VS_RAW)))
        target_table(rows, f"GPU {w} stream", out, targets, summary)


def target_table(rows, where, out, targets, summary):
    """The (what, measured, result) rows as a table; each result also into targets and summary."""
    out.append("\n| target | measured | result |")
    out.append("|---|---|---|")
    for what, meas, res in rows:
        out.append(f"| {what} | {meas} | {res} |")
        summary.append(res)
        targets.append((f"{where}: {what}", res))
    out.append("")


def torch_modes_table(variants, skipped, out):
    """PyTorch's fastest eager and fastest graphed variant, overall and per precision class, side by side."""
    if not variants or not (skipped or any(v["mode"] == "graphed" for v in variants)):
        return  # nothing graphed to compare (e.g. torch.json from before graphed mode)
    eager = [v for v in variants if v["mode"] == "eager"]
    graphed = [v for v in variants if v["mode"] == "graphed"]
    out.append("\n| PyTorch | eager: configuration | ms/step | peak MiB | graphed: configuration | ms/step | peak MiB "
               "| eager / graphed |")
    out.append("|---|---|---|---|---|---|---|---|")
    for k in (None,) + CLASSES:
        e, g = fastest(eager, k), fastest(graphed, k)
        r = ratio(e and e["ms"], g and g["ms"])
        e_cfg = f"{e['impl']} {e['precision']}" if e else "none ran"
        g_cfg = f"{g['impl']} {g['precision']}" if g else "not run" if skipped else "none ran"
        out.append(f"| fastest{'' if k is None else ' ' + k} | {e_cfg} | {fmt_ms(e and e['ms'])} | "
                   f"{fmt_mib(e and e['peak'])} | {g_cfg} | {fmt_ms(g and g['ms'])} | {fmt_mib(g and g['peak'])} | "
                   f"{f'{r:.2f}x' if r else 'n/a'} |")
    if skipped:
        out.append(f"\nPyTorch graphed: {skipped}.")


def graphs_section(d, out):
    """rnntrain's fastest candidate with CUDA graphs (plan.graphs, the default) and without, same run."""
    rows = []
    for w in GPU_WORKLOADS:
        best = fastest(rnntrain_candidates(load_json(os.path.join(d, f"rnntrain_{w}.json"))))
        off = next((c for c in rnntrain_candidates(load_json(os.path.join(d, f"nographs_{w}.json")))
                    if best and c["ok"] and c["name"] == best["name"]), None)
        if best is None or off is None:
            continue
        share = best.get("graphs")
        rows.append(f"| {w} | {rn_label(best)} | {fmt_ms(best['ms'])} | "
                    f"{'n/a' if share is None else f'{100 * share:.0f}%'} | {fmt_ms(off['ms'])} | {off['ms'] / best['ms']:.3f}x |")
    if not rows:
        return
    out.append("### CUDA graphs\n")
    out.append("rnntrain's fastest candidate as benchmarked (plan.graphs: true, the default) and again with "
               "plan.graphs: false. Graphs: the share of timed steps replayed as a CUDA graph.\n")
    out.append("| workload | candidate | ms/step | graphs | ms/step without graphs | gain |")
    out.append("|---|---|---|---|---|---|")
    out.extend(rows)
    out.append("")


def cpu_label(c):
    """" (own)" or " (onednn)" where the candidate names its plan.cpu path (rnntrain bench --cpu)."""
    parts = c["name"].split("/") if c else []
    return f" ({parts[1]})" if len(parts) == 3 and parts[0] == "cpu" else ""


def cpu_section(d, out, targets):
    m = load_machine(os.path.join(d, "machine.txt"))
    tj = load_json(os.path.join(d, "torch.json")) or {}
    tv, th = tj.get("versions", {}), tj.get("hardware", {})
    first = next((j for j in (load_json(os.path.join(d, f"rnntrain_{w}.json")) for w in CPU_WORKLOADS) if j), {})
    out.append("## CPU\n")
    out.append(f"- date: {m.get('date', tj.get('date', 'n/a'))}")
    out.append(f"- CPU: {m.get('cpu', th.get('cpu', 'n/a'))}; threads: rnntrain {first.get('hardware', {}).get('blas_threads', 'n/a')}"
               f" (OpenBLAS), PyTorch {th.get('threads', 'n/a')}")
    out.append(f"- rnntrain: {first.get('versions', {}).get('compiler', 'n/a')}; BLAS {first.get('versions', {}).get('blas', 'n/a')}; "
               f"commit {m.get('commit', 'n/a')}")
    out.append(f"- PyTorch {tv.get('torch', 'n/a')} from PyPI (CPU only at run time), Python {tv.get('python', 'n/a')}")
    out.append(f"- load average before / after: {m.get('load_before', 'n/a')} / {m.get('load_after', 'n/a')}; "
               f"timing: {m.get('timing', 'n/a')}\n")
    kj = load_json(os.path.join(d, "keras.json")) or {}
    kv = kj.get("versions", {})
    if kj:
        out.append(f"- Keras {kv.get('keras', 'n/a')} on JAX {kv.get('jax', 'n/a')} (CPU), "
                   f"{kj.get('hardware', {}).get('threads', 'n/a')} threads; model.train_on_batch after compilation\n")
    out.append("Peak MiB here is the process's peak resident memory (a high-water mark of the whole process).\n")
    out.append("| workload | rnntrain ms/step | PyTorch fused ms/step | PyTorch per-layer ms/step | Keras/JAX ms/step "
               "| peak MiB rnntrain / PyTorch / Keras | target: 1.3x PyTorch's fastest | target: 2x Keras |")
    out.append("|---|---|---|---|---|---|---|---|")
    per_class = []
    for w in CPU_WORKLOADS:
        rj = load_json(os.path.join(d, f"rnntrain_{w}.json"))
        variants = torch_variants(tj, w)
        keras = [v for v in torch_variants(kj, w) if v["ok"]]
        if rj is None and not variants:
            continue
        rn = fastest(rnntrain_candidates(rj))
        by_impl = {v["impl"]: v for v in variants if v["ok"] and v["mode"] == "eager"}
        tb = fastest(variants)
        kb = keras[0] if keras else None
        cells = []
        for what, ref, need in (("PyTorch", tb, CPU_VS_TORCH), ("Keras/JAX", kb, CPU_VS_KERAS)):
            r = ratio(ref and ref["ms"], rn and rn["ms"])
            res = at_least(r, need)
            targets.append((f"CPU {w}: rnntrain at least {need}x as fast as {what}", res))
            cells.append(f"{r:.2f}x: {res}" if r else res)
        f, p = by_impl.get("fused"), by_impl.get("per-layer")
        out.append(f"| {w} | {fmt_ms(rn and rn['ms'])}{cpu_label(rn)} | {fmt_ms(f and f['ms'])} | {fmt_ms(p and p['ms'])} | "
                   f"{fmt_ms(kb and kb['ms'])} | {fmt_mib(rn and rn['host'])} / {fmt_mib(tb and tb['peak'])} / "
                   f"{fmt_mib(kb and kb['peak'])} | {cells[0]} | {cells[1]} |")
        # Issue 35: fp32 against fp32 and bf16 against bf16 (autocast), where both ran a half precision.
        cls = {k: (fastest(rnntrain_candidates(rj), k), fastest(variants, k)) for k in CLASSES}
        if all(cls["fp16/bf16"]):
            for k, (rk, tk) in cls.items():
                r = ratio(tk and tk["ms"], rk and rk["ms"])
                res = at_least(r, CPU_VS_TORCH)
                targets.append((f"CPU {w}, {k}: rnntrain at least {CPU_VS_TORCH}x as fast as PyTorch's {k}", res))
                per_class.append(f"| {w} | {k} | {fmt_ms(rk and rk['ms'])}{cpu_label(rk)} | {fmt_ms(tk and tk['ms'])} "
                                 f"({torch_label(tk)}) | " + (f"{r:.2f}x: {res} |" if r else "n/a |"))
    out.append("")
    if per_class:
        out.append("Per precision (rnntrain's `plan.precision: bf16` runs its recurrent GEMMs in bf16, on oneDNN's "
                   "stacks or the own engine as the bracket says; PyTorch's bf16 is autocast):\n")
        out.append("| workload | precision | rnntrain ms/step | PyTorch ms/step | target: 1.3x |")
        out.append("|---|---|---|---|---|")
        out.extend(per_class)
        out.append("")


def has_json(d):
    return os.path.isdir(d) and any(f.endswith(".json") for f in os.listdir(d))


def print_cudnn_args(path):
    """The rnntrain_cudnn_bench options that match rnntrain's fastest candidate in PATH; exit 1 if none ran."""
    best = fastest(rnntrain_candidates(load_json(path) or {}))
    if best is None:
        sys.exit(f"write_results.py: {path}: no rnntrain candidate ran (missing file, or all failed)")
    # The wavefront kernels are rnntrain's own: the raw cuDNN reference for them is cuDNN's standard
    # algorithm in the same precision and fusion.
    algo = "standard" if best["algo"] == "wavefront" else best["algo"]
    print(f"--precision {best['precision']} --algo {algo}" + (" --per-layer" if best["fuse"] == "never" else ""))


def print_nographs_args(path):
    """rnntrain bench arguments that time PATH's fastest candidate's precision and algorithm; exit 1 if none ran."""
    best = fastest(rnntrain_candidates(load_json(path) or {}))
    if best is None:
        sys.exit(f"write_results.py: {path}: no rnntrain candidate ran (missing file, or all failed)")
    print(f"--precision {best['precision']} --algo {best['algo']}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                   help="the results directory, with gpu/ and cpu/ (default: bench/results)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md"),
                   help="the Markdown file to write (default: bench/RESULTS.md)")
    p.add_argument("--cudnn-args", metavar="RNNTRAIN_JSON",
                   help="print the rnntrain_cudnn_bench options of this file's winner and exit")
    p.add_argument("--winner-args", metavar="RNNTRAIN_JSON",
                   help="print the rnntrain bench arguments that time only this file's winner, and exit")
    a = p.parse_args()
    if a.cudnn_args:
        return print_cudnn_args(a.cudnn_args)
    if a.winner_args:
        return print_nographs_args(a.winner_args)
    gpu, cpu = os.path.join(a.results, "gpu"), os.path.join(a.results, "cpu")
    if not has_json(gpu) and not has_json(cpu):
        sys.exit(f"write_results.py: {a.results} has no JSON in gpu/ or cpu/: run scripts/bench_gpu.sh or scripts/bench_cpu.sh first")
    out = ["# Benchmark results (issue 5)\n",
           "Written by bench/write_results.py from bench/results/ (scripts/bench_gpu.sh, scripts/bench_cpu.sh; "
           "bench/README.md says how). Ratios compare figures taken in the same run.\n"]
    targets = []  # (what, "met" | "missed by ..." | "n/a")
    if has_json(gpu):
        gpu_section(gpu, out, targets)
    if has_json(cpu):
        cpu_section(cpu, out, targets)
    out.append("## Closing note\n")
    measured = [t for t in targets if t[1] != "n/a"]
    missed = [f"- {what}: {res}" for what, res in measured if res.startswith("missed")]
    out.append(f"Targets met: {len(measured) - len(missed)} of {len(measured)} measured "
               f"({len(targets) - len(measured)} not measured).")
    if missed:
        out.append("\nMissed:\n")
        out.extend(missed)
    notes = os.path.join(a.results, "notes.md")
    if os.path.exists(notes):
        with open(notes) as f:
            out.append("\n" + f.read().strip())
    else:
        out.append("\n(The measured reasons go in bench/results/notes.md, which is copied here.)")
    with open(a.out, "w") as f:
        f.write("\n".join(out).rstrip() + "\n")
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
