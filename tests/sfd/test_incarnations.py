"""Job identity (docs/SFD.md, "Identity"): a job id run again is a new
incarnation with fresh windows, on one sfd and after a restart on the same
state dir; an elastic restart of one run is a new segment of the same
incarnation; two launches with one job id at once are two incarnations; and
a rank that claims a step far in the future moves no window of its job."""

import json
import os
import subprocess

from sfdtest import SFCTL, Sfd, check, send, sender_args, wait_for

CLIENT_JOB = os.environ["SF_CLIENT_JOB"]
CONF = """[sfd]
window_grace_ms = 1000
[gates]
warmup_steps = 0
window_steps = 10
baseline_windows = 3
"""
LAUNCHER_VARS = ("SF_RUN_ID", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
                 "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_RESTART_COUNT", "MASTER_ADDR",
                 "MASTER_PORT", "SF_RESTART_COUNT", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def incarnations(sfd, job):
    listed = json.loads(sfd.sfctl("jobs", "--json").stdout)
    return sorted((j for j in listed if j["job_id"] == job), key=lambda j: j["incarnation"])


def run_job(sfd, job, world=2, steps=30, **env):
    """One launch of the real client library: every rank at once, to the end."""
    e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    e.update(env)
    e["SF_HEARTBEAT_MS"] = "0"
    procs = [subprocess.Popen([CLIENT_JOB, sfd.ingest, job, str(r), str(world), str(steps), "-1",
                               "0", "0", "50", "1"], env=e, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
             for r in range(world)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0, "client job %s: rc %d %s" % (job, p.returncode, err))


def settled(sfd, job, incarnation, windows):
    def done():
        js = [j for j in incarnations(sfd, job) if j["incarnation"] == incarnation]
        return js and js[0]["windows"] >= windows and js[0]["open_windows"] == 0 and js[0]
    return wait_for(done, "%s@%d with %d windows" % (job, incarnation, windows))


def report_window_count(sfd, name):
    p = sfd.sfctl("report", name, "--last", "10", "--json")
    return len(json.loads(p.stdout))


def check_reruns(sfd):
    run_job(sfd, "rerun")
    first = settled(sfd, "rerun", 1, 3)
    run_job(sfd, "rerun")
    second = settled(sfd, "rerun", 2, 3)
    for j in (first, second):
        check(j["records"] == 60 and j["rejected"] == 0, "a run lost records: %s" % j)
    check(sfd.rejected("duplicate_record") == 0 and sfd.rejected("late_record") == 0,
          "rerun rejected: %s" % sfd.status()["rejected"])
    check([j["newest"] for j in incarnations(sfd, "rerun")] == [False, True],
          "newest flags: %s" % incarnations(sfd, "rerun"))
    check(report_window_count(sfd, "rerun@1") == 3 and report_window_count(sfd, "rerun@2") == 3,
          "each incarnation's reports")
    table = sfd.sfctl("jobs").stdout.decode()
    check(any(line.split()[:3] == ["rerun", str(os.getuid()), "2"] for line in table.splitlines()),
          "jobs table lacks incarnation 2:\n" + table)
    sfd.sfctl("report", "rerun@3", check_rc=5)
    sfd.sfctl("report", "rerun@0", check_rc=2)


def check_restart(sfd):
    sfd.stop()
    sfd.start()
    check([j["incarnation"] for j in incarnations(sfd, "rerun")] == [1, 2],
          "restored incarnations: %s" % incarnations(sfd, "rerun"))
    before = sfd.status()["rejected"]
    run_job(sfd, "rerun")
    third = settled(sfd, "rerun", 3, 3)
    after = sfd.status()["rejected"]
    check(third["records"] == 60 and after["late_record"] == before["late_record"] and
          after["duplicate_record"] == before["duplicate_record"],
          "run after restart: %s, rejected %s" % (third, after))
    check(third["state"] != "stalled", "new run stalled: %s" % third)


def check_elastic(sfd):
    run_job(sfd, "elastic", SF_RUN_ID="el-1", TORCHELASTIC_RESTART_COUNT="0", steps=60)
    one = settled(sfd, "elastic", 1, 6)
    base = json.loads(sfd.sfctl("baseline", "elastic", "--json").stdout)
    # The restart begins again from a checkpoint: steps 0.. once more.
    run_job(sfd, "elastic", SF_RUN_ID="el-1", TORCHELASTIC_RESTART_COUNT="1", steps=30)
    js = incarnations(sfd, "elastic")
    check(len(js) == 1 and js[0]["segment"] == one["segment"] + 1,
          "elastic restart is not a new segment: %s" % js)
    wait_for(lambda: incarnations(sfd, "elastic")[0]["records"] == 180, "the restart's records")
    after = json.loads(sfd.sfctl("baseline", "elastic", "--json").stdout)
    check(base["baseline"] is not None and after["baseline"] == base["baseline"],
          "baseline not kept across the restart: %s -> %s" % (base, after))


def check_concurrent_runs(sfd):
    e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    e["SF_HEARTBEAT_MS"] = "0"
    procs = []
    for run in ("a", "b"):
        e["SF_RUN_ID"] = "twin-" + run
        procs.append(subprocess.Popen([CLIENT_JOB, sfd.ingest, "twin", "0", "1", "40", "-1", "0",
                                       "0", "2000", "1"], env=dict(e)))
    for p in procs:
        check(p.wait(timeout=120) == 0, "twin run failed")
    js = incarnations(sfd, "twin")
    check(sorted(j["run_id"] for j in js) == ["twin-a", "twin-b"] and
          all(j["records"] == 40 for j in js), "two launches at once: %s" % js)


def check_late_side_channel(sfd):
    """The NCCL plugin ships its last batch at close, which can reach sfd
    after its process's step channel has gone: it belongs to that run and
    starts no new one."""
    rc, out, p = send(sfd, mode="enqueue_records", job="side-late", rank=0, world=1)
    check(rc == 0 and out.get("sent") == "4", "step records: %s" % p.stderr)
    wait_for(lambda: incarnations(sfd, "side-late")[0]["connected_ranks"] == 0,
             "the step channel gone")
    points = sfd.status()["enqueue_points"]
    rc, out, p = send(sfd, mode="enqueue_points", job="side-late", rank=0, world=1)
    check(rc == 0, "side channel: %s" % p.stderr)
    wait_for(lambda: sfd.status()["enqueue_points"] > points, "the late enqueue points")
    js = incarnations(sfd, "side-late")
    check([j["incarnation"] for j in js] == [1], "a late side channel started a run: %s" % js)


def check_lying_rank(sfd):
    """Ranks 0 and 1 run; rank 2 claims step 2^62-1 with a drop total of 2^63-1.
    Window 10 must not get a deadline from it: rank 1's records for it come
    after window 9, which rank 0's step 100 armed, has closed."""
    def holder(rank):
        p = subprocess.Popen(sender_args(sfd, mode="capture-peer", job="liar", rank=rank, world=3,
                                         steps=100, batch=10),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        check(p.stdout.readline().strip() == "ready", "rank %d did not start" % rank)
        return p

    def records(p, n):
        p.stdin.write("records %d\n" % n)
        p.stdin.flush()
        check(p.stdout.readline().strip() == "ok", "records not sent")

    ranks = [holder(0), holder(1)]
    before = sfd.status()["rejected"]
    liar = subprocess.run(sender_args(sfd, job="liar", rank=2, world=3, steps=1, batch=1,
                                      start=(1 << 62) - 1, drop_total=(1 << 63) - 1),
                          capture_output=True, timeout=60)
    check(liar.returncode == 0, "liar: %s" % liar.stderr)
    wait_for(lambda: sfd.status()["rejected"]["future_step"] == before["future_step"] + 1,
             "the liar's step refused")
    records(ranks[0], 5)
    wait_for(lambda: incarnations(sfd, "liar")[0]["latest_window"] == 9, "window 9 closed")
    records(ranks[1], 5)
    for p in ranks:
        p.stdin.close()
        p.wait(timeout=60)
    job = wait_for(lambda: (lambda j: j["open_windows"] == 0 and j)(incarnations(sfd, "liar")[0]),
                   "liar's windows closed")
    after = sfd.status()["rejected"]
    check(after["late_record"] == before["late_record"], "honest records late: %s" % after)
    check(job["records"] == 210, "honest records lost: %s" % job)
    check(job["dropped"] <= 111, "drops beyond what the rank could send: %s" % job)


def main():
    sfd = Sfd(CONF)
    try:
        check_reruns(sfd)
        check_restart(sfd)
        check_elastic(sfd)
        check_concurrent_runs(sfd)
        check_late_side_channel(sfd)
        check_lying_rank(sfd)
        sfd.stop()
    finally:
        sfd.close()
    print("incarnations: ok")


if __name__ == "__main__":
    main()
