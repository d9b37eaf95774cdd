"""The explorer's second set of endpoints: the lesson, the neuron view, interventions, live generation.

    POST /api/lesson     {sentence, model, lang}            seed 000 ch. 7 step by step, narrated
    POST /api/neuron     {sentence, model, layer, query, key}   per-dimension q·k of one pair, per head
    POST /api/intervene  {sentence, model, heads, ffns}     patterns and output with parts switched off,
                                                            the logit lens per decoder layer
    POST /api/generate   {sentence, model, strategy, ...}   decoding step by step (top k, attention, beam tree);
                                                            with "stream": true one JSON line per step, live

Mounted by `create_app` next to /api/trace; every request names a registry model, never a path,
and a mistake is a 4xx with one line saying what would be right.
"""

from __future__ import annotations

import json
from typing import Iterator, Literal, Optional

from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from ..errors import GlassformerError
from .guard import scrub_paths
from .models import _LOCK, DEFAULT_MODEL, ModelRegistry, _steps
from .subjects import prepare

MAX_NEW_TOKENS = 48


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sentence: str = Field(min_length=1, max_length=2000, description="Text to run.")
    model: Optional[str] = Field(default=None, description=f"A name from GET /api/models (default {DEFAULT_MODEL!r}).")


class LessonRequest(_Request):
    lang: Literal["en", "zh"] = Field(default="en", description="Narration language.")
    max_cols: int = Field(default=64, ge=1, le=4096,
                          description="Columns sent per table (MiniLM's FFN has 1536); `cols_total` says how many exist.")


class NeuronRequest(_Request):
    layer: int = Field(ge=0, description="Self-attention layer.")
    query: int = Field(ge=0, description="Query position.")
    key: int = Field(ge=0, description="Key position.")


class InterveneRequest(_Request):
    heads: list[tuple[str, int]] = Field(default=[], max_length=256,
                                         description='Heads to switch off: [["enc.0.attn", 1], ...].')
    ffns: list[str] = Field(default=[], max_length=64, description='FFNs to switch off: ["enc.1.ffn", ...].')
    how: Literal["zero", "mean"] = Field(default="zero", description="Replace with 0 or with the mean over "
                                                                     "this sentence's positions (interp.ablate).")


class GenerateRequest(InterveneRequest):
    strategy: Literal["greedy", "sample", "beam"] = "greedy"
    max_new_tokens: int = Field(default=24, ge=1, le=MAX_NEW_TOKENS)
    temperature: float = Field(default=1.0, gt=0.0, le=10.0)
    top_k: int = Field(default=5, ge=1, le=50, description="Next-token probabilities shown per step.")
    beam_size: int = Field(default=3, ge=1, le=8)
    length_penalty: float = Field(default=1.0, ge=0.0, le=5.0)
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description="Seed of the sampler (0..2^32-1, as the CLI's).")
    stream: bool = Field(default=False, description="Answer one JSON line per step as it is decoded "
                                                    "(application/x-ndjson): start, step…, done.")


def router(registry: ModelRegistry) -> APIRouter:
    r = APIRouter()

    def run(req: _Request, work):
        """Prepare the model, run `work(prepared)` under the registry's lock, map errors to 4xx."""
        name = req.model or DEFAULT_MODEL
        if not req.sentence.strip():
            raise HTTPException(422, "sentence is empty; type at least one word")
        try:
            registry.check(name)
        except KeyError as e:
            raise HTTPException(404, str(e.args[0])) from None
        try:
            with _LOCK:
                return work(name)
        except GlassformerError as e:  # issue 16: no folder of this machine in an answer
            raise HTTPException(422, scrub_paths(str(e), registry.runs_dir)) from None

    @r.post("/api/lesson")
    def lesson(req: LessonRequest) -> dict:
        """Seed 000 ch. 7's steps for the sentence, each with formula, shape, tables and narration."""
        def work(name):
            from ..walkthrough import build
            from ..walkthrough.build import build_loaded
            if name == DEFAULT_MODEL:
                result = build(req.sentence, random_embeddings=True)
            elif name.startswith("run:"):  # the checkpoint's own float64 walk, as `walkthrough --ckpt`
                result = build(req.sentence, ckpt=str(registry._runs[name]))
            else:  # a pretrained model (MiniLM): its tokenizer's tokens, [CLS] and [SEP] included
                p = prepare(registry, name, req.sentence)
                result = build_loaded(p.model, p.tokens, p.ids)
            return {"model": name, "tokens": result["tokens"], "lang": req.lang,
                    "steps": _steps(result, req.lang, req.max_cols)}
        return run(req, work)

    @r.post("/api/neuron")
    def neuron(req: NeuronRequest) -> dict:
        """q_i·k_i·scale per dimension i and head, for one query and one key (bertviz's neuron view)."""
        from .interventions import qk_contributions
        return run(req, lambda name: qk_contributions(prepare(registry, name, req.sentence),
                                                      req.layer, req.query, req.key))

    @r.post("/api/intervene")
    def intervene(req: InterveneRequest) -> dict:
        """Switch off heads and FFNs; the patterns, the output and the logit lens before and after."""
        from .interventions import intervene as switch_off
        return run(req, lambda name: {"model": name, **switch_off(prepare(registry, name, req.sentence), req.heads,
                                                                   req.ffns, req.how, MAX_NEW_TOKENS)})

    @r.post("/api/generate")
    def generate(req: GenerateRequest) -> dict:
        """Decode step by step: each step's top-k, the new token's attention; the beam tree.
        With `stream`, each step is sent as soon as it is decoded (one JSON line)."""
        from .interventions import ablation_hooks
        from .live import iter_steps

        def work(name):
            p = prepare(registry, name, req.sentence)
            fns = ablation_hooks(p, req.heads, req.ffns, req.how)
            events = iter_steps(p, req.strategy, req.max_new_tokens, req.temperature, req.top_k,
                                req.beam_size, req.length_penalty, req.seed, fns)
            start = {"model": name, "source_tokens": p.tokens}
            if not req.stream:
                *steps, result = events
                return {**start, **result, "steps": steps}
            first = next(events)  # a model that cannot generate is a 4xx before the stream starts
            return StreamingResponse(_lines(start, first, events), media_type="application/x-ndjson")
        return run(req, work)

    def _lines(start: dict, first: dict, events) -> Iterator[str]:
        """start, step 0, 1, …, done: one JSON line each; the model runs under the lock one step at a time."""
        yield _json({"event": "start", **start})
        pending, index = first, 0
        while pending is not None:
            done = "ids" in pending  # the last record: the whole result
            yield _json({"event": "done", **pending} if done else {"event": "step", "index": index, **pending})
            if done:
                return
            index += 1
            with _LOCK:
                try:
                    pending = next(events)
                except GlassformerError as e:
                    yield _json({"event": "error", "detail": scrub_paths(str(e), registry.runs_dir)})
                    return

    return r


def _json(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
