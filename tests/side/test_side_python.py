#!/usr/bin/python3
"""The deployment path of PyTorch jobs: libsfclient lives in the stagefrontier
Python extension (loaded RTLD_LOCAL), and NCCL (here a ctypes stand-in that
drives the real plugin) issues collectives while Python stages are open. The
plugin must find the published step and stage anyway: an all-gather issued in
forward is filed under forward in the real sfd's report, all-reduces under
backward, and the channel-1 Hello matches the job's schema. The recorder also
samples forward with CUDA events against the runtime double. A second process
with a synchronizing, unmarked backward gets its rows split at the plugin's
enqueue points."""
import ctypes
import os
import sys
import time

import stagefrontier as sf
from sidetest import (CONF, WINDOW, check_forward_labels, nccl_rows, run_gated, sfdtest,
                      windows)

PLUGIN, DRIVE = os.environ["SF_NCCL_PLUGIN"], os.environ["SF_NCCL_DRIVE"]
FAKE_CUDART = os.environ["SF_FAKE_CUDART"]
STEPS = 20
SYNC_STEPS, SPIN_S = 20, 0.0005


def open_nccl(comm):
    """The NCCL stand-in, loaded RTLD_LOCAL like NCCL, with the plugin open."""
    nccl = ctypes.CDLL(DRIVE)
    nccl.sf_test_nccl_collective.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                             ctypes.c_ulong, ctypes.c_ulonglong]
    assert nccl.sf_test_nccl_open(PLUGIN.encode(), comm) == 0
    return nccl


def sync_child(sock):
    """A second trainer process (the plugin ships for one job per process):
    backward is synchronizing and never marked; host work of SPIN_S, then
    the collectives. It closes the plugin (shipping every enqueue point) and
    waits for the parent's word before its records go out."""
    # SF_FLUSH_MS: no partial batch leaves before the gate, however slow the
    # loaded machine makes this loop (the job fits one 64-record batch).
    os.environ.update(SF_SOCKET=sock, SF_JOB_ID="py-sync", RANK="0", WORLD_SIZE="1",
                      SF_NCCL_FLUSH_MS="2", SF_FLUSH_MS="3600000")
    rec = sf.Recorder(job_id="py-sync", socket=sock, rank=0, world_size=1,
                      sync_stages=["model.backward_cpu_wall"])
    nccl = open_nccl(b"ddp-comm")
    for _ in range(SYNC_STEPS):
        with rec.step():
            with rec.stage("model.backward_cpu_wall"):
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < SPIN_S:   # host work, not a wait
                    pass
                assert nccl.sf_test_nccl_collective(b"AllReduce", b"ncclFloat32",
                                                    1 << 16, 20000) == 0
    assert nccl.sf_test_nccl_close() == 0
    print("finalized", flush=True)
    sys.stdin.readline()
    rec.close()


def check_enqueue_split(sfd):
    """The Python deployment path without marks: sfd splits backward at the
    plugin's enqueue points, so its own work holds the host work."""
    ws = run_gated(sfd, [sys.executable, __file__, "sync-child", sfd.ingest], "py-sync",
                   SYNC_STEPS, WINDOW)
    for w in ws:
        stages = {st["name"]: st for st in w["stages"]}
        assert w["counters"]["arrival_missing_steps"] == 0, w["counters"]
        assert stages["model.backward_cpu_wall"]["advance_s"] >= WINDOW * SPIN_S, stages
        assert "model.backward_cpu_wall.sync_wait" in stages, stages


def main():
    sfd = sfdtest.Sfd(CONF)
    try:
        os.environ.update(SF_SOCKET=sfd.ingest, SF_JOB_ID="py-side", RANK="0", WORLD_SIZE="1",
                          SF_NCCL_FLUSH_MS="2")
        # The "framework" loads its CUDA runtime first (here the double,
        # 1 ms per sampled forward); the recorder samples every forward.
        ctypes.CDLL(FAKE_CUDART, mode=ctypes.RTLD_GLOBAL)
        rec = sf.Recorder(job_id="py-side", socket=sfd.ingest, rank=0, world_size=1,
                          event_sample_fraction=1.0)
        nccl = open_nccl(b"fsdp-comm")
        for _ in range(STEPS):
            with rec.step():
                with rec.stage("data.next_wait"):
                    pass
                with rec.stage("model.fwd_loss_cpu_wall"):
                    assert nccl.sf_test_nccl_collective(b"AllGather", b"ncclBfloat16",
                                                        1 << 20, 50000) == 0
                with rec.stage("model.backward_cpu_wall"):
                    for _ in range(2):
                        assert nccl.sf_test_nccl_collective(b"AllReduce", b"ncclFloat32",
                                                            1 << 16, 20000) == 0
                with rec.stage("optim.step_cpu_wall"):
                    pass
        assert nccl.sf_test_nccl_close() == 0
        rec.close()

        def filed():
            return sum(r["count"] for r in nccl_rows(windows(sfd, "py-side", n_windows)))

        n_windows = STEPS // WINDOW
        sfdtest.wait_for(lambda: filed() == 3 * STEPS, "every collective in the report")
        ws = windows(sfd, "py-side", n_windows)
        by = {}
        for row in nccl_rows(ws):
            key = (row["collective"], row["enclosing_stage"])
            by[key] = by.get(key, 0) + row["count"]
        assert by == {("AllGather", "model.fwd_loss_cpu_wall"): STEPS,
                      ("AllReduce", "model.backward_cpu_wall"): 2 * STEPS}, by
        for row in nccl_rows(ws):
            span = 50000 if row["collective"] == "AllGather" else 20000
            assert row["timed_count"] == row["count"], row
            assert abs(row["gpu_time_s"] - row["count"] * span / 1e9) < 1e-9, row
        fwd = [s for w in ws for s in w["stages"]
               if s["name"] == "model.fwd_loss_cpu_wall" and "nccl" in s]
        assert sum(s["nccl"]["count"] for s in fwd) == STEPS
        # CUDA-event samples from the Python recorder reached the labels.
        check_forward_labels(ws)
        # The channel-1 Hello carried the job's own schema: no rejection,
        # no early window close.
        rejected = sfd.status().get("rejected", {})
        assert not any(rejected.values()), rejected
        assert all(w["window"]["segment"] == ws[0]["window"]["segment"] for w in ws)
        check_enqueue_split(sfd)
        rejected = sfd.status().get("rejected", {})
        assert not any(rejected.values()), rejected
        assert sfd.stop() == 0
    finally:
        sfd.close()
    print("PASS")


if __name__ == "__main__":
    if sys.argv[1:2] == ["sync-child"]:
        sync_child(sys.argv[2])
    else:
        main()
