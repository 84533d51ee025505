#!/usr/bin/env python3
"""One real torch process on the GPU, world size 1 with the NCCL backend,
instrumented with the stagefrontier binding, the CUDA-event forward channel
sampling every step and NCCL loading the built profiler plugin. It reports to
a private sfd and checks what sfd shows against what the job did:

- CUDA-event samples arrive and R (ready-event forward over CPU forward) is
  in (0, 1.5]. Forward ends with a device synchronize, so its CPU wall bounds
  its GPU time and R cannot honestly exceed 1; 1.5 leaves room for timers.
- NCCL itself loaded the plugin: its own log says "PROFILER/Plugin: Loaded
  stagefrontier (vN)", and the plugin's init line came through NCCL's logger
  with the same N.
- Collective counts and bytes in the report equal the all-reduces the job
  issued in backward, per communicator where there are several.
- GPU kernel time is present with timed_count <= count, or absent, and then
  the summary says so with the reason.

Run by tests/gpu/run.sh (it sets SFD, SFCTL, SF_NCCL_PLUGIN, PYTHONPATH).
Exit 0: every check passed; 1: a mismatch, listed in the summary."""
import argparse
import glob
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
import sfdtest  # noqa: E402  (path set above)

STEPS = 40
WINDOW = 10
CONF = "[gates]\nwarmup_steps = 0\nwindow_steps = %d\n" % WINDOW
# The all-reduces each step issues in backward: (elements, dtype name, bytes per element).
PLAN = [(1 << 20, "float32", 4), (1 << 16, "float32", 4), (4096, "bfloat16", 2)]
NCCL_DTYPE = {"float32": "ncclFloat32", "bfloat16": "ncclBfloat16"}


class Summary:
    def __init__(self, case):
        self.case, self.lines, self.failed = case, [], 0

    def check(self, ok, what):
        self.lines.append("%s %s" % ("ok  " if ok else "FAIL", what))
        self.failed += 0 if ok else 1

    def note(self, what):
        self.lines.append("note " + what)

    def print(self):
        print("== gpu case %s: %d checks failed" % (self.case, self.failed))
        for line in self.lines:
            print("   " + line)


def communicators(dist, case):
    """The default group, plus two more NCCL communicators on the same GPU."""
    groups = [None]
    if case == "multi":
        groups += [dist.new_group([0], backend="nccl") for _ in range(2)]
    return groups


