#!/usr/bin/python3
"""The deployment path of PyTorch jobs: libsfclient lives in the stagefrontier
Python extension (loaded RTLD_LOCAL), and NCCL (here a ctypes stand-in that
drives the real plugin) issues collectives while Python stages are open. The
plugin must find the published step and stage anyway: an all-gather issued in
forward is filed under forward in the real sfd's report, all-reduces under
backward, and the channel-1 Hello matches the job's schema. The recorder also
samples forward with CUDA events against the runtime double."""
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

import stagefrontier as sf

SFD, SFCTL = os.environ["SFD"], os.environ["SFCTL"]
PLUGIN, DRIVE = os.environ["SF_NCCL_PLUGIN"], os.environ["SF_NCCL_DRIVE"]
FAKE_CUDART = os.environ["SF_FAKE_CUDART"]
STEPS, WINDOW = 20, 10
DEADLINE = time.monotonic() + 120


def wait_for(what, pred):
    while not pred():
        if time.monotonic() > DEADLINE:
            sys.exit(f"FAIL: timed out waiting for {what}")
        time.sleep(0.02)


def main():
    with tempfile.TemporaryDirectory(prefix="sf-side-py-") as tmp:
        ingest, query = os.path.join(tmp, "ingest.sock"), os.path.join(tmp, "query.sock")
        conf = os.path.join(tmp, "sfd.conf")
        with open(conf, "w") as f:
            f.write(f"[gates]\nwarmup_steps = 0\nwindow_steps = {WINDOW}\n")
        log = open(os.path.join(tmp, "sfd.log"), "w")
        sfd = subprocess.Popen([SFD, "-c", conf, "-r", tmp, "-i", ingest, "-q", query],
                               stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for("sfd sockets", lambda: os.path.exists(ingest) and os.path.exists(query))
            os.environ.update(SF_SOCKET=ingest, SF_JOB_ID="py-side", RANK="0", WORLD_SIZE="1",
                              SF_NCCL_FLUSH_MS="2")
            # The "framework" loads its CUDA runtime first (here the double,
            # 1 ms per sampled forward); the recorder samples every forward.
            ctypes.CDLL(FAKE_CUDART, mode=ctypes.RTLD_GLOBAL)
            rec = sf.Recorder(job_id="py-side", socket=ingest, rank=0, world_size=1,
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

            def windows():
                r = subprocess.run([SFCTL, "--socket", query, "report", "py-side", "--last",
                                    str(STEPS // WINDOW), "--json"], capture_output=True,
                                   text=True, timeout=60)
                return json.loads(r.stdout) if r.returncode == 0 else []

            def rows(ws):
                return [row for w in ws for row in
                        w.get("side_evidence", {}).get("nccl", {}).get("collectives", [])]

            wait_for("every collective in the report",
                     lambda: sum(r["count"] for r in rows(windows())) == 3 * STEPS)
            ws = windows()
            by = {}
            for row in rows(ws):
                key = (row["collective"], row["enclosing_stage"])
                by[key] = by.get(key, 0) + row["count"]
            assert by == {("AllGather", "model.fwd_loss_cpu_wall"): STEPS,
                          ("AllReduce", "model.backward_cpu_wall"): 2 * STEPS}, by
            for row in rows(ws):
                span = 50000 if row["collective"] == "AllGather" else 20000
                assert row["timed_count"] == row["count"], row
                assert abs(row["gpu_time_s"] - row["count"] * span / 1e9) < 1e-9, row
            fwd = [s for w in ws for s in w["stages"]
                   if s["name"] == "model.fwd_loss_cpu_wall" and "nccl" in s]
            assert sum(s["nccl"]["count"] for s in fwd) == STEPS
            # CUDA-event samples from the Python recorder reached the labels:
            # R >= 0.5 by construction, so they follow the routing (DESIGN 1).
            for w in ws:
                fwd_routed = "model.fwd_loss_cpu_wall" in w["routing_set"]
                bwd_leads = w["routing_set"][:1] == ["model.backward_cpu_wall"]
                labels = set(w["labels"])
                assert ("forward_device_supported" in labels) == fwd_routed, w
                assert ("forward_spillover_suspected" in labels) == (bwd_leads and not fwd_routed), w
                assert "forward_event_scope_limited" not in labels, w
            # The channel-1 Hello carried the job's own schema: no rejection,
            # no early window close.
            status = json.loads(subprocess.run([SFCTL, "--socket", query, "status", "--json"],
                                               capture_output=True, text=True).stdout)
            rejected = status.get("rejected", {})
            assert not any(rejected.values()), rejected
            assert all(w["window"]["segment"] == ws[0]["window"]["segment"] for w in ws)
        finally:
            sfd.terminate()
            sfd.wait(timeout=30)
            log.close()
    print("PASS")


if __name__ == "__main__":
    main()
