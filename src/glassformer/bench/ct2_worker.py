"""CTranslate2 in a process of its own, for the peer rows (bench/peer.py).

Why not in the benchmark's process: CTranslate2's wheel brings its own OpenMP runtime (a second
libgomp beside torch's). Once a CTranslate2 model with `intra_threads=2` has run in a process,
torch's parallel regions in that process run on about one core: on the 2-core AVX-512 EPYC
(2026-12-03) our int8 translator generation went from ~210 ms at ~2.0 CPU-seconds per second to
~480 ms at ~1.0, and came back when the CTranslate2 model was deleted; CTranslate2's own times
were ~1.8× slower beside torch than alone. A user runs one engine per process, so each engine runs
in its own here, and the rows still alternate their calls (the worker sleeps on a pipe meanwhile).

Protocol: one JSON object per line on stdin, one per line on stdout.
  {"load": {"kind": "translator" | "generator", "path": ..., "threads": n}} → {"ok": true}
  {"run": {"compute_type": ..., "method": ..., "args": [...], "kwargs": {...}}}
      → {"tokens": [[...], ...], "seconds": t}   (t: the call alone, timed here)
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    import ctranslate2

    engines: dict = {}
    kind = None
    for line in sys.stdin:
        msg = json.loads(line)
        if "load" in msg:
            spec = msg["load"]
            kind = spec["kind"]
            make = ctranslate2.Translator if kind == "translator" else ctranslate2.Generator
            engines = {ct: make(spec["path"], device="cpu", compute_type=ct, intra_threads=spec["threads"],
                                inter_threads=1) for ct in ("float32", "int8")}
            reply: dict = {"ok": True}
        else:
            run = msg["run"]
            engine = engines[run["compute_type"]]
            t = time.perf_counter()
            res = getattr(engine, run["method"])(*run["args"], **run["kwargs"])
            seconds = time.perf_counter() - t
            tokens = ([r.hypotheses[0] for r in res] if kind == "translator" else [r.sequences[0] for r in res])
            reply = {"tokens": tokens, "seconds": seconds}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
