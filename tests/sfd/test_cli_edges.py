"""sfctl's rough edges against a real sfd (issue 49, item 5): each message
and exit code of sfctl(1). A capture of an ended job, plot and export without
a JOB or a --format, --kind in the help, bad numbers and a bare --socket,
import --help, watch --wait and watch on an ended job, and the ranges that
sfd's config errors name."""

import json
import os
import subprocess
import tempfile

from sfdtest import SFCTL, SFD, TIMEOUT, Sfd, check, run_job, spawn, wait_for

CONF = """[sfd]
window_grace_ms = 300
[gates]
warmup_steps = 0
window_steps = 10
"""


def sfctl(*args):
    return subprocess.run([SFCTL] + list(args), capture_output=True, timeout=TIMEOUT)


def expect(p, rc, needle, what):
    err = p.stderr.decode()
    check(p.returncode == rc and needle in err,
          "%s: exit %d (want %d), stderr %r lacks %r" % (what, p.returncode, rc, err, needle))
    if rc != 0:
        check(p.stdout == b"", "%s: printed %r despite the error" % (what, p.stdout[:200]))


def offline():
    """What needs no daemon: the command line."""
    expect(sfctl("--socket"), 2, "sfctl: option '--socket' needs a value", "bare --socket")
    expect(sfctl("--frob"), 2, "sfctl: unknown option '--frob'", "unknown global option")
    expect(sfctl("report", "--window", "abc"), 2,
           "sfctl report: --window takes a window index >= 0, not 'abc'", "report --window abc")
    expect(sfctl("report", "--window"), 2, "sfctl report: option '--window' needs a value",
           "report --window at the end")
    expect(sfctl("report", "--bogus"), 2, "sfctl report: unknown option '--bogus'",
           "report --bogus")
    expect(sfctl("watch", "j", "--interval", "5"), 2,
           "sfctl watch: --interval takes milliseconds >= 10, not '5'", "watch --interval 5")
    expect(sfctl("ranks"), 2, "sfctl ranks: name a JOB", "ranks without JOB")
    expect(sfctl("baseline", "j", "--pin", "x"), 2,
           "sfctl baseline: --pin takes a window index >= 0, not 'x'", "baseline --pin x")
    expect(sfctl("capture", "j", "--steps", "0", "--suspects"), 2,
           "sfctl capture: --steps takes 1..100, not '0'", "capture --steps 0")
    expect(sfctl("replay", "--bogus", "x.csv"), 2, "sfctl replay: unknown option '--bogus'",
           "replay --bogus")
    expect(sfctl("import", "kineto", "--rank-from"), 2,
           "sfctl import: option '--rank-from' needs a value", "import --rank-from at the end")
    expect(sfctl("plot", "--kind", "ledger", "-o", "x.svg", "j"), 2,
           "unknown kind 'ledger' (heatmap, frontier, windows or pipeline)", "plot --kind ledger")
    expect(sfctl("export", "j", "--format", "svg", "-o", "x.json"), 2,
           "unknown format 'svg' (the one format is perfetto)", "export --format svg")

    help_text = sfctl("--help").stdout.decode()
    check("ledger" not in help_text, "the help still offers a kind 'ledger': %r" % help_text)
    p = sfctl("import", "--help")
    out = p.stdout.decode()
    check(p.returncode == 0 and all(o in out for o in ("--rank-from", "--map", "--job")),
          "import --help: %d %r" % (p.returncode, out))
    p = sfctl("watch", "--help")
    check(p.returncode == 0 and "--wait" in p.stdout.decode(), "watch --help: %r" % p.stdout)


