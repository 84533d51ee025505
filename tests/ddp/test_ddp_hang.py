#!/usr/bin/python3
"""Live hang check (docs/SFD.md, "Liveness"): three torch.distributed ranks
(Gloo, CPU) report through the binding to a real sfd with stall_after_s = 3.
Each step has a forward stage (compute) and a backward stage ending in an
all_reduce. At step HANG_STEP the hidden rank stops itself with SIGSTOP
inside its forward stage, so the others wait in the all_reduce.

Within stall_after_s + 2 s of the stop, `sfctl jobs --json` must show the job
stalled with the hidden rank as the one culprit, and `sfctl ranks` must show
it stalled with a wall-clock last-seen time, and the Prometheus export
stagefrontier_job_stalled 1 with the rank's last-seen timestamp. After
SIGCONT the state must clear (the export back to 0) and the job finish. Exit 77 (CTest SKIP_RETURN_CODE) only without
torch and Gloo.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))
sys.path.insert(0, os.path.join(REPO, "tests", "sfd"))

import sfharness  # noqa: E402
from loopback import free_port  # noqa: E402

SKIP = 77
WORLD = 3
HIDDEN = 1
HANG_STEP = 12
STEPS = 30
STALL_AFTER_S = 3


def rank_main(a):
    """One rank: forward compute, then a backward stage ending in all_reduce."""
    import torch
    import torch.distributed as dist
    import stagefrontier as sf
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    rec = sf.Recorder(sync_stages=["model.backward_cpu_wall"])
    w = torch.ones(64, 64)
    for step in range(STEPS):
        with rec.step():
            with rec.stage("model.fwd_loss_cpu_wall"):
                x = w @ w
                if rank == HIDDEN and step == HANG_STEP:
                    with open(a.pidfile + ".part", "w") as f:
                        f.write("%d\n" % os.getpid())
                    os.rename(a.pidfile + ".part", a.pidfile)
                    os.kill(os.getpid(), signal.SIGSTOP)
            with rec.stage("model.backward_cpu_wall"):
                rec.arrive()
                dist.all_reduce(x)
    dist.barrier()
    rec.close()
    # As bench/ddp/train.py: no process-group teardown (torch 1.13's Gloo
    # destructor can hang a rank at exit); the records are flushed by now.
    sys.stdout.flush()
    os._exit(0)


def stopped(pid):
    """True once the kernel shows the process stopped (state T)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def prom_value(path, metric, labels):
    """The value of one series of the textfile export, or None."""
    want = metric + "{" + ",".join('%s="%s"' % kv for kv in labels) + "}"
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(want + " "):
                    return float(line.split()[-1])
    except OSError:
        pass
    return None


