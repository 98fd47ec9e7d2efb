"""The progress bar of a training epoch."""

from __future__ import annotations

import sys
import time

__all__ = ["Progress"]


class Progress:
    """A progress bar per epoch showing the loss and the throughput: tqdm when it is installed
    (the ``examples`` extra), else a plain text bar on stderr."""

    def __init__(self, total, desc, enabled):
        self.bar = None
        self.total, self.done = total, 0
        self.desc, self.enabled, self.start = desc, enabled, time.perf_counter()
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, desc=desc, unit="batch", leave=True)
            except ImportError:
                pass

    def update(self, loss, samples):
        self.done += 1
        rate = samples / max(time.perf_counter() - self.start, 1e-9)
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", samples_per_s=f"{rate:,.0f}")
            self.bar.update(1)
        elif self.enabled and (
            self.done == self.total or self.done % max(1, self.total // 20) == 0
        ):
            filled = 20 * self.done // max(self.total, 1)
            sys.stderr.write(
                f"\r{self.desc} [{'#' * filled:<20}] {self.done}/{self.total} "
                f"loss={loss:.4f} samples/s={rate:,.0f}"
            )
            sys.stderr.flush()

    def close(self, logs):
        text = " ".join(f"{k}={v:.4f}" for k, v in logs.items())
        if self.bar is not None:
            self.bar.set_postfix_str(text)
            self.bar.close()
        elif self.enabled:
            sys.stderr.write("\n")
            print(self.desc, text, flush=True)
