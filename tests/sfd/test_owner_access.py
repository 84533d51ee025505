"""A job's owner reads and acts on it without being an operator; nobody else
does. The real sfd binds its query socket 0666, as the packaged
sfd-query.socket does; three uids run through setpriv with no groups:
OWNER's job "mine", OTHER's jobs "theirs" and "mine" (the same id), and an
operator whose only operators_group membership is a supplementary group
(SO_PEERGROUPS). OWNER lists only its own jobs, and reads, watches, ranks,
plots, exports, captures and pins the baseline of its own "mine"; every
UID/JOB of OTHER's is refused with a message naming the owner, exit 6, each
refusal counted once as query_denied, and a bare "theirs" is unknown (exit
5). The operator sees and reads both uids' jobs."""

import grp
import json
import os
import stat
import subprocess

from sfdtest import SFCTL, Sfd, check, run_job, send, sender_args, wait_for

OWNER, OTHER, OPERATOR = "4611", "4612", "4613"   # numeric: no passwd entry needed


def operators_group():
    """An existing group none of the test's uids has as its own gid."""
    for g in sorted(grp.getgrall(), key=lambda g: g.gr_gid):
        if 0 < g.gr_gid < 60000 and str(g.gr_gid) not in (OWNER, OTHER, OPERATOR):
            return g
    return None


def as_user(uid, args, groups=None):
    """args run as uid (gid uid), with no supplementary groups but `groups`."""
    cred = ["setpriv", "--reuid=" + uid, "--regid=" + uid]
    cred += ["--groups=" + groups] if groups else ["--clear-groups"]
    return subprocess.run(cred + args, capture_output=True, timeout=60)


def sfctl(sfd, uid, *args, rc=0, groups=None):
    p = as_user(uid, [SFCTL, "--socket", sfd.query] + list(args), groups)
    check(p.returncode == rc, "uid %s: sfctl %s: rc %d (want %d): %s"
          % (uid, " ".join(args), p.returncode, rc, p.stderr.decode()))
    return p


def job_names(sfd, uid, groups=None):
    listed = json.loads(sfctl(sfd, uid, "jobs", "--json", groups=groups).stdout)
    return sorted("%d/%s" % (j["uid"], j["job_id"]) for j in listed)


def owner_acts(sfd, out):
    """OWNER on its own job: every read and every action answers."""
    check(json.loads(sfctl(sfd, OWNER, "report", "mine", "--json").stdout), "report of mine")
    check(b"window" in sfctl(sfd, OWNER, "report", "mine").stdout, "text report of mine")
    watched = sfctl(sfd, OWNER, "watch", "mine", "--count", "1", "--json").stdout
    check(json.loads(watched), "watch of mine")
    ranks = json.loads(sfctl(sfd, OWNER, "ranks", "mine", "--json").stdout)["ranks"]
    check([r["rank"] for r in ranks] == [0, 1], "ranks of mine: %s" % ranks)
    png, data = os.path.join(out, "mine.png"), os.path.join(out, "mine.json")
    sfctl(sfd, OWNER, "plot", "mine", "-o", png, "--data", data)
    check(os.path.getsize(png) > 0 and json.load(open(data)), "plot of mine")
    trace = os.path.join(out, "mine-trace.json")
    sfctl(sfd, OWNER, "export", "mine", "--format", "perfetto", "-o", trace)
    check(json.load(open(trace)), "export of mine")
    sfctl(sfd, OWNER, "baseline", "mine", "--json")


