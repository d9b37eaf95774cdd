"""Turn a benchmark run into `docs/benchmarks.md` and its plot: one command regenerates both."""

from __future__ import annotations

from pathlib import Path


def _fmt_ratio(v: float) -> str:
    return f"{v:.2f}×"


def _profile_table(ops: list[dict]) -> list[str]:
    lines = ["| operator | self time (ms) | calls | share |", "|---|---:|---:|---:|"]
    for o in ops:
        lines.append(f"| `{o['op']}` | {o['self_ms']:.1f} | {o['calls']} | {o['share']:.0%} |")
    return lines


_UNFUSED = "glassformer, logits then F.cross_entropy"  # bench/training.UNFUSED (not imported: no torch here)


def _faults(side: dict) -> str:
    n = side.get("page_faults_per_step")
    return "not counted" if n is None else f"{n:,}"


def _allocator_lines(t: dict) -> list[str]:
    """Page faults per step, and the ratio again where malloc keeps freed blocks (bench/allocator.py)."""
    k = t.get("malloc_kept")
    if not k or "page_faults_per_step" not in t["glassformer"]:
        return []
    p = t["params"]
    tokens = p["batch"] * p["seq"]
    g, r = k["glassformer"], k["torch.nn.Transformer"]
    setting = ("malloc keeping freed blocks up to 1 GiB (bench/allocator.py)" if k["malloc_keeps_freed_blocks"]
               else "**glibc's mallopt is not available here, so with the default allocator again**")
    return ["", f"Page faults per step with glibc's default malloc: glassformer {_faults(t['glassformer'])},"
            f" torch.nn.Transformer {_faults(t['torch.nn.Transformer'])}. The same comparison in a fresh process"
            f" with {setting}: glassformer {tokens / g['median_s']:.0f} tokens/s ({_faults(g)} page faults per"
            f" step), torch.nn.Transformer {tokens / r['median_s']:.0f} ({_faults(r)}), **ratio {k['ratio']:.2f}×**"
            + (f"; glassformer through logits and F.cross_entropy {tokens / k[_UNFUSED]['median_s']:.0f}"
               f" ({_faults(k[_UNFUSED])}), ratio {k['ratio_unfused_loss']:.2f}×." if _UNFUSED in k else ".")]


def _side_rows(res: dict, sides: tuple[str, str], label: str) -> list[str]:
    a, b = (res[s] for s in sides)
    return [f"| {label} | {a['rate']:.0f} | {b['rate']:.0f} | {res['ratio']:.2f}× |"]


def _isa_line(m: dict) -> str:
    """Which instruction sets this run's kernels could use, and the caps it ran under."""
    if "cpu_flags" not in m:
        return ""
    caps = ", ".join(f"{k}={v}" for k, v in m["isa_env"].items()) or "none"
    return (f" CPU flags: {' '.join(m['cpu_flags']) or 'none of avx2/avx512'}; ATen kernels:"
            f" {m['aten_capability']}; oneDNN bf16: {'yes' if m['onednn_bf16'] else 'no'}; caps set: {caps}.")


