"""Hook points and tracing: see every number of a forward pass (seed 000 ch. 7, §8.3).

A hook point is an identity module placed where the seed's math names a value (`scores`,
`pattern`, `resid_mid`, ...). Its name comes from the module tree, so `model.enc[0].attn.scores`
is traced as `enc.0.attn.scores`: one naming scheme, never hand-typed strings. Norm modules,
token embeddings and positional encodings are traced by their own output the same way.

`run_with_trace` records values in forward order; `hooks` replaces values (zero a head, patch
an activation). Both force the explicit-math attention path (the fused kernel never materialises
the pattern) and always remove what they registered, even on error.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import torch
import torch.nn.modules.module as _module_hooks
from torch import nn


class HookPoint(nn.Module):
    """Identity module: a named place in the forward pass where a value can be read or replaced."""

    traced = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @property
    def hooked(self) -> bool:
        """Whether anything reads or replaces this value (its own hooks or global module hooks)."""
        return bool(self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks
                    or _module_hooks._global_forward_hooks or _module_hooks._global_forward_pre_hooks
                    or _module_hooks._global_backward_hooks or _module_hooks._global_backward_pre_hooks)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        # Speed only: an unhooked identity needs none of nn.Module's call machinery. A decode step
        # passes ~100 hook points; going straight to `x` saves a few µs each (benchmarks, issue 7).
        return super().__call__(x) if self.hooked else x


def hook_points(model: nn.Module) -> "OrderedDict[str, nn.Module]":
    """Every traceable module of `model`, by its name in the module tree."""
    return OrderedDict((name, m) for name, m in model.named_modules()
                       if getattr(m, "traced", False) and name)


class Trace(OrderedDict):
    """Traced tensors by hook name, in the order the forward pass produced them."""

    def filter(self, *patterns: str) -> "Trace":
        """Keep the names matching any glob (`enc.*.attn.pattern`, `**.pattern`) or regex (`re:...`)."""
        return Trace((k, v) for k, v in self.items() if _matches(k, patterns))

    def to_lists(self, drop_batch: bool = True) -> dict:
        """Plain nested lists (JSON-ready); the batch dimension dropped when it is 1."""
        out = {}
        for k, v in self.items():
            t = v[0] if drop_batch and v.dim() > 0 and v.shape[0] == 1 else v
            out[k] = t.detach().cpu().double().tolist()
        return out


def _glob(pattern: str) -> "re.Pattern[str]":
    """Glob over dotted names: `*` is one name component, `**` any run of components."""
    parts = re.split(r"(\*\*|\*)", pattern)
    rx = "".join(".*" if p == "**" else "[^.]*" if p == "*" else re.escape(p) for p in parts)
    return re.compile(rx + r"\Z")


def _matches(name: str, patterns: Iterable[str] | None) -> bool:
    if not patterns:
        return True
    for p in patterns:
        if p.startswith("re:"):
            if re.search(p[3:], name):
                return True
        elif p == "*" or _glob(p).match(name):
            return True
    return False


@contextmanager
def reference_path(model: nn.Module) -> Iterator[None]:
    """Force every attention module onto the explicit-math path while inside."""
    mods = [m for m in model.modules() if hasattr(m, "force_math")]
    before = [m.force_math for m in mods]
    for m in mods:
        m.force_math = True
    try:
        yield
    finally:
        for m, b in zip(mods, before):
            m.force_math = b


HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]


@contextmanager
def hooks(model: nn.Module, fns: dict[str, HookFn]) -> Iterator[None]:
    """Run with `fns[pattern](value, name)` at every matching hook point.

    A function that returns a tensor replaces the value (e.g. zero one head of
    `enc.0.attn.z`); returning None leaves it unchanged. Hooks are removed on exit, always.
    """
    points = hook_points(model)
    unknown = [p for p in fns if not any(_matches(n, [p]) for n in points)]
    if unknown:
        from .errors import InputError
        raise InputError(f"no hook point matches {', '.join(unknown)}; "
                         f"names look like {', '.join(list(points)[:4])}, ...")
    handles = []
    try:
        with reference_path(model):
            for name, mod in points.items():
                for pattern, fn in fns.items():
                    if _matches(name, [pattern]):
                        handles.append(mod.register_forward_hook(_wrap(fn, name)))
            yield
    finally:
        for h in handles:
            h.remove()


def _wrap(fn: HookFn, name: str):
    def hook(_mod, _inputs, output):
        if not isinstance(output, torch.Tensor):
            return None
        return fn(output, name)
    return hook


def run_with_trace(model: nn.Module, *args, names: Iterable[str] | None = None,
                   detach: bool = True, **kwargs):
    """Run `model(*args, **kwargs)` and return `(output, Trace)` of every hook point's value.

    `names` keeps only the matching hook names (globs, or `re:` regexes). Output equals the
    untraced output: hooks only read, and the math path is tested equal to the fast path.
    """
    patterns = list(names) if names else None
    trace = Trace()

    def record(value: torch.Tensor, name: str) -> None:
        if _matches(name, patterns):
            trace[name] = value.detach().clone() if detach else value
        return None

    with hooks(model, {"*": record}):
        output = model(*args, **kwargs)
    return output, trace
