"""Hostile input on the ingest socket: each case is a counted rejection,
visible in `sfctl status`, that closes only the offending connection while
the daemon and the other clients carry on. Also the query access rules."""

import json
import signal
import subprocess

from sfdtest import SFCTL, Sfd, check, send, spawn, wait_for

CONF = """[sfd]
window_grace_ms = 500
[limits]
frame_max_bytes = 4096
[gates]
warmup_steps = 0
window_steps = 10
"""


def expect_reject(sfd, reason, **kw):
    before = sfd.rejected(reason)
    user = kw.pop("user", None)
    rc, out, p = send(sfd, user=user, **kw)
    check(rc == 0 and out.get("closed") == "yes",
          "%s: connection not closed (rc %d, %s %s)" % (reason, rc, out, p.stderr.decode()))
    wait_for(lambda: sfd.rejected(reason) == before + 1, "counter %s to move" % reason)


def main():
    sfd = Sfd(CONF)
    try:
        holder = spawn(sfd, job="h", rank=0, world=2, steps=5, hold=True)
        check(holder.stdout.readline().strip() == b"holding", "holder did not start")

        expect_reject(sfd, "undecodable_frame", mode="garbage")
        expect_reject(sfd, "undecodable_frame", mode="truncated", job="t")
        expect_reject(sfd, "oversized_frame", mode="oversized", size=8192)
        expect_reject(sfd, "schema_hash", mode="badhash", job="bh")
        expect_reject(sfd, "schema_hash", mode="batchhash", job="bb")
        expect_reject(sfd, "invalid_field", mode="hello", job="iv", rank=5, world=2)
        expect_reject(sfd, "invalid_field", mode="hello", job="bad/id")
        # a local rank beyond the job, a GPU name CUDA_VISIBLE_DEVICES never holds
        expect_reject(sfd, "invalid_field", mode="hello", job="lr", rank=0, world=2, local_rank=2)
        expect_reject(sfd, "invalid_field", mode="hello", job="gpu", gpu="0,1")
        expect_reject(sfd, "invalid_field", mode="hello", job="gpu", gpu="x" * 65)
        expect_reject(sfd, "duplicate_rank", mode="hello", job="h", rank=0, world=2)
        expect_reject(sfd, "world_size_conflict", mode="hello", job="h", rank=1, world=3)

        # A client that goes away in the middle of a batch datagram.
        before = sfd.rejected("undecodable_frame")
        rc, _, _ = send(sfd, mode="midbatch", job="mb", world=1)
        check(rc == 0, "midbatch sender failed")
        wait_for(lambda: sfd.rejected("undecodable_frame") == before + 1, "midbatch counted")

        # The daemon is up and the held rank is still connected and counted.
        st = sfd.status()
        check(st["rejected_total"] == 13, "rejections not visible: %s" % st["rejected"])
        text = sfd.sfctl("status").stdout.decode()
        check("world_size_conflict" in text and "duplicate_rank" in text, "status text: " + text)
        jobs = sfd.jobs()
        check(jobs["h"]["connected_ranks"] == 1, "holder lost: %s" % jobs["h"])
        check(jobs["h"]["records"] == 5, "holder records: %s" % jobs["h"])

        # Rank 1 of h joins properly: the job completes its window.
        rc, out, _ = send(sfd, job="h", rank=1, world=2, steps=5)
        check(rc == 0 and out["sent"] == "5", "rank 1 of h: %s" % out)

        # Query access: another user sees none of root's jobs. A bare id names
        # the caller's own job (none here); naming root's as 0/h is denied.
        rc, out, _ = send(sfd, user="nobody", job="nb", rank=0, world=1, steps=3)
        check(rc == 0, "nobody's own job failed")
        mine = json.loads(sfd.sfctl("jobs", "--json", user="nobody").stdout)
        check([j["job_id"] for j in mine] == ["nb"], "nobody sees %s" % mine)
        sfd.sfctl("ranks", "h", user="nobody", check_rc=5)
        sfd.sfctl("ranks", "0/h", user="nobody", check_rc=6)
        sfd.sfctl("report", "0/h", user="nobody", check_rc=6)
        sfd.sfctl("ranks", "nb", user="nobody")
        check(len(sfd.jobs()) >= 3, "root must see every job")

        # Operators: members of operators_group (primary or supplementary)
        # see every job. Reload with the group set to nogroup.
        with open(sfd.conf, "a") as f:
            f.write("\n[sfd]\noperators_group = nogroup\n")
        sfd.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in sfd.logtext(), "reload")
        seen = json.loads(sfd.sfctl("jobs", "--json", user="nobody").stdout)
        check(len(seen) >= 3, "operator (primary group) sees every job: %s" % seen)
        p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=daemon", "--groups=nogroup",
                            SFCTL, "--socket", sfd.query, "ranks", "0/h"], capture_output=True,
                           timeout=60)
        check(p.returncode == 0, "operator (supplementary group) denied: %s" % p.stderr)
        p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=daemon", "--clear-groups",
                            SFCTL, "--socket", sfd.query, "ranks", "0/h"], capture_output=True,
                           timeout=60)
        check(p.returncode == 6, "non-operator allowed: rc %d" % p.returncode)

        # Arrivals: out of range, or in a stage that is not synchronizing, are
        # counted rejections of that record only; the valid and the unmarked
        # records of the same batch are kept.
        before = {k: sfd.rejected(k) for k in ("arrival_out_of_range",
                                                 "arrival_not_synchronizing")}
        records = sfd.status()["records"]
        rc, out, p = send(sfd, mode="arrivals", job="ar", world=1)
        check(rc == 0 and out.get("sent") == "4", "arrivals sender: %s %s" % (out, p.stderr))
        wait_for(lambda: sfd.status()["records"] == records + 2, "two arrival records kept")
        for k, v in before.items():
            check(sfd.rejected(k) == v + 1, "%s not counted once: %s" % (k, sfd.status()))
        check(sfd.jobs()["ar"]["records"] == 2, "job ar records: %s" % sfd.jobs()["ar"])

        # Accumulated sync waits (docs/FORMATS.md, "Ingest wire"): one past
        # its stage's end and one without its count are counted rejections
        # of that record only; a hello whose sync_groups are not one per
        # synchronizing stage, or name a group past pp, is refused.
        before = sfd.rejected("sync_wait_out_of_range")
        records = sfd.status()["records"]
        rc, out, p = send(sfd, mode="sync_waits", job="sw", world=1)
        check(rc == 0 and out.get("sent") == "4", "sync waits sender: %s %s" % (out, p.stderr))
        wait_for(lambda: sfd.status()["records"] == records + 2, "two sync-wait records kept")
        check(sfd.rejected("sync_wait_out_of_range") == before + 2,
              "sync_wait_out_of_range not counted twice: %s" % sfd.status())
        for mode in ("sync_groups", "sync_group_pp"):
            before = sfd.rejected("sync_group_invalid")
            rc, out, p = send(sfd, mode=mode, job="sg", world=1)
            check(rc == 0, "%s sender: %s %s" % (mode, out, p.stderr))
            wait_for(lambda: sfd.rejected("sync_group_invalid") == before + 1,
                     "%s refused and counted" % mode)

        # NCCL enqueue points (docs/SIDE_EVIDENCE.md): one past any stage's
        # bound rejects its batch; one in a stage that is not synchronizing is
        # counted and dropped; one past its stage's recorded duration is
        # counted when its record comes, and that record is still kept.
        # Kernel times that start before their enqueue reject their batch;
        # valid ones give the record without an issue mark its issue lag.
        before = {k: sfd.rejected(k) for k in ("arrival_out_of_range",
                                                 "arrival_not_synchronizing",
                                                 "kernel_time_invalid")}
        points, records = sfd.status()["enqueue_points"], sfd.status()["records"]
        timed, lags = sfd.status()["kernel_points"], sfd.status()["kernel_issue_lags"]
        enq_bytes = sfd.status()["memory"]["by_kind"]["enqueue_points"]
        rc, out, p = send(sfd, mode="enqueue_points", job="eq", world=1)
        check(rc == 0 and out.get("sent") == "6", "enqueue sender: %s %s" % (out, p.stderr))
        wait_for(lambda: sfd.rejected("arrival_out_of_range") == before["arrival_out_of_range"] + 1,
                 "the batch past the bound rejected")
        rc, out, p = send(sfd, mode="kernel_bad", job="eq", world=1)
        check(rc == 0 and out.get("sent") == "1", "kernel sender: %s %s" % (out, p.stderr))
        wait_for(lambda: sfd.rejected("kernel_time_invalid") == before["kernel_time_invalid"] + 1,
                 "the kernel starting before its enqueue rejected")
        check(sfd.status()["enqueue_points"] == points + 3, "three enqueue points kept")
        check(sfd.status()["kernel_points"] == timed + 1, "one kernel start kept")
        # The job's table (4096 slots of 32 bytes) is charged to the budget once.
        check(sfd.status()["memory"]["by_kind"]["enqueue_points"] == enq_bytes + 4096 * 32,
              "enqueue-point table not charged: %s" % sfd.status()["memory"])
        check(sfd.rejected("arrival_not_synchronizing") == before["arrival_not_synchronizing"] + 1,
              "enqueue point outside a synchronizing stage not counted")
        rc, out, p = send(sfd, mode="enqueue_records", job="eq", world=1)
        check(rc == 0 and out.get("sent") == "4", "enqueue records: %s %s" % (out, p.stderr))
        wait_for(lambda: sfd.status()["records"] == records + 4, "four enqueue records kept")
        check(sfd.rejected("arrival_out_of_range") == before["arrival_out_of_range"] + 2,
              "enqueue point past its stage's end not counted: %s" % sfd.status())
        check(sfd.status()["kernel_issue_lags"] == lags + 1,
              "the kernel start gave no issue lag: %s" % sfd.status())

        holder.stdin.close()
        check(holder.wait(timeout=60) == 0, "holder failed")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