def plot(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    rows = [r for r in results["targets"] if r["value"] is not None and "×" in r["goal"]]
    names = [r["target"] for r in rows]
    ax1.barh(names, [r["value"] for r in rows], color=["tab:green" if r["met"] else "tab:red" for r in rows])
    for i, r in enumerate(rows):
        goal = float(r["goal"].split()[1].rstrip("×,"))
        ax1.plot([goal, goal], [i - 0.4, i + 0.4], color="black")
    ax1.set_xlabel("ratio (bar) and target (black line)")
    ax1.invert_yaxis()
    ax1.tick_params(axis="y", labelsize=7)
    if "memory" in results:
        for impl, style in (("fast", "o-"), ("math", "s--")):
            pts = [p for p in results["memory"]["points"] if p["impl"] == impl]
            ax2.loglog([p["seq"] for p in pts], [max(p["forward_mib"], 1e-3) for p in pts], style,
                       label=f"{impl} path", base=2)
        ax2.set_xlabel("sequence length")
        ax2.set_ylabel("peak RSS of one forward (MiB)")
        ax2.legend()
        ax2.set_title("memory: linear (fast) vs quadratic (math)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _peer_lines(peer: dict) -> list[str]:
    """The CTranslate2 table (bench/peer.py): ratios per precision, tokens compared."""
    if "skipped" in peer:
        return ["", "## The peer: CTranslate2", "", f"Not run: {peer['skipped']}."]
    p = peer["params"]
    m, g = p["marian"], p["gpt2"]
    out = ["", f"## The peer: CTranslate2 {peer['ctranslate2']} (same random weights, its own converter)", "",
           f"Translator: Marian, d_model {m['d_model']}, {m['layers']} + {m['layers']} layers, vocab {m['vocab']},"
           f" source {p['src_len']} tokens, {p['mt_new']} new. LM: GPT-2, d {g['n_embd']}, {g['n_layer']} layers,"
           f" vocab {g['vocab']}, prompt {p['prompt']}, {p['lm_new']} new. intra_threads = {peer['threads']};"
           f" four sides interleaved, median of {p['repeats']}.", "",
           "| row | ours fp32 tok/s | CT2 fp32 tok/s | ours / CT2 fp32 | ours int8 tok/s | CT2 int8 tok/s |"
           " ours / CT2 int8 | tokens fp32 = CT2 | tokens int8 = CT2 | our int8 = our fp32 |"
           " next token, same prefix: our int8 = our fp32 | CT2 int8 = CT2 fp32 |",
           "|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|"]
    for name, r in peer["rows"].items():
        s = r["sides"]
        rows = lambda k: f"{r[k]['rows_equal']}/{r[k]['rows']} rows, {r[k]['token_agreement']:.1%}"  # noqa: E731
        prefix = lambda a: "—" if a.get("same_prefix_agreement") is None else f"{a['same_prefix_agreement']:.1%}"  # noqa: E731
        out.append(f"| {name} | {s['ours fp32']['tokens_per_s']:.0f} | {s['CT2 fp32']['tokens_per_s']:.0f} |"
                   f" {r['ratio_fp32']:.2f}× | {s['ours int8']['tokens_per_s']:.0f} | {s['CT2 int8']['tokens_per_s']:.0f} |"
                   f" {r['ratio_int8']:.2f}× | {rows('tokens_fp32')} | {rows('tokens_int8')} | {rows('int8_vs_fp32')} |"
                   f" {prefix(r['int8_vs_fp32'])} | {prefix(r['ct2_int8_vs_fp32'])} |")
    return out


def markdown(results: dict, command: str, plot_name: str | None) -> str:
    m = results["machine"]
    out = ["# Benchmarks", "",
           f"Produced by `{command}` on {results['started']} in {results['seconds'] / 60:.1f} min.",
           f"Machine: {m['cpu']}, {m['torch_threads']} torch threads, torch {m['torch']}, Python {m['python']}."
           + _isa_line(m)
           + (f" Load average (other work on the same 2 cores) {m['load_average']:.1f} at the start,"
              f" {m.get('load_average_end', float('nan')):.1f} at the end." if "load_average" in m else ""),
           "",
           "Every comparison runs both sides in one process, interleaved (A B, B A, ...), and reports medians;"
           " the ratio of two medians measured together is the result, because absolute times on these"
           " machines drift 15–30 % between runs. Ratios > 1 mean glassformer is faster, except the trace row"
           " (how many times slower a full trace is than the fast path).", "",
           "## Targets", "", "| target | measured | goal | met |", "|---|---:|---|---|"]
    for r in results["targets"]:
        v = r["value"]
        # a fraction where the goal's first clause is one ("≥ 80 %"); "≥ 1.0×, ≥ 95 % of …" is a ratio
        fraction = r["goal"].split(",")[0].strip().endswith("%")
        shown = f"{v:.0%}" if fraction else (f"{v:.2f}" if "linear" in r["goal"] else _fmt_ratio(v))
        out.append(f"| {r['target']} | {shown} | {r['goal']} | {'yes' if r['met'] else '**no**'} |")
    if plot_name:
        out += ["", f"![ratios and memory]({plot_name})"]
    if "encoder" in results:
        e = results["encoder"]
        p = e["params"]
        out += ["", "## Encoder forward: MiniLM vs Hugging Face `BertModel` (sdpa)", "",
                f"Same all-MiniLM-L6-v2 weights (max abs difference {e['max_abs_diff']:.1e}),"
                f" batch {p['batch']} × {p['seq']} tokens, inference mode.", "",
                "| | glassformer tokens/s | HF tokens/s | ratio |", "|---|---:|---:|---:|"]
        out += _side_rows(e, ("glassformer", "HF BertModel (sdpa)"), "forward")
    for key, title in (("training", "fp32"), ("training_bf16", "bf16 autocast")):
        if key in results and "skipped" in results[key]:
            out += ["", f"## Training step ({title})", "", f"Not run: {results[key]['skipped']}."]
        elif key in results:
            t = results[key]
            p = t["params"]
            out += ["", f"## Training step ({title}): encoder-decoder vs `torch.nn.Transformer`", "",
                    f"d_model {p['d_model']}, {p['n_heads']} heads, {p['n_layers']} + {p['n_layers']} layers,"
                    f" d_ff {p['d_ff']}, vocab {p['vocab']}, batch {p['batch']} × {p['seq']} (source and target);"
                    f" forward, cross-entropy, backward, Adam. {t['glassformer_params']:,} parameters on both sides."
                    f" Model FLOPs per step {t['step_flops'] / 1e9:.1f} G; {t['precision']} matmul peak measured in"
                    f" the same run (1024² matmul, best of 10 calls, the faster library): {t['peak_flops'] / 1e9:.0f} GFLOP/s ("
                    + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in t["peaks"].items() if k != "peak") + ").", "",
                    "| | target tokens/s | MFU |", "|---|---:|---:|",
                    f"| glassformer | {t['glassformer']['rate']:.0f} | {t['glassformer']['mfu']:.0%} |",
                    f"| torch.nn.Transformer | {t['torch.nn.Transformer']['rate']:.0f} |"
                    f" {t['torch.nn.Transformer']['mfu']:.0%} |",
                    f"| ratio | {t['ratio']:.2f}× | |"]
            unfused = _UNFUSED
            if unfused in t:  # what the fused loss (nn/loss.py) contributes to the ratio
                out += [f"| {unfused} | {t[unfused]['rate']:.0f} | {t[unfused]['mfu']:.0%} |",
                        f"| its ratio to torch.nn.Transformer | {t['ratio_unfused_loss']:.2f}× | |", "",
                        "glassformer computes its loss as its trainer does (`targets=`, nn/loss.py): the output"
                        " head fused with the cross-entropy, a slice of rows at a time, no (tokens × vocab)"
                        " logits; the last rows time the same model through logits and F.cross_entropy."]
            out += _allocator_lines(t)
    if "generation" in results:
        g = results["generation"]
        p = g["params"]
        out += ["", "## Greedy decoding: decoder-only vs Hugging Face GPT-2 (same random weights)", "",
                f"{p['n_layer']} layers, {p['n_embd']} wide, {p['n_head']} heads, vocab {p['vocab']}"
                f" ({g['model_params'] / 1e6:.1f} M parameters); prompt {p['prompt']} tokens,"
                f" {p['new_tokens']} new tokens, KV cache on both sides.", "",
                "| batch | glassformer tokens/s | HF tokens/s | ratio | identical tokens |",
                "|---:|---:|---:|---:|---|"]
        for key in [k for k in g if k.startswith("batch_") and not k.endswith("_1_thread")]:
            r = g[key]
            out.append(f"| {key.split('_')[1]} | {r['glassformer']['rate']:.0f} | {r['HF GPT-2']['rate']:.0f} |"
                       f" {r['ratio']:.2f}× | {'yes' if r['identical_tokens'] else '**no**'} |")
        for key in [k for k in g if k.endswith("_1_thread")]:
            r = g[key]
            out.append(f"| {key.split('_')[1]}, 1 thread | {r['glassformer']['rate']:.0f} | {r['HF GPT-2']['rate']:.0f} |"
                       f" {r['ratio']:.2f}× | (same runs' tokens) |")
        if "bound" in g.get("batch_1", {}):
            b = g["batch_1"]["bound"]
            cache = ("" if b.get("l3_bytes") is None else
                     f" The {b['weight_bytes'] / 1e6:.0f} MB of weights {'fit in' if b['in_cache'] else 'exceed'} the"
                     f" {b['l3_bytes'] / 2 ** 20:.0f} MiB last-level cache"
                     f"{': the pass is a cache bound, not a memory one' if b['in_cache'] else ''}.")
            over = (" **Above 100%: the pass is not a bound on this machine in this run.**" if b["fraction"] > 1 else "")
            unprepared = ("" if "fraction_unprepared" not in b else
                          f" The same generation paying its weight copies itself (no prepared scope around it):"
                          f" {b['decode_s_per_token_unprepared'] * 1e3:.2f} ms, {b['fraction_unprepared']:.0%}.")
            out += ["", f"Weight-streaming bound, measured interleaved with the batch-1 loop: one"
                    f" pass over the weights a step reads whole (all but the position table; the fastest of"
                    f" torch.mv, oneDNN's matrix-vector product and a sum over them: {b.get('stream_kernel', 'torch.mv')}) takes"
                    f" {b['stream_s_per_token'] * 1e3:.2f} ms ({b['stream_GB_per_s']:.1f} GB/s)"
                    + ("" if b.get("bound_read", "one pass") == "one pass" else
                       f"; read matrix by matrix in the step's order they took {b['bound_s_per_token'] * 1e3:.2f} ms,"
                       f" the faster read and so the bound") + "; glassformer decodes"
                    f" a token in {b['decode_s_per_token'] * 1e3:.2f} ms with its weights prepared once,"
                    f" **{b['fraction']:.0%} of the bound** (HF GPT-2 {b['hf_fraction']:.0%}, from its own runs"
                    f" above).{unprepared}{cache}{over}"]
            if "products_s_per_token" in b:
                prod, sums, dec = b["products_s_per_token"], b["matrix_sums_s_per_token"], b["decode_s_per_token"]
                out += ["", f"Where the rest goes (same rounds): the step's {b['product_bytes'] / 1e6:.0f} MB of"
                        f" products alone, one after another on their routes ({', '.join(b['product_routes'])})"
                        f" with nothing between them, take {prod * 1e3:.2f} ms a token"
                        f" ({b['product_bytes'] / prod / 1e9:.1f} GB/s); a sum over each of their matrices in the"
                        f" same order {sums * 1e3:.2f} ms ({b['product_bytes'] / sums / 1e9:.1f} GB/s). So the"
                        f" pass cut into the step's pieces costs {sums / b['stream_s_per_token']:.2f}× the pass,"
                        f" the products read at {sums / prod:.0%} of the sums' speed, and what lies between them"
                        f" (attention, norms, activation, residual adds, Python) takes"
                        f" {(dec - prod) * 1e3:.2f} ms a token ({(dec - prod) / dec:.0%} of the loop)."]
        c = g["cache_vs_no_cache"]
        out += ["", f"KV cache vs recomputing the prefix each step (batch 1, {p['new_tokens']} tokens):"
                f" {c['cache']['rate']:.0f} vs {c['no cache']['rate']:.0f} tokens/s, {c['ratio']:.1f}×,"
                f" identical tokens: {'yes' if c['identical_tokens'] else '**no**'}."]
    if "peer" in results:
        out += _peer_lines(results["peer"])
    if "trace" in results:
        t = results["trace"]
        p = t["params"]
        out += ["", "## Trace overhead", "",
                f"MiniLM-shaped encoder, batch {p['batch']} × {p['seq']}: the full trace records"
                f" {t['traced_tensors']} tensors ({t['traced_mib']:.0f} MiB) on the explicit-math path.", "",
                f"fast path {t['fast path']['median_s'] * 1e3:.0f} ms, full trace {t['full trace']['median_s'] * 1e3:.0f} ms"
                f" per forward: {t['ratio']:.2f}× slower."]
    if "memory" in results:
        mem = results["memory"]
        out += ["", "## Memory of one forward (fresh process per point)", "",
                f"Encoder d_model {mem['model']['d_model']}, {mem['model']['n_heads']} heads,"
                f" {mem['model']['n_layers']} layers, batch 1. Peak RSS minus the RSS before the forward.", "",
                "| seq | fast path (MiB) | math path (MiB) |", "|---:|---:|---:|"]
        by = {(p["seq"], p["impl"]): p["forward_mib"] for p in mem["points"]}
        for seq in sorted({p["seq"] for p in mem["points"]}):
            out.append(f"| {seq} | {by[(seq, 'fast')]:.0f} | {by[(seq, 'math')]:.0f} |")
        out += ["", f"Growth exponent (least-squares slope of log memory on log length): fast {mem['fast_growth_exponent']:.2f},"
                f" math {mem['math_growth_exponent']:.2f} (1 = linear, 2 = quadratic)."]
    if "compile" in results:
        c = results["compile"]
        out += ["", "## torch.compile (option, not the default)", ""]
        if "error" in c:
            out.append(f"torch.compile did not run here: {c['error']}")
        elif "skipped" not in c:
            p = c["params"]
            out.append(f"MiniLM-shaped encoder, batch {p['batch']} × {p['seq']}: compiling took {c['compile_s']:.0f} s;"
                       f" compiled {c['compiled']['median_s'] * 1e3:.0f} ms vs eager {c['eager']['median_s'] * 1e3:.0f} ms"
                       f" per forward ({c['ratio']:.2f}×), max abs difference {c['max_abs_diff']:.1e}.")
    if results.get("gemm_routes"):
        out += ["", "## GEMM routes this run measured (`nn/routes.py`: first product of each shape class,"
                " best of 3 per route; training rows time the forward and both backward GEMMs)", "",
                "| rows ≤ | K | N | threads | timed | oneDNN µs | BLAS µs | faster |",
                "|---:|---:|---:|---:|---|---:|---:|---|"]
        for r in results["gemm_routes"]:
            timed = "fwd + bwd" if r.get("training") else "forward"
            out.append(f"| {r['rows']} | {r['K']} | {r['N']} | {r['threads']} | {timed} | {r.get('onednn_us', '')} |"
                       f" {r.get('blas_us', '')} | {r['winner']} |")
    if results.get("decode_routes"):
        out += ["", "## Decode-step GEMM routes (`nn/decode_gemm.py`: best of 3 per route; where the model"
                " outgrows the cache, each route timed cycling over copies of W twice the cache's size;"
                " glassformer's GEMV kernel, nn/gemv.py, where it was built)", "",
                "| rows ≤ | K | N | threads | W from memory | BLAS µs | oneDNN µs | oneDNN packed µs | oneDNN blocked µs"
                " | glassformer GEMV µs | faster |",
                "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
        for r in results["decode_routes"]:
            out.append(f"| {r['rows']} | {r['K']} | {r['N']} | {r['threads']} | {'yes' if r['streams'] else 'no'} |"
                       f" {r.get('blas_us', '')} | {r.get('onednn_us', '')} | {r.get('onednn_packed_us', '')} |"
                       f" {r.get('onednn_blocked_us', '')} | {r.get('gemv_us', '')} | {r['winner']} |")
    if results.get("int8_routes"):
        out += ["", "## int8 kernels (`nn/precision.py`: best of 3 per kernel on each shape class)", "",
                "| rows ≤ | K | N | threads | fbgemm µs | int8pack µs | dequant µs | faster |",
                "|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in results["int8_routes"]:
            out.append(f"| {r['rows']} | {r['K']} | {r['N']} | {r['threads']} | {r.get('fbgemm_us', '')} |"
                       f" {r.get('int8pack_us', '')} | {r.get('dequant_us', '')} | {r['winner']} |")
    profiles = [(k, results[k]["profile"]) for k in ("encoder", "training", "trace") if k in results]
    if "generation" in results:
        profiles += [(f"generation {k.replace('_', ' ')}", v["profile"]) for k, v in results["generation"].items()
                     if isinstance(v, dict) and "profile" in v]
    if profiles:
        out += ["", "## Where glassformer's time goes (torch.profiler, one call, self CPU time)"]
        for name, ops in profiles:
            out += ["", f"### {name}", ""] + _profile_table(ops)
    return "\n".join(out) + "\n"


def write(results: dict, path: Path, command: str, notes: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    plot_path = path.with_suffix(".png")
    plot(results, plot_path)
    text = markdown(results, command, plot_path.name)
    if notes:
        text += "\n" + notes.strip() + "\n"
    path.write_text(text, encoding="utf-8")
