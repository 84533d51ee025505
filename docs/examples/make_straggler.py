#!/usr/bin/python3
"""Writes docs/examples/straggler.csv: 4 ranks whose backward ends in a
gradient all-reduce, split at each rank's arrival into
model.backward_cpu_wall (own work) and model.backward_cpu_wall.sync_wait.
Rank 3's own backward is 8 ms longer, so every rank leaves backward together
and only the arrival boundary names rank 3 (the straggler verdict, fixed
over the three windows of 10 steps).

  /usr/bin/python3 docs/examples/make_straggler.py > docs/examples/straggler.csv
  sfctl replay --warmup-steps 0 --window-steps 10 docs/examples/straggler.csv
"""
import random

random.seed(1)
print("step,rank,data.next_wait,model.backward_cpu_wall,model.backward_cpu_wall.sync_wait,"
      "step.other_cpu_wall")
for t in range(30):
    own = [0.020 + random.random() * 0.002 + (0.008 if r == 3 else 0) for r in range(4)]
    last = max(own)
    for r in range(4):
        print("%d,%d,0.001,%.6f,%.6f,0.0001" % (t, r, own[r], last - own[r] + 0.001))
