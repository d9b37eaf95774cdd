"""Prepared weights: copies derived from the parameters, kept only while nothing can change them (issue 27).

The fast paths read weights in other layouts than the seed's per-head parameters: the fused
W_QKV = [W_Q | W_K | W_V] of one GEMM (nn/attention.py), the tied head's W_U = W_Eᵀ as a
contiguous matrix, a GEMM's weight reordered for oneDNN (nn/decode_gemm.py). Building them copies
the weight, so during a generation they are built once and kept.

Why not keep them until a parameter changes, told by its version counter and storage? Because
nothing reliably says that a parameter changed. The fused optimizers write without bumping
`_version` (a copy kept that way served the first evaluation's weights to every later one:
validation curves, early stopping and `best/` measured an old model), and so do updates through
`.data` and `torch.func` gradients written back with foreach ops. So a derived copy lives only
inside a scope in which glassformer itself runs the model and no update happens:

    with prepared(model):   # generate() and evaluate() open one
        ...                 # derived copies are built on first use and kept
    # on leaving the outermost scope they are dropped

Outside a scope every fast-path call builds what it needs from the parameters as they are (a
training step does anyway: autograd needs the cat). What that costs, `bench/prepared_cost.py`
(AVX2 EPYC, 2 threads; docs/benchmarks.md, "Prepared weights"): an eval forward pass of 64 × 24
tokens pays nothing measurable (−12% to +5% across sizes, the noise of the machine); a
module-path decoding step at batch 1 pays 2–22% (more for wider models), which is why a
generation keeps its copies for its scope.

Inside a scope the copies are still dropped whenever a torch optimizer steps (a global step
hook), and rebuilt when a source's version counter or storage moved (`load_state_dict`, in-place
edits under `no_grad`): belt and braces for code run inside one. An update that bypasses both
(`p.data.add_`) while a scope is open is the one case not seen; glassformer opens scopes only
around its own evaluation and generation, where nothing updates weights.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

_STORE = "_prepared_store"  # attribute of a module inside a scope: name -> (key, value)
_DEPTH = "_prepared_depth"  # how many scopes are open on the module
_lock = threading.Lock()
_open: "weakref.WeakSet[nn.Module]" = weakref.WeakSet()  # modules with a store now


@contextmanager
def prepared(model: nn.Module) -> Iterator[nn.Module]:
    """Keep derived weight copies of `model`'s modules until the outermost scope on them ends.

    Scopes nest (evaluate() around generate()) and may overlap across threads (the server): each
    module counts the scopes open on it and drops its copies when the count returns to zero."""
    modules = list(model.modules())
    with _lock:
        for m in modules:
            depth = m.__dict__.get(_DEPTH, 0)
            if depth == 0:
                m.__dict__[_STORE] = {}
                _open.add(m)
            m.__dict__[_DEPTH] = depth + 1
    try:
        yield model
    finally:
        with _lock:
            for m in modules:
                depth = m.__dict__.get(_DEPTH, 1) - 1
                m.__dict__[_DEPTH] = depth
                if depth == 0:
                    m.__dict__.pop(_STORE, None)
                    _open.discard(m)


def _key(sources: Sequence[torch.Tensor | None]) -> tuple:
    """What identifies the sources' values inside a scope (an inference tensor has no counter)."""
    return tuple(None if t is None else (t.data_ptr(), None if t.is_inference() else t._version, t.shape)
                 for t in sources)


def derived(owner: nn.Module, name: str, sources: Sequence[torch.Tensor | None],
            build: Callable[[], object]) -> object:
    """`build()`, kept on `owner` under `name` while a scope is open on it; built anew otherwise.

    `sources` are the tensors `build` reads: a kept value is rebuilt when one of them moved."""
    store = owner.__dict__.get(_STORE)
    if store is None:
        return build()
    key = _key(sources)
    hit = store.get(name)
    if hit is None or hit[0] != key:
        hit = store[name] = (key, build())
    return hit[1]


def drop(owner: nn.Module, names: set[str]) -> None:
    """Forget `owner`'s kept values of these names (a decode GEMM keeps only its route's copy)."""
    store = owner.__dict__.get(_STORE)
    if store is not None:
        for name in names:
            store.pop(name, None)


def _forget_all(*_args, **_kwargs) -> None:
    """An optimizer stepped: whatever it updated, no kept copy may outlive it."""
    if not _open:  # the common case, every training step: nothing to do
        return
    with _lock:
        for m in list(_open):
            store = m.__dict__.get(_STORE)
            if store is not None:
                store.clear()


register_optimizer_step_post_hook(_forget_all)
