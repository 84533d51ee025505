"""The automatic capture fired by the live verdict (docs/LIVE.md, docs/SFD.md
"Captures"): four real clients (libsfclient, real sleeps), rank 2 slowed from
a known step; once the live verdict names it, one automatic capture of rank 2
and a healthy control runs to done, with the verdict as its reason, while the
window-based trigger is held off (auto_capture_windows at its maximum). A
straggler's live verdict is no communication verdict: the capture and the
request each rank got say communication false."""

import json
import os
import shutil
import subprocess
import tempfile

from sfdtest import Sfd, check, reap, wait_for

CLIENT_JOB = os.environ["SF_CLIENT_JOB"]
WARMUP, WINDOW, ONSET, STEPS = 2, 10, 62, 400


def main():
    sfd = Sfd("", start=False)
    with open(sfd.conf, "w") as f:
        f.write("[sfd]\nauto_capture = yes\nauto_capture_windows = 1000\nauto_capture_steps = 3\n"
                "live_calibration_steps = 30\n[gates]\nwarmup_steps = %d\nwindow_steps = %d\n"
                % (WARMUP, WINDOW))
    capdir = tempfile.mkdtemp(prefix="sf-livecap-")
    procs = []
    try:
        sfd.start()
        for rank in range(4):
            env = dict(os.environ, SF_HEARTBEAT_MS="0", SF_TEST_CAPTURE_DIR=capdir,
                       SF_TEST_SLOW_FROM=str(ONSET))
            # 1 ms a stage; rank 2's forward 3 ms slower from ONSET (half the step)
            procs.append(subprocess.Popen(
                [CLIENT_JOB, sfd.ingest, "lc", str(rank), "4", str(STEPS), "2", "1", "3000",
                 "1000", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))

        def live_capture():
            ks = json.loads(sfd.sfctl("captures", "lc", "--json").stdout)
            done = [k for k in ks if k["state"] != "running"]
            return done[0] if done else None

        k = wait_for(live_capture, "the live verdict's capture to end")
        if os.environ.get("SF_TEST_VERBOSE"):
            print(json.dumps(k, indent=1))
        check(k["trigger"] == "auto" and k["window"] is None, "not the live trigger: %s" % k)
        check(k["reason"].startswith("live verdict: rank 2 slow in "), "reason %s" % k["reason"])
        ranks = [(t["rank"], t.get("control", False)) for t in k["ranks"]]
        check(ranks[0] == (2, False) and len(ranks) == 2 and ranks[1][1], "ranks %s" % ranks)
        check(k["state"] == "done", "capture %s" % k)
        check(k["communication"] is False, "a straggler's capture for communication: %s" % k)
        check(k["ranks"][0]["first_step"] >= ONSET, "captured before the onset: %s" % k)
        v = json.loads(sfd.sfctl("events", "lc", "--json").stdout)["events"][0]["verdict"]
        check(v["rank"] == 2 and ONSET <= v["detected_step"] < ONSET + 10, "verdict %s" % v)
        asked = []
        for p in procs:
            _, err = p.communicate(timeout=120)
            check(p.returncode == 0, "client rc %d" % p.returncode)
            asked += [line for line in err.decode().splitlines() if line.startswith("capture ")]
        want = sorted("capture %d rank %d: communication 0" % (k["id"], t["rank"])
                      for t in k["ranks"])
        check(sorted(asked) == want, "the requests the ranks got: %s" % asked)
    finally:
        reap(procs)
        shutil.rmtree(capdir, ignore_errors=True)
        sfd.close()


if __name__ == "__main__":
    main()
