"""The run's CPU threads, re-checked while it trains (issue 32 §4).

`--recipe auto` chooses 1 or 2 threads for a small model from the cores free when the run starts
(`small_model_threads`, below): a second thread that waits for a busy core only spins, 17× slower
when measured, and a free second core gives ~25% more steps. A choice made once is only as good as
the second it was made in: a compile that ends a minute in would leave the run on one thread for an
hour, and a job that starts later would leave it spinning on two. So at each evaluation the run
measures again how many cores *other* work kept busy since the last one — the machine's busy time
(/proc/stat) less this process's own CPU time (os.times, all its threads) over the same wall time —
and takes the thread count the recipe's rule gives for that load, saying so when it changes.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import torch


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine from /proc/stat's first line; None off Linux."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 4:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def own_cpu_seconds() -> float:
    """CPU seconds this process has used, all its threads (user + system)."""
    t = os.times()
    return t.user + t.system


def busy_cores(cores: int, seconds: float = 0.3) -> float:
    """How many cores other work keeps busy right now: /proc/stat's busy time over `seconds`
    (Linux), else the 1-minute load average, which lags by about a minute (a job that just ended
    still counts)."""
    first = cpu_times()
    if first is not None:
        time.sleep(seconds)
        second = cpu_times()
        if second is not None and second[1] > first[1]:
            return cores * (second[0] - first[0]) / (second[1] - first[1])
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float(cores)


def small_model_threads(cores: int | None = None, load: float | None = None) -> tuple[int, str]:
    """(threads, why) for a model of d_model ≤ 128, from the cores that are free right now.

    Measured on CMUdict pairs (d_model 128, 3+3 layers): on 2 busy cores (load 9) PyTorch's 2
    threads made 95 tokens/s against 1,610 with one — a second thread that waits for a busy core
    only spins; on 2 quiet cores 2 threads made 24% more steps than one (902 vs 726 in 2 min).
    More than 2 threads was not measured for matrices this small, so it is not used."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    if load is None:
        load = busy_cores(cores)
    if cores >= 2 and cores - load >= 1.5:
        return 2, (f"2 CPU threads ({cores} cores, {load:.1f} busy: a free second core gives a model "
                   f"this small ~25% more steps; --threads 1 beside other jobs)")
    return 1, (f"1 CPU thread ({cores} cores, {load:.1f} busy: with no free core a second thread only "
               f"spins, 17x slower when measured)")


class ThreadWatch:
    """Re-decides the thread count from the load other work puts on the machine (see above)."""

    def __init__(self, cores: int | None = None, machine: Callable[[], tuple[int, int] | None] = cpu_times,
                 own: Callable[[], float] = own_cpu_seconds, clock: Callable[[], float] = time.monotonic,
                 set_threads: Callable[[int], None] = torch.set_num_threads,
                 get_threads: Callable[[], int] = torch.get_num_threads):
        self.cores = cores if cores is not None else (os.cpu_count() or 1)
        self._machine, self._own, self._clock = machine, own, clock
        self._set, self._get = set_threads, get_threads
        self._last = self._sample()

    def _sample(self) -> tuple[tuple[int, int] | None, float, float]:
        return self._machine(), self._own(), self._clock()

    def others(self) -> float | None:
        """Cores other work kept busy since the last call (None where it cannot be measured)."""
        (m0, own0, t0), now = self._last, self._sample()
        self._last = now
        m1, own1, t1 = now
        if m0 is None or m1 is None or m1[1] <= m0[1] or t1 <= t0:
            return None
        busy = self.cores * (m1[0] - m0[0]) / (m1[1] - m0[1])  # cores busy, all work together
        return max(0.0, busy - (own1 - own0) / (t1 - t0))

    def check(self) -> str | None:
        """Set the thread count for the load just measured; a line saying so if it changed."""
        load = self.others()
        if load is None:
            return None
        threads, _ = small_model_threads(self.cores, load)
        before = self._get()
        if threads == before:
            return None
        self._set(threads)
        return (f"threads {before} → {threads}: other work kept {load:.1f} of {self.cores} cores busy since "
                f"the last evaluation")
