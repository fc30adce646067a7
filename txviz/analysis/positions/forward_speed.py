"""How long a forward pass of n tokens takes on this machine, from two timed short passes: a fixed
cost per pass (on a busy CPU each of a forward's few hundred small ops can wait for a time slice,
whatever the length) plus the pass's FLOPs at a rate. A rate read from one short pass alone counts
that fixed cost as slow compute and scales it up with the length: a 64-token pass made a 512-token
scoring look 5× slower than it ran."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ForwardSpeed:
    fixed_seconds: float  # per pass, whatever its length
    gflops: float  # the rate of the FLOPs on top of it

    def seconds(self, gflop: float) -> float:
        """Seconds of one pass of ``gflop`` GFLOPs."""
        return self.fixed_seconds + gflop / self.gflops

    def gflops_at(self, gflop: float) -> float:
        """The GFLOP/s a pass of ``gflop`` GFLOPs shows, fixed cost included."""
        return gflop / self.seconds(gflop)


def fit_forward_speed(short: tuple[float, float], long: tuple[float, float]) -> ForwardSpeed:
    """The line through two (GFLOPs, fastest seconds) passes. Timings on a shared machine can make the
    longer pass look no slower; then the long pass's own rate with no fixed cost (the pessimistic
    reading, as before), and a fixed cost is never negative."""
    (short_gflop, short_seconds), (long_gflop, long_seconds) = short, long
    if long_gflop <= short_gflop:
        raise ValueError("the long pass must count more FLOPs than the short one")
    per_gflop = (long_seconds - short_seconds) / (long_gflop - short_gflop)
    fixed = short_seconds - short_gflop * per_gflop
    if per_gflop <= 0 or fixed < 0:
        return ForwardSpeed(0.0, long_gflop / max(long_seconds, 1e-9))
    return ForwardSpeed(fixed, 1 / per_gflop)
