"""`sfctl plot JOB` and `sfctl export JOB` against a live sfd draw from the
same numbers as the replay of the job's `sfctl record` dump: the --data JSON
and the trace events are identical. An unknown job is exit 5 with no file."""

import json
import os
import subprocess

from sfdtest import SFCTL, Sfd, check, run_job, wait_for

CONF = """[sfd]
window_grace_ms = 1500
[gates]
warmup_steps = 2
window_steps = 10
"""


def events(path):
    """Trace events without the process names (they name the job or the file)."""
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e["name"] != "process_name"]


def main():
    sfd = Sfd(CONF)
    try:
        run_job(sfd, "pic", 4, 32, extra={2: dict(slow_rank=2, slow_stage=0, slow_ns=4000000)})
        wait_for(lambda: sfd.jobs().get("pic", {}).get("windows") == 3, "3 windows of pic")
        d = sfd.dir
        rec = os.path.join(d, "pic.jsonl")
        sfd.sfctl("record", "pic", "-o", rec)
        for kind in ("heatmap", "frontier", "windows"):
            live, replay = os.path.join(d, "live.json"), os.path.join(d, "replay.json")
            win = [] if kind == "windows" else ["--window", "1"]
            sfd.sfctl("plot", "pic", "--kind", kind, *win, "-o", os.path.join(d, "live.svg"),
                      "--data", live)
            p = subprocess.run([SFCTL, "plot", "--file", rec, "--kind", kind, *win, "-o",
                                os.path.join(d, "replay.png"), "--data", replay],
                               capture_output=True, timeout=60)
            check(p.returncode == 0, "plot --file: %s" % p.stderr.decode())
            a, b = json.load(open(live)), json.load(open(replay))
            a.pop("picture"), b.pop("picture")
            check(a == b, "%s: live and replayed data differ" % kind)
            if kind == "heatmap":
                hot = a["hottest"]
                check(hot["first_rank"] == 2 and hot["stage"] == "data.next_wait",
                      "hottest cell %s" % hot)
        live, replay = os.path.join(d, "live-trace.json"), os.path.join(d, "replay-trace.json")
        sfd.sfctl("export", "pic", "--format", "perfetto", "--windows", "0-2", "-o", live)
        p = subprocess.run([SFCTL, "export", "--file", rec, "--format", "perfetto", "--windows",
                            "0-2", "-o", replay], capture_output=True, timeout=60)
        check(p.returncode == 0, "export --file: %s" % p.stderr.decode())
        check(events(live) == events(replay), "live and replayed traces differ")
        check(len([e for e in events(live) if e.get("cat") == "window"]) == 3, "3 windows")
        out = os.path.join(d, "none.svg")
        p = sfd.sfctl("plot", "nosuchjob", "-o", out, check_rc=5)
        check(not os.path.exists(out), "a refused plot left %s" % out)
    finally:
        sfd.close()
    print("ok")


main()
