"""`glassformer train`: train a translator or a language model into a run folder.

    glassformer train --task zh-en --max-minutes 4
    glassformer train --task tsv --data pairs.tsv --out runs/mine --d-model 128 --norm-position pre
    glassformer train --task lm --data book.txt --out runs/lm --max-steps 2000
    glassformer train --task zh-en --out runs/zh-en --resume          # continue exactly
    glassformer train --task zh-en --out runs/zh-en --force           # replace the run there

An existing run in --out is never replaced without --force; Ctrl-C saves and prints the --resume command.

User data (tsv, lm) is trained with `--recipe auto` unless told otherwise: settings chosen from
the data and printed with the reasons (train/recipe.py); `--recipe paper` is the 2017 setup.

Every ModelConfig variant has a flag; an impossible combination stops with ConfigError's line.
"""

from __future__ import annotations

from typing import Optional

import typer

# flag name -> ModelConfig field, for the model options passed through as overrides
MODEL_FLAGS = {
    "d_model": "d_model", "heads": "n_heads", "d_k": "d_k", "layers": "n_layers", "dec_layers": "n_dec_layers",
    "d_ff": "d_ff", "activation": "activation", "norm": "norm", "norm_eps": "norm_eps",
    "norm_position": "norm_position", "final_norm": "final_norm", "embed_norm": "embed_norm",
    "residual": "residual", "pe": "pe", "pe_combine": "pe_combine", "d_pos": "d_pos", "max_len": "max_len",
    "embed_scale": "embed_scale", "scale_scores": "scale_scores", "attn_bias": "attn_bias",
    "ffn_bias": "ffn_bias", "head_bias": "head_bias", "tie": "tie_embeddings", "share": "share_embeddings",
    "dropout": "dropout", "attn_dropout": "attn_dropout", "attn_impl": "attn_impl",
}

M = "Model"  # help panels
T = "Training"