def owner_captures(sfd):
    """A capture needs a live rank: OWNER's held rank of "live"."""
    args = sender_args(sfd, job="live", rank=0, world=1, steps=2, hold=True)
    held = subprocess.Popen(["setpriv", "--reuid=" + OWNER, "--regid=" + OWNER,
                             "--clear-groups"] + args, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        check(held.stdout.readline().strip() == b"holding", "held rank did not start")
        wait_for(lambda: "%s/live" % OWNER in job_names(sfd, OWNER), "OWNER's live job")
        cid = int(sfctl(sfd, OWNER, "capture", "live", "--ranks", "0").stdout.strip())
        caps = json.loads(sfctl(sfd, OWNER, "captures", "live", "--json").stdout)
        check([c["id"] for c in caps] == [cid], "OWNER's capture listed: %s" % caps)
    finally:
        held.stdin.close()
        held.wait(timeout=60)


def refused(sfd):
    """OWNER naming OTHER's jobs: refused, said so, counted."""
    before = sfd.rejected("query_denied")
    asks = [("report", "%s/theirs" % OTHER), ("report", "%s/mine" % OTHER),
            ("ranks", "%s/theirs" % OTHER), ("record", "%s/theirs" % OTHER),
            ("captures", "%s/theirs" % OTHER), ("baseline", "%s/theirs" % OTHER),
            ("capture", "%s/theirs" % OTHER, "--ranks", "0"),
            ("watch", "%s/theirs" % OTHER, "--count", "1")]
    for ask in asks:
        err = sfctl(sfd, OWNER, *ask, rc=6).stderr.decode()
        check("access denied: job %s/" % OTHER in err and "belongs to uid %s" % OTHER in err
              and "uid %s sees only its own jobs" % OWNER in err,
              "%s: the refusal does not say why: %r" % (" ".join(ask), err))
    check(sfd.rejected("query_denied") == before + len(asks),
          "refusals counted: %d, want %d" % (sfd.rejected("query_denied") - before, len(asks)))
    # A bare id is looked up among OWNER's own jobs only: OTHER's is unknown.
    sfctl(sfd, OWNER, "report", "theirs", rc=5)
    check(sfd.rejected("query_denied") == before + len(asks), "an unknown job counted denied")
    check(json.loads(sfctl(sfd, OTHER, "captures", "theirs", "--json").stdout) == [],
          "a refused capture reached OTHER's job")


def main():
    group = operators_group()
    if group is None:
        print("skipped: no group to use as operators_group")
        return 77
    sfd = Sfd("[sfd]\nwindow_grace_ms = 300\noperators_group = %s\n"
              "[gates]\nwarmup_steps = 0\nwindow_steps = 10\n" % group.gr_name)
    try:
        check(stat.S_IMODE(os.stat(sfd.query).st_mode) == 0o666, "query socket mode")
        for uid, job in ((OWNER, "mine"), (OTHER, "theirs"), (OTHER, "mine")):
            procs = [send(sfd, user=uid, job=job, rank=r, world=2, steps=30, batch=10)
                     for r in (0, 1)]
            check(all(rc == 0 for rc, _, _ in procs), "senders of %s/%s" % (uid, job))
        wait_for(lambda: len(job_names(sfd, "0")) == 3, "three jobs")
        run_job(sfd, "root-job", 1, 10)
        check(job_names(sfd, OWNER) == ["%s/mine" % OWNER], "OWNER's listing: %s"
              % job_names(sfd, OWNER))
        check(job_names(sfd, OTHER) == ["%s/mine" % OTHER, "%s/theirs" % OTHER],
              "OTHER's listing")
        check(job_names(sfd, OPERATOR) == [], "a uid without jobs or group lists nothing")
        out = os.path.join(sfd.dir, "owner")   # where OWNER writes its pictures
        os.mkdir(out)
        os.chown(out, int(OWNER), int(OWNER))
        owner_acts(sfd, out)
        mine = json.loads(sfctl(sfd, OWNER, "report", "mine", "--json").stdout)
        theirs = json.loads(sfctl(sfd, OTHER, "report", "mine", "--json").stdout)
        check(mine != theirs, "OWNER's and OTHER's 'mine' are one job")
        refused(sfd)
        owner_captures(sfd)
        # The operator: in operators_group through a supplementary group only.
        seen = job_names(sfd, OPERATOR, groups=str(group.gr_gid))
        check(seen == sorted(["0/root-job", "%s/live" % OWNER, "%s/mine" % OWNER,
                              "%s/mine" % OTHER, "%s/theirs" % OTHER]),
              "the operator's listing: %s" % seen)
        sfctl(sfd, OPERATOR, "report", "%s/theirs" % OTHER, groups=str(group.gr_gid))
        sfctl(sfd, OPERATOR, "ranks", "%s/mine" % OWNER, groups=str(group.gr_gid))
        check(sfd.stop() == 0, "sfd exit status")
    finally:
        sfd.close()
    print("PASS")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
