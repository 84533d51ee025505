#!/usr/bin/python3
"""The deployment path of PyTorch jobs: libsfclient lives in the stagefrontier
Python extension (loaded RTLD_LOCAL), and NCCL (here a ctypes stand-in that
drives the real plugin) issues collectives while Python stages are open. The
plugin must find the published step and stage anyway: an all-gather issued in
forward is filed under forward in the real sfd's report, all-reduces under
backward, and the channel-1 Hello matches the job's schema. The recorder also
samples forward with CUDA events against the runtime double."""
import ctypes
import os

import stagefrontier as sf
from sidetest import CONF, WINDOW, check_forward_labels, nccl_rows, sfdtest, windows

PLUGIN, DRIVE = os.environ["SF_NCCL_PLUGIN"], os.environ["SF_NCCL_DRIVE"]
FAKE_CUDART = os.environ["SF_FAKE_CUDART"]
STEPS = 20


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
        nccl = ctypes.CDLL(DRIVE)          # RTLD_LOCAL, like NCCL
        nccl.sf_test_nccl_collective.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                                 ctypes.c_ulong, ctypes.c_ulonglong]
        assert nccl.sf_test_nccl_open(PLUGIN.encode(), b"fsdp-comm") == 0
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
        assert sfd.stop() == 0
    finally:
        sfd.close()
    print("PASS")


if __name__ == "__main__":
    main()
