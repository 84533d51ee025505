#!/usr/bin/python3
"""Writes displacement.csv: 8 ranks, 120 steps (20 warmup + one 100-step
window). Rank 5's data loader takes 80 ms instead of 2 ms; every other rank
reaches the gradient all-reduce early and waits for rank 5 inside its
backward stage. Per-stage max and mean therefore point at backward, while
the frontier charges the delay where it first appears: data on rank 5.

Deterministic: a fixed linear congruential generator supplies the jitter."""
import sys

STAGES = ["data.next_wait", "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
          "callbacks.cpu_wall", "optim.step_cpu_wall", "step.other_cpu_wall"]
RANKS, STEPS, SLOW_RANK = 8, 120, 5

state = 12345


def jitter_us(spread):
    """Uniform integer microseconds in [0, spread)."""
    global state
    state = (state * 1103515245 + 12345) % 2**31
    return state % spread


def main(out):
    out.write("step,rank," + ",".join(STAGES) + ",step_wall\n")
    for step in range(STEPS):
        arrive = {}
        rows = {}
        for rank in range(RANKS):
            data = (80000 if rank == SLOW_RANK else 2000) + jitter_us(400)
            fwd = 20000 + jitter_us(400)
            bwd_compute = 40000 + jitter_us(400)
            rows[rank] = [data, fwd, bwd_compute]
            arrive[rank] = data + fwd + bwd_compute
        last = max(arrive.values())
        for rank in range(RANKS):
            data, fwd, bwd = rows[rank]
            bwd += last - arrive[rank]             # waiting in the all-reduce
            cb, opt, other = 3000 + jitter_us(200), 10000 + jitter_us(200), 500 + jitter_us(200)
            us = [data, fwd, bwd, cb, opt, other]
            wall = sum(us)
            out.write(f"{step},{rank}," + ",".join(f"{v / 1e6:.6f}" for v in us) +
                      f",{wall / 1e6:.6f}\n")


if __name__ == "__main__":
    main(sys.stdout)
