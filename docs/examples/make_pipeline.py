#!/usr/bin/python3
"""Writes pipeline.jsonl, a JSON Lines recording of a 2-stage pipeline x
2-way data-parallel job whose ranks declare their coordinates: pipeline
stage 1 computes the loss (20 ms more forward work by its role), each
stage's two replicas leave their gradient all-reduce together (the
backward's .sync_wait), and rank 1 (stage 0) is 30 ms slow in backward. The
report compares ranks inside cohorts and its pipeline view names stage 0,
rank 1, backward."""
import json
import sys

STAGES = ["data.next_wait", "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
          "model.backward_cpu_wall.sync_wait", "step.other_cpu_wall"]


def main(out):
    header = {"type": "header", "format": "stagefrontier-recording", "version": 1,
              "job_id": "pp-demo", "world_size": 4,
              "schema": {"version": 1, "stages": STAGES, "accumulation": 1},
              "gates": {"warmup_steps": 0, "window_steps": 20}}
    out.write(json.dumps(header) + "\n")
    for step in range(20):
        rows = []
        for rank in range(4):
            pp, dp = rank // 2, rank % 2
            jitter = [(step * 7919 + rank * 104729 + k * 1299709) % 900000 for k in range(3)]
            d = [10000000 + jitter[0], (50 + 20 * pp) * 1000000 + jitter[1],
                 (110 if rank == 1 else 80) * 1000000 + jitter[2]]
            rows.append((rank, pp, dp, d))
        for rank, pp, dp, d in rows:
            arrival = max(sum(r[3]) for r in rows if r[1] == pp)
            d_ns = d + [arrival - sum(d), 5000000]
            row = {"type": "row", "step": step, "rank": rank, "d_ns": d_ns,
                   "parallel": "pp=%d/2,dp=%d/2" % (pp, dp)}
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.stdout)
