"""The last finite weights: the latest weights known to be sound, for a run that ends as nan_failure.

An update with a finite loss and gradient can still break the weights (an absurd learning rate):
they turn non-finite, or so large that the next forward pass overflows and the sampler meets
non-finite logits. Weights count as sound when they are finite and the sampler ran on them without
meeting a non-finite logit. Each step, before its update, the copy takes the current weights if
they are sound; all of it on the device (no host sync): the trainer reads the flags with the step's
other metrics, and when the guard ends the run as nan_failure it puts the copy back.
"""
from __future__ import annotations

import torch


class LastFiniteWeights:
    def __init__(self, parameters, keep: bool):
        """`keep`: hold the copy (one more float32 copy of the weights in memory); without it the
        weights are still checked, but nothing can be put back."""
        self.parameters = [p for p in parameters if p.requires_grad]
        with torch.no_grad():
            self.copy = [p.detach().clone() for p in self.parameters] if keep else None
        self.finite = torch.ones((), dtype=torch.bool, device=self.parameters[0].device)

    def save_if(self, sampling_finite: torch.Tensor) -> None:
        """Copy the current weights if they are sound: finite after the last update (`check`) and
        `sampling_finite` (a device bool: the sampler met only finite logits with them)."""
        if self.copy is None:
            return
        sound = self.finite & sampling_finite
        with torch.no_grad():
            for saved, current in zip(self.copy, self.parameters):
                torch.where(sound, current, saved, out=saved)

    def check(self) -> torch.Tensor:
        """After an update: a device bool, every weight finite (the largest |w| of each tensor)."""
        with torch.no_grad():
            largest = torch.stack(torch._foreach_norm(self.parameters, float("inf")))
        self.finite = torch.isfinite(largest).all()
        return self.finite

    def restore(self) -> bool:
        """Put the last sound weights back; False when no copy is kept."""
        if self.copy is None:
            return False
        with torch.no_grad():
            torch._foreach_copy_(self.parameters, self.copy)
        self.finite = torch.ones_like(self.finite)
        return True