def register(app: typer.Typer) -> None:
    @app.command()
    def train(
        ctx: typer.Context,
        task: Optional[str] = typer.Option(None, help="zh-en (default) | copy | reverse | sort | add | tsv | lm; "
                                                     "with --resume: the run's own"),
        data: Optional[str] = typer.Option(None, help="data file: TSV pairs (tsv) or text lines (lm)"),
        out: Optional[str] = typer.Option(None, help="run folder (default runs/<task>)"),
        max_minutes: Optional[float] = typer.Option(None, help="stop after this many minutes"),
        max_steps: Optional[int] = typer.Option(None, help="stop after this many optimiser steps"),
        seed: int = typer.Option(0, help="seed for data, initialisation, batching and dropout"),
        resume: bool = typer.Option(False, "--resume", help="continue the run in --out exactly"),
        force: bool = typer.Option(False, "--force", help="replace a run already in --out (default: refuse)"),
        recipe: str = typer.Option("auto", help="auto (chosen from the data; tsv and lm) | paper (2017)"),
        tokenizer: Optional[str] = typer.Option(None, help="char | word | jieba | bpe | unigram"),
        vocab_size: Optional[int] = typer.Option(None, help="vocabulary size for bpe / unigram"),
        batch_size: Optional[int] = typer.Option(None, rich_help_panel=T,
                                                 help="sequences per micro-batch (default 64; auto: 32 for a small LM)"),
        accum_steps: int = typer.Option(1, rich_help_panel=T, help="micro-batches per optimiser step"),
        block_size: Optional[int] = typer.Option(
            None, rich_help_panel=T, help="tokens per window (lm; default 128, auto recipe's small LM: 64)"),
        schedule: Optional[str] = typer.Option(None, rich_help_panel=T,
                                               help="noam (paper §5.3) | rsqrt | cosine | wsd | constant"),
        lr: Optional[float] = typer.Option(None, rich_help_panel=T, help="peak rate for rsqrt / cosine / wsd / constant"),
        noam_factor: float = typer.Option(1.0, rich_help_panel=T, help="multiplies the noam rate"),
        warmup: Optional[int] = typer.Option(None, rich_help_panel=T, help="warmup steps (default 400)"),
        label_smoothing: Optional[float] = typer.Option(
            None, rich_help_panel=T, help="ε_ls (paper §5.4 and default: 0.1; auto recipe for an LM: 0)"),
        clip_norm: float = typer.Option(1.0, rich_help_panel=T, help="gradient-norm clip (0: off)"),
        weight_decay: float = typer.Option(0.01, rich_help_panel=T, help="AdamW weight decay"),
        bf16: Optional[bool] = typer.Option(None, "--bf16/--no-bf16", rich_help_panel=T,
                                            help="bfloat16 autocast (default off; auto: by CPU and model)"),
        device: str = typer.Option("cpu", rich_help_panel=T, help="cpu | cuda | cuda:N"),
        threads: Optional[int] = typer.Option(None, rich_help_panel=T,
                                              help="CPU threads (default: 1 for built-in tasks, else PyTorch's)"),
        eval_every: int = typer.Option(200, rich_help_panel=T, help="evaluate every N steps"),
        eval_size: int = typer.Option(500, rich_help_panel=T,
                                      help="held-out examples per evaluation (at most; all of them if fewer)"),
        patience: Optional[int] = typer.Option(None, rich_help_panel=T,
                                               help="evaluations in a row with neither a better score nor a lower "
                                                    "valid loss that stop the run (wsd: start its decay; 0: off;"
                                                    " default 5, auto 10)"),
        stop_at: Optional[float] = typer.Option(None, rich_help_panel=T, help="stop at this exact match"),
        average_last: Optional[int] = typer.Option(
            None, rich_help_panel=T, help="average the last N evaluations' weights at the end (paper §6.1: 5);"
                                          " best/ keeps the mean if it validates better"),
        quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
        d_model: Optional[int] = typer.Option(None, rich_help_panel=M),
        heads: Optional[int] = typer.Option(None, rich_help_panel=M, help="n_heads"),
        d_k: Optional[int] = typer.Option(None, rich_help_panel=M, help="per-head width (default d_model/heads)"),
        layers: Optional[int] = typer.Option(None, rich_help_panel=M, help="encoder (or LM) layers"),
        dec_layers: Optional[int] = typer.Option(None, rich_help_panel=M, help="decoder layers"),
        d_ff: Optional[int] = typer.Option(None, rich_help_panel=M),
        activation: Optional[str] = typer.Option(None, rich_help_panel=M,
                                                 help="relu | gelu | gelu_tanh | silu | swiglu | geglu | reglu"),
        norm: Optional[str] = typer.Option(None, rich_help_panel=M, help="layernorm | rmsnorm | batchnorm | none"),
        norm_eps: Optional[float] = typer.Option(None, rich_help_panel=M),
        norm_position: Optional[str] = typer.Option(None, rich_help_panel=M, help="post (paper) | pre"),
        final_norm: Optional[bool] = typer.Option(None, "--final-norm/--no-final-norm", rich_help_panel=M),
        embed_norm: Optional[bool] = typer.Option(None, "--embed-norm/--no-embed-norm", rich_help_panel=M),
        residual: Optional[bool] = typer.Option(None, "--residual/--no-residual", rich_help_panel=M),
        pe: Optional[str] = typer.Option(
            None, rich_help_panel=M, help="sinusoidal | sinusoidal_half | learned | relative | rope | alibi | none"),
        pe_combine: Optional[str] = typer.Option(None, rich_help_panel=M, help="add | concat"),
        d_pos: Optional[int] = typer.Option(None, rich_help_panel=M, help="PE width with --pe-combine concat"),
        max_len: Optional[int] = typer.Option(None, rich_help_panel=M, help="learned position table size"),
        embed_scale: Optional[bool] = typer.Option(None, "--embed-scale/--no-embed-scale", rich_help_panel=M),
        scale_scores: Optional[bool] = typer.Option(None, "--scale-scores/--no-scale-scores", rich_help_panel=M),
        attn_bias: Optional[bool] = typer.Option(None, "--attn-bias/--no-attn-bias", rich_help_panel=M),
        ffn_bias: Optional[bool] = typer.Option(None, "--ffn-bias/--no-ffn-bias", rich_help_panel=M),
        head_bias: Optional[bool] = typer.Option(None, "--head-bias/--no-head-bias", rich_help_panel=M),
        tie: Optional[bool] = typer.Option(None, "--tie/--no-tie", rich_help_panel=M,
                                           help="output projection shares the embedding"),
        share: Optional[bool] = typer.Option(None, "--share/--no-share", rich_help_panel=M,
                                             help="source and target share one embedding"),
        dropout: Optional[float] = typer.Option(None, rich_help_panel=M),
        attn_dropout: Optional[float] = typer.Option(None, rich_help_panel=M),
        attn_impl: Optional[str] = typer.Option(None, rich_help_panel=M, help="fast | math"),
    ) -> None:
        """Train a model (translator or language model) into a run folder; --resume continues it."""
        from ..errors import InputError
        from ..train import TrainConfig, train as run_training

        values = locals()
        if resume:  # a resumed run trains on as it was set up: say which flags that leaves unused
            _note_ignored_on_resume(ctx)
        # the flags whose 0 means "off": a negative value is neither, so name both right answers
        if patience is not None and patience < 0:
            raise InputError(f"--patience {patience}: give 0 (early stopping off) or a positive number of evaluations")
        if clip_norm < 0:
            raise InputError(f"--clip-norm {clip_norm}: give 0 (no clipping) or a positive gradient norm")
        if resume and out:  # --resume without --task/--data continues the run's own
            from ..train.run_folder import saved_train_config
            was = saved_train_config(out)
            task, data = task or was.get("task"), data or was.get("data")
        task = task or "zh-en"
        overrides = {field: values[flag] for flag, field in MODEL_FLAGS.items() if values[flag] is not None}
        chosen = dict(schedule=schedule, lr=lr, warmup=warmup, patience=patience, tokenizer=tokenizer,
                      vocab_size=vocab_size, threads=threads, batch_size=batch_size, bf16=bf16,
                      label_smoothing=label_smoothing, block_size=block_size)
        fixed = {k: v for k, v in chosen.items() if v is not None}
        if fixed.get("patience") == 0:
            fixed["patience"] = None  # 0 turns early stopping off
        given = set(fixed)
        paper = dict(schedule="noam", lr=1e-3, warmup=400, patience=5, recipe="paper", bf16=False,
                     label_smoothing=0.1, block_size=128)
        cfg = TrainConfig(
            task=task, data=data, out=out or f"runs/{task}", seed=seed, max_steps=max_steps,
            max_minutes=max_minutes, accum_steps=accum_steps,
            noam_factor=noam_factor, clip_norm=clip_norm or None,
            weight_decay=weight_decay, device=device, eval_every=eval_every,
            eval_size=eval_size, stop_at=stop_at, average_last=average_last, quiet=quiet,
            **{**paper, **fixed})
        from ..limits import check_device
        check_device(cfg.device)  # before the auto recipe, whose speed probe runs on it
        if not resume:  # and a folder that holds a run is refused before the recipe's seconds are spent
            from pathlib import Path

            from ..train.run_folder import guard_new_run
            guard_new_run(Path(cfg.out), force)
        if recipe not in ("auto", "paper"):
            from ..errors import ConfigError
            raise ConfigError(f"--recipe {recipe!r} is not one of auto, paper")
        if recipe == "auto" and task in ("tsv", "lm") and not resume:
            from ..train.recipe import choose
            from ..train.tasks import raw_splits
            # sized and probed as the run will train (the clip too: --clip-norm 0 spares the probe's steps it)
            r = choose(task, raw_splits(cfg), max_minutes, max_steps, device=cfg.device,
                       given={**fixed, **overrides, "clip_norm": cfg.clip_norm})
            # threads given on the command line are kept, and not re-checked either
            cfg = cfg.replace(**{k: v for k, v in r.train.items()
                                 if k not in given and not (k == "threads_auto" and "threads" in given)})
            overrides = {**r.model, **overrides}
            if _is_rank0():
                flags = {f for f in MODEL_FLAGS if values[f] is not None} | given
                from ._arguments import flag_as_typed  # --no-bf16 as typed, not --bf16
                typer.echo(r.block({"--" + f.replace("_", "-"): flag_as_typed(ctx, f) for f in flags}))
        if cfg.bf16 and cfg.device.startswith("cpu"):
            from ..nn.routes import onednn_bf16
            if not onednn_bf16():  # issue 11: say so once; autocast still runs, never a crash
                typer.echo("note: this CPU has no native bf16 (AVX512_BF16 or AMX); --bf16 runs emulated"
                           " and is likely slower than float32 here", err=True)
        if not resume:  # every flag given is read by this run, or the run is refused (the class of --resume's)
            _check_flags_used(ctx, cfg, overrides, recipe)
        result = run_training(cfg, resume=resume, model_overrides=overrides, force=force)
        if _is_rank0():  # under torchrun only rank 0 reports
            print_summary(result)


