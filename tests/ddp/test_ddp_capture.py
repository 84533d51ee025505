#!/usr/bin/python3
"""CI-sized live check of the automatic capture (docs/SFD.md, "Captures"): a
real 4-rank PyTorch DDP job (Gloo, CPU) with a backward-compute straggler on
a hidden rank, sfd with auto_capture on. The straggler verdict persists for
two windows, so sfd asks the hidden rank and one healthy control rank (the
median step time) for a torch.profiler trace of auto_capture_steps steps.

--row cooldown: the fault persists in every later window, within the
  cooldown: exactly one capture, of the hidden rank plus a control rank.
--row budget: no cooldown, auto_capture_max = 2: exactly two captures.
--row communication: the hidden rank's inner comm hook waits a tenth of a
  step before it issues its all-reduce, so it arrives on time; the
  communication verdict persists, and the one capture (within the cooldown)
  names the hidden rank with a communication reason.
The capture says communication true in the communication row and false in
the others; its request asked the ranks for the collectives' shapes
(record_shapes): where this torch build writes shapes into its traces
("Input Dims", Kineto), the communication row's traces hold them and the
others' none.
Both rows: every trace file exists, is gzipped JSON owned by the job's user
in SF_CAPTURE_DIR, and holds a ProfilerStep#N range for each captured step
and the stages as record_function ranges, and its distributedInfo names its
rank and the world size. The round trip: each capture's pair re-imports with
`sfctl import kineto` (a partial set: the missing ranks named) and replays.
Exit 77 only without torch/Gloo.
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))

import faults  # noqa: E402
import sfharness  # noqa: E402

SKIP = 77
WARMUP = 6
WINDOW = 8
WINDOWS = 4
STEPS = 3
MAGNITUDE = 1.5
ROWS = {
    "cooldown": {"auto_capture_cooldown_s": 600, "auto_capture_max": 3, "want": 1},
    "budget": {"auto_capture_cooldown_s": 0, "auto_capture_max": 2, "want": 2},
    "communication": {"auto_capture_cooldown_s": 600, "auto_capture_max": 3, "want": 1,
                      "fault": "backward_comm", "magnitude": 0.1, "reason": "communication"},
}


def fail(msg, caps=None):
    print("FAIL: " + msg)
    if caps is not None:
        print(json.dumps(caps, indent=1))
    return 1


def writes_shapes():
    """Whether this torch build's Chrome traces carry record_shapes' "Input
    Dims" (Kineto does; the legacy profiler writes no args)."""
    import torch
    import torch.profiler as tp
    with tp.profile(activities=[tp.ProfilerActivity.CPU], record_shapes=True) as p:
        torch.ones(2, 2).sum()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        p.export_chrome_trace(path)
        with open(path) as f:
            return "Input Dims" in f.read()
    finally:
        os.unlink(path)


def check_trace(path, first, last, rank, world, shapes=None):
    """None when the trace holds ProfilerStep#first..last, the stages and
    distributedInfo with the rank and world size, and (shapes not None)
    record_shapes' input dims or none."""
    if not os.path.isfile(path):
        return "trace %s does not exist" % path
    st = os.stat(path)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        return "trace %s: owner %d mode %o" % (path, st.st_uid, st.st_mode & 0o777)
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {e.get("name") for e in events}
    want = {"ProfilerStep#%d" % s for s in range(first, last + 1)}
    if not want <= names:
        return "trace %s lacks %s" % (path, sorted(want - names))
    if "model.backward_cpu_wall" not in names or "model.fwd_loss_cpu_wall" not in names:
        return "trace %s lacks the stage ranges" % path
    info = doc.get("distributedInfo", {}) if isinstance(doc, dict) else {}
    if info.get("rank") != rank or info.get("world_size") != world:
        return "trace %s: distributedInfo %r, want rank %d of %d" % (path, info, rank, world)
    dims = sum("Input Dims" in (e.get("args") or {}) for e in events)
    if shapes is not None and (dims > 0) != shapes:
        return "trace %s: %d events with input dims, want %s" % (path, dims,
                                                                 "some" if shapes else "none")
    return None