def run_job(torch, dist, rec, groups):
    """Trains a small MLP; returns what it issued per communicator index:
    {index: {(nccl dtype, bytes of one all-reduce): count}}."""
    dev = torch.device("cuda", 0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    buffers = [torch.zeros(n, dtype=getattr(torch, dt), device=dev) for n, dt, _ in PLAN]
    issued = {}
    for step in range(STEPS):
        with rec.step():
            with rec.stage("data.next_wait"):
                x = torch.randn(256, 1024, device=dev)
            with rec.stage("model.fwd_loss_cpu_wall"):
                loss = model(x).square().mean()
                torch.cuda.synchronize()
            with rec.stage("model.backward_cpu_wall"):
                loss.backward()
                for i, ((n, dt, size), buf) in enumerate(zip(PLAN, buffers)):
                    g = (step + i) % len(groups)
                    dist.all_reduce(buf, group=groups[g])
                    key = (NCCL_DTYPE[dt], n * size)
                    issued.setdefault(g, {})[key] = issued.get(g, {}).get(key, 0) + 1
            with rec.stage("optim.step_cpu_wall"):
                opt.step()
                opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return issued


def report_windows(sfd, job):
    r = sfd.sfctl("report", job, "--last", str(STEPS // WINDOW), "--json", check_rc=None)
    return json.loads(r.stdout) if r.returncode == 0 else []


def check_events(s, ws):
    samples = sum(w["events"]["samples"] for w in ws)
    ready = sum(w["events"]["ready"] for w in ws)
    s.check(samples > 0 and ready > 0, "CUDA-event samples arrived: %d, %d ready" % (samples, ready))
    for w in ws:
        r = w["events"]["ratio"]
        if w["events"]["ready"]:
            s.check(r is not None and 0 < r <= 1.5, "window %s: R = %s in (0, 1.5]" % (w["window"], r))


def check_plugin_loaded(s, log_dir):
    text = "".join(open(p, errors="replace").read() for p in glob.glob(os.path.join(log_dir, "*")))
    loaded = re.search(r"PROFILER/Plugin: [Ll]oaded stagefrontier(?: \(v(\d+)\))?", text)
    init = re.search(r"stagefrontier profiler: init v(\d+) comm", text)
    s.check(loaded is not None, "NCCL's log says it loaded the stagefrontier plugin")
    s.check(init is not None, "the plugin's init ran through NCCL's logger")
    if loaded and init:
        chosen = loaded.group(1) or "4"        # NCCL's v4 loader names no version
        s.check(chosen == init.group(1), "NCCL chose v%s and init ran as v%s" % (chosen, init.group(1)))


def check_collectives(s, ws, issued, n_comms):
    rows = [r for w in ws for r in w.get("side_evidence", {}).get("nccl", {}).get("collectives", [])
            if r["collective"] == "AllReduce" and r["enclosing_stage"] == "model.backward_cpu_wall"]
    want_count = sum(c for per in issued.values() for c in per.values())
    want_bytes = sum(c * b for per in issued.values() for (_, b), c in per.items())
    got_count, got_bytes = sum(r["count"] for r in rows), sum(r["bytes"] for r in rows)
    s.check(got_count == want_count, "all-reduces in backward: %d reported, %d issued" % (got_count, want_count))
    s.check(got_bytes == want_bytes, "bytes: %d reported, %d issued" % (got_bytes, want_bytes))
    for dt in sorted({k[0] for per in issued.values() for k in per}):
        want = sum(c for per in issued.values() for (d, _), c in per.items() if d == dt)
        got = sum(r["count"] for r in rows if r["datatype"] == dt)
        s.check(got == want, "%s: %d reported, %d issued" % (dt, got, want))
    comms = {c["hash"] for w in ws for c in w.get("side_evidence", {}).get("nccl", {}).get("communicators", [])}
    s.check(len(comms) >= n_comms, "communicators seen: %d, used: %d" % (len(comms), n_comms))
    timed = sum(r["timed_count"] for r in rows)
    if timed:
        s.check(timed <= got_count and all(r["gpu_time_s"] and r["gpu_time_s"] > 0
                                           for r in rows if r["timed_count"]),
                "GPU kernel time present: %d of %d collectives timed" % (timed, got_count))
    else:
        s.note("GPU kernel time absent: no kernel-channel event reached the plugin for these "
               "collectives (NCCL offers none for them, e.g. one-rank collectives run no NCCL kernel)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", choices=("single", "multi"), required=True)
    case = ap.parse_args().case
    s = Summary(case)
    log_dir = tempfile.mkdtemp(prefix="sf-gpu-nccl-")
    sfd = sfdtest.Sfd(CONF)
    job = "gpu-" + case
    try:
        os.environ.update(SF_SOCKET=sfd.ingest, SF_JOB_ID=job, RANK="0", WORLD_SIZE="1",
                          LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(sfdtest.free_port()),
                          NCCL_PROFILER_PLUGIN=os.environ["SF_NCCL_PLUGIN"], NCCL_DEBUG="INFO",
                          NCCL_DEBUG_SUBSYS="INIT,ENV", NCCL_DEBUG_FILE=os.path.join(log_dir, "nccl.%p"),
                          SF_NCCL_FLUSH_MS="5")
        import torch
        import torch.distributed as dist
        import stagefrontier as sf
        torch.cuda.set_device(0)
        torch.cuda.init()               # the runtime is loaded before the recorder looks for it
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
        rec = sf.Recorder(job_id=job, socket=sfd.ingest, rank=0, world_size=1,
                          event_sample_fraction=1.0)
        groups = communicators(dist, case)
        issued = run_job(torch, dist, rec, groups)
        rec.close()
        dist.destroy_process_group()    # finalize flushes each communicator's last figures

        want = sum(c for per in issued.values() for c in per.values())

        def filed():
            ws = report_windows(sfd, job)
            rows = [r for w in ws for r in w.get("side_evidence", {}).get("nccl", {}).get("collectives", [])
                    if r["collective"] == "AllReduce"]
            return len(ws) == STEPS // WINDOW and sum(r["count"] for r in rows) >= want

        sfdtest.wait_for(filed, "every window and every all-reduce in the report")
        ws = report_windows(sfd, job)
        check_events(s, ws)
        check_plugin_loaded(s, log_dir)
        check_collectives(s, ws, issued, len(groups))
    finally:
        sfd.close()
    s.print()
    return 1 if s.failed else 0


if __name__ == "__main__":
    sys.exit(main())
