#!/usr/bin/python3
"""Side evidence end to end: the real sfd, a real trainer process that times
its steps with libsfclient and drives the NCCL profiler plugin in backward,
and sfctl. The report shows the plugin's aggregates next to the stage that
enclosed them, in JSON and in the human view; with a synchronizing backward,
sfd splits rows without an explicit arrival at the plugin's enqueue points,
and with kernel times from the plugin alone the communication verdict names
the rank whose collective's kernel starts late. Each run lives in its own
temporary directory; every wait is on a real condition with a generous
overall timeout."""
import json
import os
import subprocess
import sys

from sidetest import (CONF, WINDOW, check_forward_labels, nccl_rows, run_gated, sfdtest,
                      windows)

DRIVER, PLUGIN = os.environ["SF_SIDE_DRIVER"], os.environ["SF_NCCL_PLUGIN"]
STEPS, PER_STEP, SPAN_NS = 30, 4, 100000


SYNC_STEPS, SYNC_PER_STEP, SPIN_NS = 20, 2, 500000
BWD = "model.backward_cpu_wall"


def sync_job(sfd, job, mode):
    """A trainer whose backward is synchronizing, spending SPIN_NS of host
    work before its collectives. The driver closes the plugin (shipping every
    enqueue point) and waits; once sfd holds all of them, the step records
    follow. Returns the job's windows."""
    assert SYNC_STEPS < 64, "the job must fit one client batch"
    # The step records must all wait for the gate: a batch (64 records) holds
    # the whole job, and SF_FLUSH_MS keeps a slow, loaded run from sending
    # a partial batch before its enqueue points reach sfd.
    env = dict(os.environ, SF_SOCKET=sfd.ingest, SF_JOB_ID=job, RANK="0", WORLD_SIZE="1",
               LOCAL_RANK="0", SF_NCCL_FLUSH_MS="2", SF_FLUSH_MS="3600000")
    return run_gated(sfd, [DRIVER, PLUGIN, str(SYNC_STEPS), str(SYNC_PER_STEP), "1000", mode,
                           str(SPIN_NS)], job, SYNC_STEPS, WINDOW, env=env)


def check_enqueue_split(sfd):
    """No explicit mark: every row is split at the plugin's enqueue point,
    so backward's own work holds the host work before the collectives.
    With sf_stage_arrive at backward's start, the explicit mark wins: the
    same host work lands in the sync wait."""
    spun = WINDOW * SPIN_NS / 1e9
    for mode in ("sync", "mark"):
        ws = sync_job(sfd, "side-" + mode, mode)
        for w in ws:
            stages = {st["name"]: st for st in w["stages"]}
            own = stages[BWD]["advance_s"]
            wait = stages[BWD + ".sync_wait"]["advance_s"]
            assert w["counters"]["arrival_missing_steps"] == 0, w["counters"]
            if mode == "sync":
                assert own >= spun, (own, wait)
            else:
                # The host work lies after the mark: all of it in the wait,
                # none in own work, which is only the gap between two calls
                # (bounded by the work itself, not by a fraction of the
                # wait, which one preemption in that gap could exceed).
                assert wait >= spun and own < spun, (own, wait)
    rejected = sfd.status().get("rejected", {})
    assert not any(rejected.values()), rejected


GPU_RANKS, GPU_STEPS, GPU_LATE_RANK = 3, 20, 2
GPU_LATE_NS, GPU_ON_TIME_NS, GPU_SPAN_NS = 3000000, 100000, 50000