def round_trip(build, k, world):
    """None when the capture's traces import as a partial set and replay."""
    paths = [t["path"] for t in k["ranks"]]
    p = subprocess.run([build.sfctl, "import", "kineto", "--allow-empty-stage", "--replay",
                        "--warmup-steps", "0", "--window-steps", str(STEPS)] + paths,
                       capture_output=True, universal_newlines=True, timeout=120)
    missing = sorted(set(range(world)) - {t["rank"] for t in k["ranks"]})
    want = "ranks missing from the %d traces (world size %d): %s" % (
        len(paths), world, ", ".join(str(r) for r in missing))
    if p.returncode != 0 or want not in p.stderr:
        return "import of capture %d: rc %d, stderr %r lacks %r" % (k["id"], p.returncode,
                                                                     p.stderr, want)
    if "%d ranks of %d" % (len(paths), world) not in p.stdout:
        return "replay of capture %d: %r" % (k["id"], p.stdout[:400])
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--row", required=True, choices=sorted(ROWS))
    p.add_argument("--seed", type=int, default=2)
    a = p.parse_args()
    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return SKIP
    row = ROWS[a.row]
    build = sfharness.Build(a.build)
    shapes = writes_shapes()
    job = "ci-capture-%s-%d" % (a.row, os.getpid())
    capdir = tempfile.mkdtemp(prefix="sf-captures-")
    shutil.rmtree(capdir)       # the backend creates it, mode 0700
    keys = {"auto_capture": "true", "auto_capture_windows": 2, "auto_capture_steps": STEPS,
            "auto_capture_cooldown_s": row["auto_capture_cooldown_s"],
            "auto_capture_max": row["auto_capture_max"]}
    try:
        with sfharness.Sfd(build, warmup_steps=WARMUP, window_steps=WINDOW,
                           sfd_keys=keys) as sfd:
            res = sfharness.train(build, job, ["--ranks", "4", "--fault",
                                               row.get("fault", "backward_compute"),
                                               "--seed", str(a.seed), "--magnitude",
                                               str(row.get("magnitude", MAGNITUDE)),
                                               "--warmup", str(WARMUP),
                                               "--steps", str(WINDOW * WINDOWS)],
                                  sf_socket=sfd.ingest, timeout=240,
                                  extra_env={"SF_CAPTURE_DIR": capdir})
            sfd.windows(job, WINDOWS, timeout=60)
            caps = []

            def settled():
                caps[:] = sfd.json("captures", job) or []
                return caps and all(k["state"] != "running" for k in caps)
            sfharness.wait_for(settled, 30, "captures to settle", sfd.proc)
            text = sfd.sfctl("captures", job).stdout
        print(text)
        hidden = res["hidden_rank"]
        if len(caps) != row["want"]:
            return fail("%d captures, want %d" % (len(caps), row["want"]), caps)
        for k in caps:
            ranks = {t["rank"]: t for t in k["ranks"]}
            controls = [t["rank"] for t in k["ranks"] if t["control"]]
            if k["trigger"] != "auto" or set(ranks) != {hidden} | set(controls) or \
                    len(controls) != 1 or hidden in controls:
                return fail("capture %d is not the hidden rank %d plus one control" %
                            (k["id"], hidden), caps)
            if not k["reason"].startswith(row.get("reason", "straggler")) or \
                    k["window"] is None:
                return fail("capture %d: reason %r window %r" % (k["id"], k["reason"],
                                                                 k["window"]), caps)
            comm = a.row == "communication"
            if k["communication"] is not comm:
                return fail("capture %d: communication %r, want %r" % (
                    k["id"], k["communication"], comm), caps)
            if comm != ("communication: the ranks were asked" in text):
                return fail("sfctl captures shows communication %r wrongly" % comm)
            for t in k["ranks"]:
                if t["state"] != "done" or t["last_step"] - t["first_step"] + 1 != STEPS:
                    return fail("rank %d: %s" % (t["rank"], t), caps)
                err = check_trace(t["path"], t["first_step"], t["last_step"], t["rank"], 4,
                                  comm if shapes else None)
                if err:
                    return fail(err, caps)
            err = round_trip(build, k, 4)
            if err:
                return fail(err, caps)
        if oct(os.stat(capdir).st_mode & 0o777) != oct(0o700):
            return fail("capture directory mode %o" % (os.stat(capdir).st_mode & 0o777))
        print("row %s: hidden rank %d, %d capture(s), control rank(s) %s, communication %s, "
              "shapes %s: PASS" % (
                  a.row, hidden, len(caps), [t["rank"] for k in caps for t in k["ranks"]
                                             if t["control"]], caps[0]["communication"],
                  "checked" if shapes else "not written by this torch build"))
        return 0
    finally:
        shutil.rmtree(capdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
