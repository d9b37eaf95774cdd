"""A rich progress bar for training: step, loss, learning rate, tokens/s, elapsed and ETA.

The bar measures whichever limit is closer — steps done of --max-steps or minutes used of
--max-minutes — so the ETA is honest for either. Evaluation lines print above the bar.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class Progress:
    """Context manager; a no-op when disabled (quiet runs, workers other than rank 0)."""

    def __init__(self, max_steps: int | None, max_minutes: float | None, enabled: bool = True,
                 start_step: int = 0, console: Console | None = None):
        self.max_steps, self.max_s = max_steps, (max_minutes * 60 if max_minutes else None)
        self.enabled = enabled
        self._bar = None
        if enabled:
            self._bar = RichProgress(
                TextColumn("[bold]step {task.fields[step]}"), BarColumn(),
                TextColumn("loss {task.fields[loss]}  lr {task.fields[lr]}  {task.fields[tps]} tok/s"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=console, transient=False)
            self._task = self._bar.add_task("train", total=1.0, step=start_step, loss="-", lr="-", tps="-")

    def __enter__(self) -> "Progress":
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()

    def fraction(self, step: int, elapsed: float) -> float:
        parts = []
        if self.max_steps:
            parts.append(step / self.max_steps)
        if self.max_s:
            parts.append(elapsed / self.max_s)
        return min(1.0, max(parts)) if parts else 0.0

    def update(self, step: int, elapsed: float, loss: float, lr: float, tps: float) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self.fraction(step, elapsed), step=step,
                             loss=f"{loss:.4f}", lr=f"{lr:.2e}", tps=f"{tps:,.0f}")

    def note(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(line)
