"""`StepInputs`: an eager step's token ids, positions, write slots and sampled rows, in buffers made once and
filled in place every step (as vLLM's persistent input buffers): a step builds no host list and makes no new
tensor for them.

The four go side by side in one flat `long` buffer, `[ids | positions | slots | rows]` (n, n, n and r entries:
n the step's tokens, r its sampling rows), the step's tensors views of it. On the CPU the host buffer is the
step's; elsewhere it is pinned (CUDA) and its used prefix is copied into a device buffer made once, one
transfer a step; before the next step writes the host buffer, the last transfer has read it. A step larger
than the buffers (a longer prompt chunk) makes them anew, twice as large.
"""

from __future__ import annotations

import numpy as np
import torch

MIN_CAPACITY = 256


class StepInputs:
    def __init__(self, device: torch.device) -> None:
        self.device, self.capacity = device, 0
        self.copied = torch.cuda.Event() if device.type == "cuda" else None  # the last transfer's end
        self.host = self.staged = torch.empty(0, dtype=torch.long)
        self.values = self.host.numpy()

    def reserve(self, size: int) -> np.ndarray:
        """The host buffer's values (the same memory), at least `size` of them, for the step to write in place."""
        if self.copied is not None:
            self.copied.synchronize()  # the last step's transfer has read the host buffer
        if size > self.capacity:
            self.capacity = max(size, 2 * self.capacity, MIN_CAPACITY)
            on_cpu = self.device.type == "cpu"
            self.host = torch.zeros(self.capacity, dtype=torch.long, pin_memory=self.copied is not None)
            self.staged = self.host if on_cpu else torch.zeros_like(self.host, device=self.device)
            self.values = self.host.numpy()
        return self.values

    def on_device(self, size: int) -> torch.Tensor:
        """The first `size` values, as the step's tensor on the device."""
        out = self.staged[:size]
        if out.data_ptr() != self.host.data_ptr():
            out.copy_(self.host[:size], non_blocking=self.copied is not None)  # pinned: asynchronous
            if self.copied is not None:
                self.copied.record()
        return out