# what --resume takes from the command line; every other flag is the run's own (train/loop.py rebuilds
# the TrainConfig from checkpoint/, the model from its config.json)
RESUME_READS = {"task", "data", "out", "max_minutes", "max_steps", "resume", "quiet"}


def _given(ctx) -> set[str]:
    """Every parameter typed on the command line (not left at its default)."""
    from ._arguments import given
    return set(given(ctx, *(p.name for p in ctx.command.params)))


def _note_ignored_on_resume(ctx) -> None:
    """One line naming every flag given with --resume that the resumed run does not use (the model's
    flags, the schedule's, --average-last ...): a flag must never look as if it took effect."""
    from ._arguments import flag_as_typed

    names = [p.name for p in ctx.command.params]
    ignored = [flag_as_typed(ctx, name) for name in sorted(_given(ctx) - RESUME_READS, key=names.index)]
    if ignored:
        typer.echo(f"note: --resume continues the run with its own model and training settings; ignoring "
                   f"{', '.join(ignored)} (to change them, start a new run with another --out, or --force)",
                   err=True)


def _check_flags_used(ctx, cfg, overrides: dict, recipe: str) -> None:
    """Refuse a flag this run would not read, in one line with what would be right: a flag that does
    nothing must not look as if it had taken effect. `overrides` is the model's fields as the run will
    build them (the recipe's choices under the flags); ModelConfig and TrainConfig refuse the rest."""
    from ..config import ModelConfig
    from ..errors import ConfigError
    from ._arguments import typed

    def final(field: str):  # the model field as the run will build it
        return overrides.get(field, ModelConfig.__dataclass_fields__[field].default)

    schedule, lm = cfg.schedule, cfg.task == "lm"
    rules = [  # (parameter, unused when, what to say after the flag)
        ("lr", schedule == "noam", "is not read by the noam schedule, which computes its own rate, d_model^-0.5 · "
         "min(step^-0.5, step · warmup^-1.5) (paper §5.3): scale that with --noam-factor, or choose --schedule "
         "rsqrt, cosine, wsd or constant, whose peak --lr sets"),
        ("noam_factor", schedule != "noam", f"scales only the noam schedule; this run's is {schedule}, whose peak "
         "--lr sets"),
        ("warmup", schedule == "constant", "is not read by --schedule constant, which holds one rate from the first "
         "step; for a warmup then a held rate use --schedule wsd (or rsqrt, cosine)"),
        ("warmup", cfg.max_steps is not None and cfg.warmup > cfg.max_steps,
         f"is longer than the run (--max-steps {cfg.max_steps}), which would stop before its rate "
         "reached the peak; give a shorter --warmup"),
        ("block_size", not lm, "sets a language model's window (--task lm); a translator trains on whole pairs"),
        ("recipe", recipe == "auto" and cfg.task not in ("tsv", "lm"),
         f"chooses its settings from a data file (--task tsv or lm); task {cfg.task} trains with the paper's "
         "(--recipe paper), and every flag still overrides them"),
        ("share", lm, "chooses whether an encoder-decoder's source and target share one embedding; a language "
         "model has one table (--tie/--no-tie ties the output projection to it)"),
        ("max_len", final("pe") != "learned", f"sizes a learned position table (--pe learned); pe {final('pe')} "
         "has none and reads any position up to the sequence limit"),
        ("norm_eps", final("norm") == "none", "has nothing to act on: --norm none has no normalisation"),
        ("final_norm", final("norm") == "none", "has nothing to act on: --norm none has no normalisation"),
    ]
    given = _given(ctx)
    for name, unused, why in rules:
        if name in given and unused:
            raise ConfigError(f"{typed(ctx, name)} {why}")


