"""Writes stall.csv: 3 ranks, 50 steps. Rank 2's input pipeline is 3 ms
slower every step, so it arrives last at the backward sync point in the
typical step; at step 42 rank 1 stalls 12 s in its forward pass and the
others wait for it there. Deterministic: a fixed seed."""
import random
import sys

rng = random.Random(49)
STALL_STEP, STALL_S = 42, 12.0
out = open(sys.argv[1] if len(sys.argv) > 1 else "stall.csv", "w")
out.write("step,rank,data.next_wait,model.fwd_loss_cpu_wall,model.backward_cpu_wall,"
          "model.backward_cpu_wall.sync_wait,step.other_cpu_wall\n")
for step in range(50):
    rows = []
    for rank in range(3):
        data = 0.001 + (0.003 if rank == 2 else 0) + rng.uniform(0, 0.0002)
        fwd = 0.020 + rng.uniform(0, 0.0005) + (STALL_S if (rank, step) == (1, STALL_STEP) else 0)
        bwd = 0.030 + rng.uniform(0, 0.0005)
        rows.append([rank, data, fwd, bwd])
    last = max(d + f + b for _, d, f, b in rows)
    for rank, data, fwd, bwd in rows:
        wait = last - (data + fwd + bwd) + 0.0002
        out.write("%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f\n" % (step, rank, data, fwd, bwd, wait, 0.0001))
