#!/usr/bin/python3
"""Synchronizing groups through the Python binding and the real sfd
(docs/CLIENT.md, "Synchronizing groups"): Recorder(sync_groups=...) names the
group of each synchronizing stage, rec.sync(group=...) accumulates the time
inside each collective and counts it, rec.mark_send() counts a sync point
without a wait, and the recording (`sfctl record`) carries the groups and
every step's accumulated wait and count, which its replay reads back into
the live report. Bad groups are ValueErrors.

The sleeps inside the sync blocks stand for the wait in a collective: the
test bounds the recorded wait by them below and by its own clock reads
around each block above.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
import sfdtest  # noqa: E402  (path set above)
import stagefrontier as sf  # noqa: E402

FWD, BWD = "model.fwd_loss_cpu_wall", "model.backward_cpu_wall"
STEPS = 12
POINTS = 3
CONF = "[gates]\nwarmup_steps = 0\nwindow_steps = 4\n"


def bad_options(sock):
    for kw in ({"sync_groups": ["tp"]},                                  # no sync_stages
               {"sync_stages": [FWD, BWD], "sync_groups": ["tp"]},       # one short
               {"sync_stages": [FWD], "sync_groups": ["xp"]}):           # no such group
        try:
            sf.Recorder(job_id="bad", socket=sock, rank=0, world_size=1, **kw)
        except ValueError:
            continue
        sfdtest.fail("Recorder(%r) was accepted" % kw)


def main():
    daemon = sfdtest.Sfd(CONF)
    try:
        bad_options(daemon.ingest)
        rec = sf.Recorder(job_id="syncg", socket=daemon.ingest, rank=0, world_size=1,
                          sync_stages=[FWD, BWD], sync_groups={FWD: "tp"})
        try:
            rec.sync(group="xp")
            sfdtest.fail("rec.sync(group='xp') was accepted")
        except ValueError:
            pass
        # Another set of groups while the job's rank is connected: refused.
        conflicts = daemon.rejected("schema_conflict")
        other = sf.Recorder(job_id="syncg", socket=daemon.ingest, rank=0, world_size=1,
                            sync_stages=[FWD, BWD], sync_groups=["pp", "dp"])
        sfdtest.wait_for(lambda: daemon.rejected("schema_conflict") == conflicts + 1,
                         "the other groups refused", timeout=30)
        other.close()
        outer = []  # per step, the time around the sync blocks, by this clock
        for _ in range(STEPS):
            around = 0
            with rec.step():
                with rec.stage(FWD):
                    for _ in range(POINTS):
                        t0 = time.monotonic_ns()
                        with rec.sync(group="tp"):
                            time.sleep(0.002)
                        around += time.monotonic_ns() - t0
                    sfdtest.check(rec.mark_send() == 0, "mark_send refused")
                with rec.stage(BWD):
                    rec.arrive()
            outer.append(around)
        rec.flush()
        sfdtest.check(rec.stats()["violations"] == 0, "violations: %r" % rec.stats())
        sfdtest.wait_for(lambda: daemon.jobs().get("syncg", {}).get("records", 0) == STEPS,
                         "the records", timeout=30)
        rec.close()
        path = os.path.join(daemon.dir, "syncg.jsonl")
        daemon.sfctl("record", "syncg", "-o", path)
        lines = [json.loads(x) for x in open(path)]
        header = lines[0]
        sfdtest.check(header["schema"].get("sync_groups") == ["tp", "world"],
                      "header: %r" % header["schema"])
        rows = sorted((x for x in lines if x["type"] == "row"), key=lambda x: x["step"])
        sfdtest.check(len(rows) == STEPS, "want %d rows, got %d" % (STEPS, len(rows)))
        for row in rows:
            wait, count = row["sync_wait_ns"], row["sync_waits"]
            # Three sync points and the send; no wait marked in backward.
            sfdtest.check(count == [POINTS + 1, 0] and wait[1] is None, "row: %r" % row)
            sfdtest.check(POINTS * 2000000 <= wait[0] <= outer[row["step"]],
                          "step %d: wait %d ns outside [%d, %d]" %
                          (row["step"], wait[0], POINTS * 2000000, outer[row["step"]]))
            sfdtest.check(wait[0] <= sum(row["d_ns"][1:3]), "wait past its stage: %r" % row)
        sfdtest.live_equals_replay(daemon, "syncg")
        print("ok: %d steps, %d sync points each, waits %d..%d us" %
              (STEPS, POINTS + 1, min(r["sync_wait_ns"][0] for r in rows) // 1000,
               max(r["sync_wait_ns"][0] for r in rows) // 1000))
    finally:
        daemon.stop()


if __name__ == "__main__":
    main()
