"""Finding 6 of issue 11, the job table: jobs are keyed by (uid, job id). A
squatter holding a job id does not block its owner, one uid cannot take every
job slot, a rejection is counted in the rejected uid's own job only, and the
query side names a job shared by two uids as UID/JOB."""

import json
import os
import shutil
import subprocess
import tempfile

from sfdtest import SFCTL, Sfd, as_uid, check, sender_args, wait_for

SQUATTER, OWNER = "62001", "62002"
PROM_DIR = tempfile.mkdtemp(prefix="sfprom-")
CONF = """[sfd]
window_grace_ms = 500
prom_dir = %s
[limits]
max_jobs = 8
max_jobs_per_uid = 4
[gates]
warmup_steps = 0
window_steps = 10
""" % PROM_DIR


def sfctl_as(sfd, uid, *args):
    return subprocess.run(as_uid(uid, [SFCTL, "--socket", sfd.query] + list(args)),
                          capture_output=True, timeout=60)


def jobs(sfd, uid=None):
    p = sfctl_as(sfd, uid, "jobs", "--json") if uid else sfd.sfctl("jobs", "--json")
    return json.loads(p.stdout)


def storm(sfd, uid, n, job):
    p = subprocess.Popen(as_uid(uid, sender_args(sfd, mode="storm", storm=n, world=2, job=job,
                                                 distinct_jobs=True)),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    check(p.stdout.readline().strip() == b"ready", "storm of %s did not start" % uid)
    return p


def run_owner_job(sfd, job):
    procs = [subprocess.Popen(as_uid(OWNER, sender_args(sfd, job=job, rank=r, world=2,
                                                        steps=30, batch=10)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for r in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0 and b"sent=30" in out, "owner rank: %s %s" % (out, err))


def main():
    sfd = Sfd(CONF)
    try:
        # The squatter holds rank 0 of "train" (and takes its whole job quota).
        hold = subprocess.Popen(as_uid(SQUATTER, sender_args(sfd, job="train", rank=0, world=2,
                                                             steps=1, hold=True)),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        check(hold.stdout.readline().strip() == b"holding", "squatter hold did not start")
        squat = storm(sfd, SQUATTER, 5, "other")
        wait_for(lambda: len(jobs(sfd, SQUATTER)) == 4, "squatter's 4 jobs")
        check(sfd.rejected("max_jobs_per_uid") == 2, "per-uid cap: %s" % sfd.status()["rejected"])

        # The owner's job of the same id runs whole: its windows close complete.
        run_owner_job(sfd, "train")
        mine = jobs(sfd, OWNER)
        check([(j["job_id"], j["uid"]) for j in mine] == [("train", int(OWNER))],
              "owner sees %s" % mine)
        wait_for(lambda: jobs(sfd, OWNER)[0]["windows"] == 3, "owner windows")
        check(mine[0]["rejected"] == 0, "owner charged for the squatter: %s" % mine[0])

        # The squatter's own refusals (its quota is spent) count against its
        # connection's uid, never in the owner's job of that id.
        before = sfd.rejected("max_jobs_per_uid")
        rc = subprocess.run(as_uid(SQUATTER, sender_args(sfd, mode="hello", job="train2",
                                                         world=2)),
                            capture_output=True, timeout=60)
        check(rc.returncode == 0, "refused hello not closed: %s" % rc.stdout)
        wait_for(lambda: sfd.rejected("max_jobs_per_uid") == before + 1, "quota refusal")
        check(jobs(sfd, OWNER)[0]["rejected"] == 0, "owner's counter moved")

        # Another uid still gets job slots: max_jobs is not all the squatter's.
        run_owner_job(sfd, "second")

        # Root sees both "train" jobs with their uids; a bare id is ambiguous.
        both = sorted(j["uid"] for j in jobs(sfd) if j["job_id"] == "train")
        check(both == [int(SQUATTER), int(OWNER)], "root's view: %s" % both)
        text = sfd.sfctl("jobs").stdout.decode()
        check(SQUATTER in text and OWNER in text, "sfctl jobs shows no uids: " + text)
        p = sfd.sfctl("report", "train", check_rc=None)
        check(p.returncode == 2 and b"UID/train" in p.stderr, "ambiguous id: %s" % p.stderr)
        p = sfd.sfctl("report", OWNER + "/train", "--json")
        check(json.loads(p.stdout)[0]["window"]["index"] == 2, "UID/JOB report: %s" % p.stdout)
        # Each user names its own job by the bare id.
        p = sfctl_as(sfd, OWNER, "report", "train", "--json")
        check(p.returncode == 0, "owner's own report: %s" % p.stderr)
        p = sfctl_as(sfd, SQUATTER, "report", "train", "--json")
        check(p.returncode == 5, "squatter's job has no window yet: rc %d" % p.returncode)
        p = sfctl_as(sfd, SQUATTER, "report", OWNER + "/train")
        check(p.returncode == 6, "squatter reads the owner's job: rc %d" % p.returncode)

        # The Prometheus export labels an id two uids use as UID/JOB.
        def exported():
            try:
                with open(os.path.join(PROM_DIR, "stagefrontier.prom")) as f:
                    return 'job_id="%s/train"' % OWNER in f.read()
            except OSError:
                return False
        wait_for(exported, "owner's series labelled %s/train" % OWNER)

        hold.stdin.close()
        squat.stdin.close()
        check(hold.wait(timeout=60) == 0 and squat.wait(timeout=60) == 0, "squatter failed")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
        shutil.rmtree(PROM_DIR, ignore_errors=True)
    print("ok")


main()
