#!/usr/bin/python3
"""Writes roles.jsonl, a JSON Lines recording of a role-heterogeneous job:
ranks 0-2 train, rank 3 generates rollouts and is slower in forward. Stages
carry reporting groups, and the header sets its own window gates. The report
must say role_aware_needed instead of a strong label."""
import json
import sys

STAGES = ["data.next_wait", "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
          "optim.step_cpu_wall", "step.other_cpu_wall"]
GROUPS = ["input", "compute", "compute", "optimizer", "step.other_cpu_wall"]


def main(out):
    header = {"type": "header", "format": "stagefrontier-recording", "version": 1,
              "job_id": "rl-demo", "world_size": 4,
              "schema": {"version": 1, "stages": STAGES, "groups": GROUPS, "accumulation": 1},
              "gates": {"warmup_steps": 0, "window_steps": 30}}
    out.write(json.dumps(header) + "\n")
    for step in range(30):
        for rank in range(4):
            gen = rank == 3
            d_ms = [1, 25 if gen else 8, 5 if gen else 22, 4, 0.2]
            d_ns = [int(v * 1000000) + (step * 7 + rank * 13) % 50000 for v in d_ms]
            row = {"type": "row", "step": step, "rank": rank, "d_ns": d_ns,
                   "role": "generator" if gen else "trainer"}
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.stdout)
