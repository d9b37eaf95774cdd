"""bench.harness.top_ops: the profiler's table without Kineto's `USDT:`/`STAGE:` lines (issue 31), which
it writes to file descriptor 2 past Python; any other output of the profiled call still reaches stderr."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import os, torch
from glassformer.bench.harness import top_ops
from torch.profiler import ProfilerActivity, profile

if __import__("sys").argv[1] == "bare":  # torch's profiler alone: the witness that the lines exist
    with profile(activities=[ProfilerActivity.CPU]):
        torch.ones(64) @ torch.ones(64)
else:
    def work():
        os.write(2, b"a line of the call's own\\n")
        return torch.ones(64) @ torch.ones(64)
    ops = top_ops(work, 3)
    print(ops[0]["op"], len(ops))
"""


def _stderr(mode: str) -> tuple[str, str]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True)
    return out.stdout, out.stderr


def test_top_ops_drops_only_the_profilers_own_lines():
    _, bare = _stderr("bare")
    assert "USDT:" in bare  # what `bench --quick` printed before
    stdout, err = _stderr("top_ops")
    assert "USDT:" not in err and "STAGE:" not in err, err
    assert "a line of the call's own" in err
    assert stdout.split()[0].startswith("aten::")