def config_ranges():
    """Every numeric key's error names its range, as window_steps does."""
    cases = [
        ("[sfd]\nstall_after_s = 0\n", "stall_after_s = 0: must be 1..86400"),
        ("[limits]\nmax_jobs = 0\n", "max_jobs = 0: must be 1..65536"),
        ("[sfd]\nwindow_grace_ms = -3\n", "window_grace_ms = -3: must be 0..3600000"),
        ("[sfd]\ncapture_timeout_s = abc\n", "capture_timeout_s = abc: must be 10..86400"),
        ("[sfd]\nwatchdog = maybe\n", "watchdog = maybe: must be yes or no"),
        ("[sfd]\nlog_level = loud\n", "log_level = loud: must be err, warning"),
        ("[gates]\ntau = banana\n", "tau = banana: must be a number 0..1"),
        ("[gates]\nwarmup_steps = 1.5\n", "warmup_steps = 1.5: must be a whole number 0..1000000000"),
        ("[gates]\ntau = 0\n", "[gates] tau must be above 0"),
        ("[gates]\nwindow_steps = 0\n", "[gates] window_steps must be 1.."),
    ]
    for text, needle in cases:
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
            f.write(text)
        try:
            p = subprocess.run([SFD, "--config", f.name, "--runtime-dir", "/nonexistent/x"],
                               capture_output=True, timeout=TIMEOUT)
        finally:
            os.unlink(f.name)
        err = p.stderr.decode()
        check(p.returncode != 0 and needle in err,
              "config %r: exit %d, %r lacks %r" % (text, p.returncode, err, needle))


def live(sfd):
    q = ["--socket", sfd.query]
    # watch --wait before the job's first Hello: polls, then draws its window.
    before = sfd.status()["connections_accepted"]
    w = subprocess.Popen([SFCTL] + q + ["watch", "late", "--wait", "--count", "1",
                                        "--interval", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    asked = [1]                     # our own status queries are connections too

    def watch_polled():
        check(w.poll() is None, "watch --wait exited before the job came: %s" % w.returncode)
        asked[0] += 1
        return sfd.status()["connections_accepted"] - before - asked[0] >= 10

    wait_for(watch_polled, "watch --wait polling", interval=0.2)
    run_job(sfd, "late", 2, 10)
    out, err = w.communicate(timeout=TIMEOUT)
    check(w.returncode == 0 and out.decode().startswith("window 0"),
          "watch --wait: %d %r %r" % (w.returncode, out[:80], err))
    expect(sfd.sfctl("watch", "nosuch", "--interval", "20", check_rc=None), 5, "nosuch",
           "watch without --wait on an unknown job")

    # watch on an ended job draws its last report and exits 0.
    wait_for(lambda: sfd.jobs()["late"]["state"] == "ended", "job late ended")
    p = subprocess.run([SFCTL] + q + ["watch", "late", "--interval", "20"],
                       capture_output=True, timeout=TIMEOUT)
    check(p.returncode == 0 and p.stdout.decode().startswith("window 0"),
          "watch on an ended job: %d %r" % (p.returncode, p.stderr))

    # capture on an ended job: a clear refusal, exit 5 (unknown job or window).
    expect(sfd.sfctl("capture", "late", "--ranks", "0", check_rc=None), 5,
           "job 'late': the job has ended", "capture of an ended job")

    # export without --format writes perfetto.
    trace = os.path.join(sfd.dir, "late.json")
    p = sfd.sfctl("export", "late", "-o", trace, check_rc=None)
    check(p.returncode == 0, "export without --format: %d %r" % (p.returncode, p.stderr))
    with open(trace) as f:
        check(len(json.load(f)["traceEvents"]) > 0, "export wrote no events")

    # plot without JOB: the one job is drawn; with several, they are named.
    pic = os.path.join(sfd.dir, "x.png")
    p = sfd.sfctl("plot", "-o", pic, check_rc=None)
    check(p.returncode == 0 and os.path.getsize(pic) > 0, "plot of the one job: %r" % p.stderr)
    hold = spawn(sfd, job="other", rank=0, world=1, steps=10, hold=True)
    check(hold.stdout.readline().decode().startswith("holding"), "job other holding")
    p = sfd.sfctl("plot", "-o", pic, check_rc=None)
    expect(p, 2, "several jobs: name one of", "plot with several jobs")
    check(b"late" in p.stderr and b"other" in p.stderr, "plot names the jobs: %r" % p.stderr)
    hold.communicate(timeout=TIMEOUT)     # EOF on stdin ends the held sender


def main():
    offline()
    config_ranges()
    sfd = Sfd(CONF)
    try:
        live(sfd)
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