def check_kernel_straggler(sfd):
    """Three ranks, no Python marks: each rank's only evidence of its
    communication is the plugin's, the enqueue point and the kernel's
    start and end on the GPU's clock. Rank 2's kernel starts 3 ms after its
    enqueue, the others' 0.1 ms after: the communication verdict names rank
    2 from the plugin's data alone, and it is the window's straggler, with
    origin communication."""
    job = "side-gpu"
    st0 = sfd.status()
    procs = []
    try:
        for rank in range(GPU_RANKS):
            late = GPU_LATE_NS if rank == GPU_LATE_RANK else GPU_ON_TIME_NS
            env = dict(os.environ, SF_SOCKET=sfd.ingest, SF_JOB_ID=job, RANK=str(rank),
                       WORLD_SIZE=str(GPU_RANKS), LOCAL_RANK=str(rank), SF_NCCL_FLUSH_MS="2",
                       SF_FLUSH_MS="3600000")
            procs.append(subprocess.Popen(
                [DRIVER, PLUGIN, str(GPU_STEPS), "1", str(GPU_SPAN_NS), "gpu", str(late)],
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for p in procs:
            assert "finalized" in p.stdout.readline(), "trainer did not finalize"
        # Every point, with its kernel start, is in sfd before any record.
        n = GPU_RANKS * GPU_STEPS
        sfdtest.wait_for(lambda: sfd.status()["kernel_points"] >= st0["kernel_points"] + n and
                         sfd.status()["enqueue_points"] >= st0["enqueue_points"] + n,
                         "every kernel-timed enqueue point of " + job)
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.close()
        for p in procs:
            assert p.wait(timeout=60) == 0, "trainer failed"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    n_windows = GPU_STEPS // WINDOW
    sfdtest.wait_for(lambda: len(windows(sfd, job, n_windows)) == n_windows,
                     "the windows of " + job)
    ws = windows(sfd, job, n_windows)
    status = sfd.status()
    # Every row's issue lag came from its kernel start.
    assert status["kernel_issue_lags"] == st0["kernel_issue_lags"] + n, status
    assert status["kernel_points"] == st0["kernel_points"] + n, status
    for w in ws:
        assert w["counters"]["arrival_missing_steps"] == 0, w["counters"]
        comm = w["communication"]
        assert comm["visibility"] == "seen", comm
        assert comm["marked_rows"] == comm["rows"] == GPU_RANKS * WINDOW, comm
        v = comm["verdict"]
        assert v is not None, comm
        assert v["rank"] == GPU_LATE_RANK and v["sync_stage"] == BWD, v
        # Every step is eligible (all ranks timed). Three spinning ranks on a
        # loaded machine may see one preempted, so a step can go unled.
        assert v["eligible_steps"] == WINDOW and v["led_steps"] > WINDOW // 2, v
        # Host spin gives the lag; preemption can only lengthen it.
        assert GPU_LATE_NS / 1e9 <= v["median_issue_lag_s"] < 1.0, v
        assert GPU_ON_TIME_NS / 1e9 <= v["others_median_issue_lag_s"] < GPU_LATE_NS / 1e9, v
        s = w["straggler"]
        assert s is not None and s["rank"] == GPU_LATE_RANK, w["straggler"]
        assert s["origin"] == "communication" and s["sync_stage"] == BWD, s
    text = sfd.sfctl("report", job, "--last", "1").stdout.decode()
    assert "straggler: rank %d's all-reduce in %s started" % (GPU_LATE_RANK, BWD) in text, text
    assert "(origin communication" in text, text


def main():
    sfd = sfdtest.Sfd(CONF)
    try:
        # Both channels: the plugin, and CUDA-event samples of every
        # forward against the runtime double (1 ms of device time for a
        # forward that takes well under a microsecond on the host).
        env = dict(os.environ, SF_SOCKET=sfd.ingest, SF_JOB_ID="side-job", RANK="0",
                   WORLD_SIZE="1", LOCAL_RANK="0", SF_NCCL_FLUSH_MS="2",
                   SF_TEST_CUDART=os.environ["SF_FAKE_CUDART"], SF_EVENT_SAMPLE="1")
        out = subprocess.run([DRIVER, PLUGIN, str(STEPS), str(PER_STEP), str(SPAN_NS)],
                             env=env, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            sys.exit(f"FAIL: driver: {out.stderr}")
        issued = json.loads(out.stdout)["collectives"]
        n_windows = STEPS // WINDOW

        def shipped(ws):
            return sum(row["count"] for row in nccl_rows(ws))

        # Windows close as the rank reports its steps; the plugin's batches
        # may land a moment later. Wait until every collective is filed.
        def complete():
            ws = windows(sfd, "side-job", n_windows)
            return len(ws) == n_windows and shipped(ws) == issued

        sfdtest.wait_for(complete, "all windows with their side evidence")
        ws = windows(sfd, "side-job", n_windows)
        assert shipped(ws) == issued, (shipped(ws), issued)
        with_side = [w for w in ws if "side_evidence" in w]
        assert with_side, "no window carries side evidence"
        for w in with_side:
            nccl = w["side_evidence"]["nccl"]
            assert [c["name"] for c in nccl["communicators"]] == ["ddp-comm"], nccl
            assert nccl["communicators"][0]["ranks"] == 1
            assert nccl["dropped_events"] == 0
            total = 0
            for row in nccl["collectives"]:
                # All-reduce issued inside backward, attributed there by
                # the step/stage libsfclient published.
                assert row["enclosing_stage"] == "model.backward_cpu_wall", row
                assert (row["collective"], row["datatype"], row["algorithm"],
                        row["protocol"]) == ("AllReduce", "ncclBfloat16", "RING", "SIMPLE")
                assert row["size_bucket"] == 19          # 2^18 bf16 = 2^19 bytes
                assert row["bytes"] == row["count"] << 19
                assert row["timed_count"] == row["count"]
                assert abs(row["gpu_time_s"] - row["count"] * SPAN_NS / 1e9) < 1e-9
                total += row["count"]
            stages = {s["name"]: s for s in w["stages"]}
            assert stages["model.backward_cpu_wall"]["nccl"]["count"] == total
            assert "nccl" not in stages["model.fwd_loss_cpu_wall"]
            # Side evidence never enters the accounting.
            assert abs(sum(s["advance_s"] for s in w["stages"]) - w["exposed_total_s"]) < 1e-6
        # The CUDA-event samples reached the accounting.
        check_forward_labels(ws)
        text = sfd.sfctl("report", "side-job", "--last", str(n_windows)).stdout.decode()
        assert "NCCL side evidence" in text, text
        assert "in model.backward_cpu_wall:" in text, text
        status = sfd.status()
        assert status.get("nccl_batches", 0) > 0 or "nccl_batches" in json.dumps(status)
        # Backward is not synchronizing in side-job: no enqueue point.
        assert status["enqueue_points"] == 0, status
        check_enqueue_split(sfd)
        check_kernel_straggler(sfd)
        rejected = sfd.status().get("rejected", {})
        assert not any(rejected.values()), rejected
        assert sfd.stop() == 0
    finally:
        sfd.close()
    print("PASS")


if __name__ == "__main__":
    main()
