#!/usr/bin/python3
"""Memory and throughput of `sfctl import kineto` against trace size.

Generates synthetic gzipped Kineto traces (outside the repository, in a
temporary directory) shaped like torch.profiler's: per step a ProfilerStep
range, the binding's stage ranges, DataLoader/optimizer/autograd ops and
many unmapped aten ops with args, about 220 bytes per event. For each size
it runs, side by side on the same file, `zcat FILE > /dev/null` (the
physical anchor: decompression alone) and `sfctl import kineto FILE -o
OUT.jsonl`, REPEAT times alternating, and reports MB/s of uncompressed trace
(best wall time, and CPU time, which a shared machine disturbs less) and
each process's peak RSS (wait4, via peak_rss). Use a Release build.

usage: import_bench.py BUILD_DIR [--sizes 64,256,1024] [--repeat 3] [--keep DIR]
"""

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

OPS = ["aten::empty", "aten::as_strided", "aten::select", "aten::copy_", "aten::to",
       "aten::_to_copy", "aten::mul", "aten::add_", "aten::linear", "aten::addmm"]


def step_events(step, t0):
    """One step's events (strings) and the step's length in us."""
    ev = []

    def x(name, ts, dur, cat="cpu_op", tid=1, args='{"External id": %d}'):
        ev.append('{"ph":"X","cat":"%s","name":"%s","pid":4242,"tid":%d,"ts":%.3f,"dur":%.3f,'
                  '"args":%s}' % (cat, name, tid, ts, dur, args % (len(ev) + step * 1000)
                                  if "%d" in args else args))

    t = t0
    x("ProfilerStep#%d" % step, t, 100000.0, "user_annotation")
    x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 5000.0)
    x("data.next_wait", t, 5100.0, "user_annotation")
    t += 5100
    stages = [("model.fwd_loss_cpu_wall", 30000.0), ("model.backward_cpu_wall", 45000.0),
              ("callbacks.cpu_wall", 2000.0), ("optim.step_cpu_wall", 15000.0)]
    for name, dur in stages:
        x(name, t, dur, "user_annotation")
        if name.startswith("model.backward"):
            for k in range(40):
                x("autograd::engine::evaluate_function: AddmmBackward%d" % k,
                  t + k * dur / 40, dur / 40 * 0.9, tid=2)
        if name.startswith("optim"):
            x("Optimizer.step#AdamW.step", t, dur)
        # Unmapped ops: most of a real trace's bytes.
        n = int(dur / 25)
        for k in range(n):
            x(OPS[k % len(OPS)], t + k * 25.0, 20.0,
              args='{"Input Dims": [[64, 256], [256]], "Input type": ["float", "float"], '
                   '"External id": %d}')
        t += dur
    return ev, 100000.0


def generate(path, target_mb):
    """Writes a gzipped trace of about target_mb MB uncompressed."""
    target = target_mb * 1000000
    written = 0
    with gzip.open(path, "wt", compresslevel=1) as f:
        head = ('{"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":0,'
                '"world_size":1},"deviceProperties":[],"traceEvents":[\n')
        f.write(head)
        written += len(head)
        step, t, first = 0, 1700000000000000.0, True
        while written < target:
            ev, length = step_events(step, t)
            chunk = (",\n" if not first else "") + ",\n".join(ev)
            first = False
            f.write(chunk)
            written += len(chunk)
            step += 1
            t += length
        tail = '\n],"traceName":"synthetic","displayTimeUnit":"ms"}\n'
        f.write(tail)
        written += len(tail)
    return written, step


def run(peak_rss, cmd, stdout):
    """Wall seconds, CPU seconds and peak RSS (MB) of one process."""
    p = subprocess.run([peak_rss] + cmd, stdout=stdout, stderr=subprocess.PIPE,
                       universal_newlines=True)
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
    if p.returncode != 0 or not last.startswith("wall_s="):
        raise RuntimeError("%s: rc %d: %s" % (" ".join(cmd), p.returncode, p.stderr))
    fields = dict(kv.split("=") for kv in last.split())
    return (float(fields["wall_s"]), float(fields["cpu_s"]),
            int(fields["maxrss_kb"]) / 1024.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", help="a Release build directory")
    ap.add_argument("--sizes", default="64,256,1024", help="uncompressed MB per trace")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", default=None, help="work directory (kept)")
    a = ap.parse_args()
    sfctl = os.path.join(a.build, "daemon", "sfctl", "sfctl")
    peak = os.path.join(a.build, "bench", "import", "peak_rss")
    work = a.keep or tempfile.mkdtemp(prefix="sf-import-bench-")
    os.makedirs(work, exist_ok=True)
    print("%8s %7s %6s | %10s %10s %7s | %10s %10s %7s | %9s %9s %7s" % (
        "trace_MB", "gz_MB", "steps", "zcat_MB/s", "zcat_cpu", "RSS_MB", "imp_MB/s",
        "imp_cpu", "RSS_MB", "wall_ratio", "cpu_ratio", "out_MB"))
    try:
        for mb in [int(s) for s in a.sizes.split(",")]:
            path = os.path.join(work, "trace-%dMB.json.gz" % mb)
            size, steps = generate(path, mb)
            out = os.path.join(work, "out-%d.jsonl" % mb)
            z, i = [], []
            with open(os.devnull, "wb") as null:
                for _ in range(a.repeat):
                    z.append(run(peak, ["zcat", path], null))
                    i.append(run(peak, [sfctl, "import", "kineto", path, "-o", out], null))
            mbs = size / 1e6
            zw, zc, zr = min(x[0] for x in z), min(x[1] for x in z), max(x[2] for x in z)
            iw, ic, ir = min(x[0] for x in i), min(x[1] for x in i), max(x[2] for x in i)
            print("%8.0f %7.1f %6d | %10.1f %10.1f %7.1f | %10.1f %10.1f %7.1f | %9.2f %9.2f %7.2f"
                  % (mbs, os.path.getsize(path) / 1e6, steps, mbs / zw, mbs / zc, zr,
                     mbs / iw, mbs / ic, ir, zw / iw, zc / ic, os.path.getsize(out) / 1e6))
            sys.stdout.flush()
            os.unlink(path)
            os.unlink(out)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