def _is_rank0() -> bool:
    import os
    return int(os.environ.get("RANK", "0")) == 0


def print_summary(result) -> None:
    """Where the run is and how well its best model does on the test split."""
    t = result.test
    line = f"stopped after {result.step} steps ({result.stop_reason}, {result.elapsed_s:.0f} s)"
    typer.echo(line)
    if result.selection:  # train/selection.py: an earlier best/ against the last model
        from ..train.selection import summary as selection_summary
        typer.echo(selection_summary(result.selection))
    r = result.reloaded
    if r and r.get("equal_to_logged"):  # a mismatch was printed as a warning already
        typer.echo(f"best/ read back from disk scores what was logged for it: valid loss {r['loss']:.4f}"
                   + (f", exact match {100 * r['exact_match']:.1f}%" if "exact_match" in r else ""))
    if t:
        parts = [f"test loss {t['loss']:.4f}", f"perplexity {t['ppl']:.2f}"]
        if "exact_match" in t:
            parts.append(f"exact match {100 * t['exact_match']:.1f}% of {t['n']}")
        if "bleu" in t:
            on_chars = " (on characters)" if t.get("bleu_by") == "char" else ""
            parts += [f"BLEU {t['bleu']:.1f}{on_chars}", f"chrF {t['chrf']:.1f}"]
        typer.echo("  ".join(parts))
        if result.baseline is not None:  # issue 32 §5: the score beside the data's simple baseline
            from ..train.baselines import line
            typer.echo(line(t, result.baseline))
    if result.averaged:  # --average-last: what the mean scored, and which weights best/ holds
        from ..train.averaging import summary
        typer.echo(summary(result.averaged, result.averaged.get("monitor", "loss")))
    if result.verdict:
        typer.echo(result.verdict["text"])
    d = result.run_dir
    kept = ", averaged/ = the mean" if result.averaged and not result.averaged.get("too_few") else ""
    typer.echo(f"run folder: {d}/  (best/ = best model, checkpoint/ = resumable{kept}, metrics.jsonl, loss.png)")
