"""A progress bar for long runs (tqdm on stderr), silent when disabled."""
from __future__ import annotations

import sys


class Progress:
    def __init__(self, total: int, enabled: bool):
        self.bar = None
        if enabled:
            from tqdm import tqdm
            self.bar = tqdm(total=total, file=sys.stderr, unit="step", leave=False, dynamic_ncols=True)

    def phase(self, name: str, it):
        for x in it:
            if self.bar is not None:
                self.bar.set_description(name)
            yield x
            if self.bar is not None:
                self.bar.update(1)

    def show_step_time(self, seconds: float) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"step {seconds * 1e3:.1f} ms")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
