#!/usr/bin/python3
"""A one-rank trainer for test_python_capture_dir.py: the stagefrontier
Recorder with its default capture backend (torch.profiler), training until
its stdin closes, then printing its counters as JSON. Run as another uid, so
the default capture directory /tmp/stagefrontier-$UID is that uid's."""
import json
import select
import sys
import time

import stagefrontier as sf


def main():
    sock, job = sys.argv[1], sys.argv[2]
    rec = sf.Recorder(job_id=job, socket=sock, rank=0, world_size=1)
    steps = 0
    while not select.select([sys.stdin], [], [], 0)[0]:
        with rec.step():
            with rec.stage("model.fwd_loss_cpu_wall"):
                time.sleep(0.002)
        rec.flush()
        steps += 1
    st = rec.stats()
    st["trained_steps"] = steps
    rec.close()
    print(json.dumps(st))


if __name__ == "__main__":
    main()