def job_state(sfd, job):
    for j in sfd.json("jobs") or []:
        if j["job_id"] == job:
            return j
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build")
    p.add_argument("--row", default="sigstop")
    p.add_argument("--rank-main", action="store_true")
    p.add_argument("--pidfile")
    a = p.parse_args()
    if a.rank_main:
        return rank_main(a)
    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return SKIP
    build = sfharness.Build(a.build)
    job = "ci-hang-%d" % os.getpid()
    tmp = tempfile.mkdtemp(prefix="sf-hang-")
    pidfile = os.path.join(tmp, "stopped.pid")
    procs = []
    prom = os.path.join(tmp, "stagefrontier.prom")
    with sfharness.Sfd(build, warmup_steps=2, window_steps=8,
                       sfd_keys={"stall_after_s": STALL_AFTER_S, "prom_dir": tmp}) as sfd:
        env = build.env({"SF_JOB_ID": job, "SF_SOCKET": sfd.ingest, "WORLD_SIZE": str(WORLD),
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
        try:
            for r in range(WORLD):
                e = dict(env, RANK=str(r), LOCAL_RANK=str(r))
                procs.append(subprocess.Popen([sfharness.PYTHON, os.path.abspath(__file__),
                                               "--rank-main", "--pidfile", pidfile], env=e))
            sfharness.wait_for(lambda: os.path.exists(pidfile), 120, "the hidden rank to stop",
                               procs[HIDDEN])
            with open(pidfile) as f:
                pid = int(f.read())
            sfharness.wait_for(lambda: stopped(pid), 10, "SIGSTOP to take effect")
            t_stop = time.monotonic()
            seen = {}

            def stalled():
                j = job_state(sfd, job)
                seen["job"] = j
                return j and j["state"] == "stalled" and j["stalled"]["culprits"] == [HIDDEN]
            sfharness.wait_for(stalled, STALL_AFTER_S + 2, "the job to show stalled, rank %d "
                               "named" % HIDDEN)
            took = time.monotonic() - t_stop
            print("stalled after %.2f s: %s" % (took, json.dumps(seen["job"]["stalled"])))
            print(sfd.sfctl("jobs").stdout)
            # The stall is the job's live verdict too (docs/LIVE.md), naming the rank.
            v = (job_state(sfd, job) or {}).get("verdict") or {}
            if v.get("kind") != "stall" or v.get("rank") != HIDDEN:
                print("FAIL: the job's verdict is %s, not a stall of rank %d" % (v, HIDDEN))
                return 1
            ranks = sfd.json("ranks", job)
            hidden = ranks["ranks"][HIDDEN]
            if hidden["state"] != "stalled" or not hidden["culprit"] or \
                    not isinstance(hidden["last_seen"], float) or \
                    abs(hidden["last_seen"] - time.time()) > 60:
                print("FAIL: sfctl ranks shows rank %d as %s" % (HIDDEN, hidden))
                return 1
            others = [r for r in ranks["ranks"] if r["rank"] != HIDDEN]
            if any(r["state"] != "stalled" or r["open_stage"] != "model.backward_cpu_wall"
                   for r in others):
                # They may still be within stall_after_s of entering the collective.
                sfharness.wait_for(lambda: all(
                    r["state"] == "stalled" and r["open_stage"] == "model.backward_cpu_wall"
                    for r in (sfd.json("ranks", job) or {"ranks": []})["ranks"]
                    if r["rank"] != HIDDEN), STALL_AFTER_S + 2,
                    "the waiting ranks to show stalled in the collective")
            print(sfd.sfctl("ranks", job).stdout)
            sfharness.wait_for(lambda: prom_value(prom, "stagefrontier_job_stalled",
                                                  [("job_id", job)]) == 1, 5,
                               "the export to show the job stalled")
            seen_at = prom_value(prom, "stagefrontier_rank_last_seen_timestamp_seconds",
                                 [("job_id", job), ("rank", str(HIDDEN))])
            if seen_at is None or abs(seen_at - hidden["last_seen"]) > 0.01:
                print("FAIL: exported last seen %s, sfctl %s" % (seen_at, hidden["last_seen"]))
                return 1
            os.kill(pid, signal.SIGCONT)
            sfharness.wait_for(lambda: (job_state(sfd, job) or {}).get("state") != "stalled",
                               STALL_AFTER_S + 5, "the stalled state to clear after SIGCONT")
            sfharness.wait_for(lambda: prom_value(prom, "stagefrontier_job_stalled",
                                                  [("job_id", job)]) == 0, 5,
                               "the export to clear")
            for pr in procs:
                if pr.wait(timeout=120) != 0:
                    print("FAIL: a rank exited with %s" % pr.returncode)
                    return 1
        finally:
            for pr in procs:
                if pr.poll() is None:
                    pr.send_signal(signal.SIGCONT)
                    pr.kill()
                    pr.wait()
            shutil.rmtree(tmp, ignore_errors=True)
    print("PASS: stalled within %.2f s (stall_after_s %d), cleared after SIGCONT" %
          (took, STALL_AFTER_S))
    return 0


if __name__ == "__main__":
    sys.exit(main())
