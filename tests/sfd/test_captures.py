"""Captures through the control channel (docs/SFD.md, "Captures"), with the
real sfd, sfctl and clients on real sockets:

- an operator capture of one rank of a libsfclient job runs the C capture
  handler for exactly the requested steps on that rank only;
- a rank without a handler answers "unsupported", counted by the client;
- forged results (another rank's, an unknown id, after the end, malformed)
  and a flood of replies are counted rejections that cost the connection
  nothing; bad heartbeats likewise;
- another uid cannot capture someone else's job.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

from sfdtest import Sfd, check, reap, spawn, wait_for

CLIENT_JOB = os.environ["SF_CLIENT_JOB"]

CONF = """[sfd]
window_grace_ms = 500
[gates]
warmup_steps = 0
window_steps = 10
"""


def capture(sfd, job, *args):
    p = sfd.sfctl("capture", job, *args)
    return int(p.stdout.decode().strip())


def handler_and_unsupported(sfd):
    capdir = tempfile.mkdtemp(prefix="sf-capdir-")
    procs = []
    try:
        for rank in (0, 1):
            env = dict(os.environ)
            env["SF_HEARTBEAT_MS"] = "0"
            if rank == 1:
                env["SF_TEST_CAPTURE_DIR"] = capdir   # only rank 1 has a handler
            procs.append(subprocess.Popen(
                [CLIENT_JOB, sfd.ingest, "cj", str(rank), "2", "4000", "-1", "0", "0", "300",
                 "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        wait_for(lambda: sfd.jobs().get("cj", {}).get("connected_ranks") == 2, "cj connected")

        cid = capture(sfd, "cj", "--ranks", "1", "--steps", "3")
        k = wait_for(lambda: sfd.capture_settled("cj", cid), "capture %d to end" % cid)
        check(k["state"] == "done" and [t["rank"] for t in k["ranks"]] == [1],
              "capture of rank 1: %s" % k)
        t = k["ranks"][0]
        check(t["state"] == "done" and t["last_step"] - t["first_step"] == 2, "rank 1: %s" % t)
        with open(t["path"]) as f:
            steps = [int(line.split()[1]) for line in f]
        check(steps == list(range(t["first_step"], t["last_step"] + 1)),
              "the handler saw steps %s for %s" % (steps, t))
        check(os.listdir(capdir) == [os.path.basename(t["path"])], "only rank 1 captured")
        check(isinstance(k["created_at"], float) and isinstance(t["finished_at"], float),
              "wall-clock times: %s" % k)

        cid = capture(sfd, "cj", "--ranks", "0")
        k = wait_for(lambda: sfd.capture_settled("cj", cid), "capture %d to end" % cid)
        check(k["state"] == "failed" and k["ranks"][0]["state"] == "unsupported",
              "rank 0 without a handler: %s" % k)
        text = sfd.sfctl("captures", "cj").stdout.decode()
        check("unsupported" in text and t["path"] in text, "sfctl captures: " + text)

        # Windows carry their wall-clock span (seconds since the epoch), and so
        # does the recording a replay reads.
        win = json.loads(sfd.sfctl("report", "cj", "--json").stdout)[0]["window"]
        check(time.time() - 600 < win["opened_at"] <= win["closed_at"] <= time.time() + 1,
              "window wall clock: %s" % win)
        rec = [json.loads(line) for line in sfd.sfctl("record", "cj").stdout.decode().splitlines()]
        check(any(r.get("type") == "window" and r.get("closed_at_ms") for r in rec),
              "the recording carries closed_at_ms")

        outs = []
        for p in procs:
            o, e = p.communicate(timeout=120)
            check(p.returncode == 0, "client rc %d: %s" % (p.returncode, e.decode()))
            outs.append(dict(kv.split("=") for kv in o.decode().split()))
        check(outs[0]["captures_unsupported"] == "1" and outs[1]["captures_done"] == "1",
              "client counters: %s" % outs)
    finally:
        reap(procs)
        shutil.rmtree(capdir, ignore_errors=True)


def command(p, line):
    p.stdin.write((line + "\n").encode())
    p.stdin.flush()
    return p.stdout.readline().decode().strip()


def terminal_escapes(sfd, peer):
    """A reply's path carries terminal escapes: `sfctl captures` and the log
    show them as \\xNN (text_escape.h), never the raw bytes."""
    cid = capture(sfd, "hp", "--ranks", "0", "--steps", "4")
    check(command(peer, "recv") == "request %d 4" % cid, "rank 0 got no second request")
    path = "/run/\x1b[2J\x1b]0;owned\x07\x9b31mtrace.json"
    check(command(peer, "reply %d accepted" % cid) == "ok", "accept")
    check(command(peer, "reply %d done %s" % (cid, path)) == "ok", "done")
    wait_for(lambda: sfd.capture_settled("hp", cid), "capture %d done" % cid)
    shown = sfd.sfctl("captures", "hp").stdout
    want = rb"/run/\x1b[2J\x1b]0;owned\x07\xc2\x9b31mtrace.json"
    check(want in shown and b"\x1b" not in shown and b"\x07" not in shown,
          "sfctl captures shows the raw path: %r" % shown)
    wait_for(lambda: want.decode() in sfd.logtext(), "the escaped path in the log")
    check("\x1b" not in sfd.logtext(), "a raw ESC byte in the log")


def hostile(sfd):
    peers = [spawn(sfd, job="hp", rank=r, world=2, steps=10, batch=10, mode="capture-peer")
             for r in (0, 1)]
    try:
        for p in peers:
            check(p.stdout.readline().strip() == b"ready", "peer did not start")
        cid = capture(sfd, "hp", "--ranks", "0", "--steps", "4")
        check(command(peers[0], "recv") == "request %d 4" % cid, "rank 0 got no request")
        before = sfd.rejected("capture_reply")
        records = sfd.jobs()["hp"]["records"]
        cases = [(peers[1], "reply %d done /forged/by/rank1" % cid),   # another rank's
                 (peers[0], "reply 999999 done /unknown/id"),          # unknown id
                 (peers[0], "reply %d done" % cid),                    # done without a path
                 (peers[0], "reply %d bogus /x" % cid)]                # no such state
        for p, line in cases:
            check(command(p, line) == "ok", line)
        wait_for(lambda: sfd.rejected("capture_reply") == before + len(cases),
                 "forged replies counted")
        check(sfd.captures("hp")[0]["state"] == "running", "a forged reply ended the capture")

        check(command(peers[0], "reply %d accepted" % cid) == "ok", "accept")
        check(command(peers[0], "reply %d done /run/trace.json.gz" % cid) == "ok", "done")
        k = wait_for(lambda: sfd.capture_settled("hp", cid), "capture %d done" % cid)
        check(k["ranks"][0]["path"] == "/run/trace.json.gz", "the real result: %s" % k)
        check(command(peers[0], "reply %d done /again" % cid) == "ok", "late")
        check(command(peers[0], "flood 500 %d" % cid) == "ok", "flood")
        wait_for(lambda: sfd.rejected("capture_reply") == before + len(cases) + 501,
                 "late reply and flood counted")
        check(sfd.capture_settled("hp", cid)["ranks"][0]["path"] == "/run/trace.json.gz",
              "a late reply changed the result")

        terminal_escapes(sfd, peers[0])

        hb = sfd.rejected("heartbeat")
        check(command(peers[0], "heartbeat 12 40") == "ok", "bad heartbeat sent")
        check(command(peers[0], "heartbeat 12 1") == "ok", "good heartbeat sent")
        wait_for(lambda: sfd.rejected("heartbeat") == hb + 1, "bad heartbeat counted")
        ranks = json.loads(sfd.sfctl("ranks", "hp", "--json").stdout)["ranks"]
        check(ranks[0]["open_stage"] == "model.fwd_loss_cpu_wall" and
              ranks[0]["position_step"] == 12, "heartbeat position: %s" % ranks[0])

        # The connection survived all of it: its records still count.
        check(command(peers[0], "records 10") == "ok", "records after the flood")
        wait_for(lambda: sfd.jobs()["hp"]["records"] == records + 10, "records still accepted")
    finally:
        for p in peers:
            p.stdin.close()
            p.wait(timeout=30)

    # Another uid: root's job is not theirs to capture, and their own
    # namespace has no job of that id.
    denied = sfd.rejected("query_denied")
    sfd.sfctl("capture", "0/hp", "--ranks", "0", user="nobody", check_rc=6)
    sfd.sfctl("capture", "hp", "--ranks", "0", user="nobody", check_rc=5)
    sfd.sfctl("captures", "0/hp", user="nobody", check_rc=6)
    check(sfd.rejected("query_denied") == denied + 2, "denials counted")
    check(len(sfd.captures("hp")) == 2, "a denied request made a capture")
    # Bad arguments never reach the daemon's state.
    sfd.sfctl("capture", "hp", "--ranks", "0,x", check_rc=2)
    sfd.sfctl("capture", "hp", "--ranks", "9", check_rc=2)     # sfd: out of the world size
    sfd.sfctl("capture", "hp", "--suspects", "--ranks", "0", check_rc=2)
    sfd.sfctl("capture", "hp", "--ranks", "0", "--steps", "101", check_rc=2)


def main():
    sfd = Sfd(CONF)
    try:
        handler_and_unsupported(sfd)
        hostile(sfd)
        check(sfd.stop() == 0, "sfd exit status")
    finally:
        sfd.close()
    print("PASS")


if __name__ == "__main__":
    main()
