"""The change against a baseline in the real sfd (docs/CHANGE.md): the first
three windows are the baseline and carry no change; a slowdown of one rank
that starts after them is routed to its stage and rank; the human view leads
with the change line; Prometheus carries the slowdown, the change and the
waste; the alert hook runs with the window's JSON once the change persists;
`sfctl baseline` shows, pins and clears; a window no longer kept is a clear
error; and the live report still equals the replay of its recording."""

import json
import os
import stat

from sfdtest import Sfd, check, live_equals_replay, run_job, wait_for

WARMUP, WINDOW = 2, 10


def windows(sfd, job, n):
    wait_for(lambda: sfd.jobs().get(job, {}).get("windows") == n, "%d windows of %s" % (n, job))
    return json.loads(sfd.sfctl("report", job, "--last", "100", "--json").stdout)


def recorded_reference(sfd, job):
    rec = os.path.join(sfd.dir, job + ".jsonl")
    sfd.sfctl("record", job, "-o", rec)
    with open(rec) as f:
        check('"type":"reference"' in f.read(), "the recording carries no reference line")


def main():
    sfd = Sfd("", start=False)
    prom = os.path.join(sfd.dir, "prom")
    os.mkdir(prom)
    hook_out = os.path.join(sfd.dir, "alert.json")
    hook = os.path.join(sfd.dir, "alert.sh")
    with open(hook, "w") as f:
        f.write("#!/bin/sh\ncat > %s.tmp && echo \"$SF_JOB\" >> %s.tmp && mv %s.tmp %s\n" %
                (hook_out, hook_out, hook_out, hook_out))
    os.chmod(hook, stat.S_IRWXU)
    with open(sfd.conf, "w") as f:
        f.write("[sfd]\nprom_dir = %s\nalert_command = %s\nalert_windows = 2\n"
                "alert_interval_ms = 0\n[gates]\nwarmup_steps = %d\nwindow_steps = %d\n"
                % (prom, hook, WARMUP, WINDOW))
    try:
        sfd.start()
        # Rank 2's data wait grows by 2 ms from the first step of window 3.
        slow_from = WARMUP + 3 * WINDOW
        run_job(sfd, "chg", 4, WARMUP + 6 * WINDOW,
                extra={2: dict(slow_rank=2, slow_stage=0, slow_ns=2000000, slow_from=slow_from)})
        ws = windows(sfd, "chg", 6)
        check([w["change"] is None for w in ws] == [True] * 3 + [False] * 3,
              "change on the wrong windows: %s" % [w["change"] is None for w in ws])
        for i, w in enumerate(ws[3:], 3):
            c = w["change"]
            check(c["baseline"] == {"windows": [0, 1, 2], "steps": 3 * WINDOW},
                  "baseline %s" % c["baseline"])
            # pooled with the windows before it that follow the baseline
            pooled = list(range(3, i + 1))
            check(c["measured"] == {"windows": pooled, "steps": len(pooled) * WINDOW},
                  "window %d measured %s" % (i, c["measured"]))
            check(c["route"][:1] == ["data.next_wait"], "route %s" % c["route"])
            check(c["suspect_ranks"][0]["rank"] == 2, "suspects %s" % c["suspect_ranks"])
            data = c["stages"][0]
            check(data["significant"] and 0.0019 < data["delta_advance_s"] < 0.0021,
                  "data.next_wait change %s" % data)
            check(data["ci_low_s"] <= data["delta_advance_s"] <= data["ci_high_s"], "interval")
            check(c["slowdown"] > 1.1, "slowdown %s" % c["slowdown"])
            check(w["whatif"]["basis"] == "reference" and w["whatif"]["lower_bound"], "whatif")
        text = sfd.sfctl("report", "chg").stdout.decode()
        check(text.splitlines()[1].startswith("step +") and
              " over windows 3-5 vs baseline (windows 0-2): " in text.splitlines()[1] and
              "first appears in data.next_wait" in text.splitlines()[1] and
              text.splitlines()[1].endswith("rank 2"), "human view: %s" % text)

        # Prometheus: slowdown, the change per stage and the waste.
        path = os.path.join(prom, "stagefrontier.prom")

        def exported():
            if not os.path.exists(path):
                return False
            with open(path) as f:
                t = f.read()
            return 'stagefrontier_job_slowdown_ratio{job_id="chg"}' in t and t
        t = wait_for(exported, "the change metrics")
        check('stagefrontier_job_change_seconds{job_id="chg",stage="data.next_wait"} 0.00' in t,
              "change metric missing")
        check('stagefrontier_job_waste_rank_seconds_total{job_id="chg"}' in t, "waste missing")

        # The alert hook: windows 3 and 4 changed, so it ran with a window's JSON.
        wait_for(lambda: os.path.exists(hook_out), "the alert hook's output")
        with open(hook_out) as f:
            body, job = f.read().rsplit("\n", 2)[:2]
        check(job == "chg", "SF_JOB %r" % job)
        check(json.loads(body)["change"]["route"][0] == "data.next_wait", "alert JSON")
        b = json.loads(sfd.sfctl("baseline", "chg", "--json").stdout)
        check(b["alerts_run"] >= 1 and b["alerts_failed"] == 0, "alert counters %s" % b)

        # sfctl baseline: show, a bad pin, a pin, a clear.
        out = sfd.sfctl("baseline", "chg").stdout.decode()
        check("baseline windows 0, 1, 2" in out and "automatic" in out, "baseline: %s" % out)
        p = sfd.sfctl("baseline", "chg", "--pin", "99", check_rc=5)
        check(b"not kept" in p.stderr, "pin of a missing window: %s" % p.stderr)
        sfd.sfctl("baseline", "chg", "--pin", "x", check_rc=2)
        sfd.sfctl("baseline", "chg", "--pin", "4")
        ws = json.loads(sfd.sfctl("report", "chg", "--last", "100", "--json").stdout)
        check([w["change"] is None for w in ws] == [True] * 5 + [False],
              "after the pin: %s" % [w["change"] is None for w in ws])
        check(ws[5]["change"]["baseline"]["windows"] == [4] and not ws[5]["change"]["route"],
              "window 5 against window 4: %s" % ws[5]["change"])
        recorded_reference(sfd, "chg")
        live_equals_replay(sfd, "chg")
        sfd.sfctl("baseline", "chg", "--clear")
        p = sfd.sfctl("baseline", "chg", "--clear", check_rc=5)
        check(b"no window is pinned" in p.stderr, "second clear: %s" % p.stderr)
        ws = json.loads(sfd.sfctl("report", "chg", "--last", "100", "--json").stdout)
        check(all(w["change"]["route"][:1] == ["data.next_wait"] for w in ws[3:]), "after clear")
        live_equals_replay(sfd, "chg")

        # A clean job: the same durations throughout, no significant change.
        run_job(sfd, "clean", 4, WARMUP + 5 * WINDOW)
        ws = windows(sfd, "clean", 5)
        check(all(w["change"]["route"] == [] for w in ws[3:]),
              "clean job flagged: %s" % [w["change"]["route"] for w in ws[3:]])
        check(b"no significant change" in sfd.sfctl("report", "clean").stdout, "clean text")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
        check("loop closed with live handles" not in sfd.logtext(), "handles leaked")
    finally:
        sfd.close()
    failing_hooks()
    print("ok")


def failing_hooks():
    """A hook that fails, or cannot start, is logged and counted; sfd goes on."""
    for cmd, counter_msg in (("/bin/false", "alert_command failed: exit 1"),
                             ("/nonexistent/hook --flag", "alert_command could not start")):
        sfd = Sfd("[sfd]\nalert_command = %s\nalert_windows = 1\nalert_interval_ms = 0\n"
                  "[gates]\nwarmup_steps = %d\nwindow_steps = %d\n" % (cmd, WARMUP, WINDOW))
        try:
            run_job(sfd, "bad", 2, WARMUP + 5 * WINDOW,
                    extra={1: dict(slow_rank=1, slow_stage=1, slow_ns=3000000,
                                   slow_from=WARMUP + 3 * WINDOW)})
            windows(sfd, "bad", 5)

            def counted():
                b = json.loads(sfd.sfctl("baseline", "bad", "--json").stdout)
                return b["alerts_failed"] >= 1 and b
            b = wait_for(counted, "a failed hook counted")
            check(b["baseline"]["windows"] == [0, 1, 2], "baseline %s" % b)
            wait_for(lambda: counter_msg in sfd.logtext(), "the log line %r" % counter_msg)
            check(sfd.status()["jobs"] == 1, "sfd stopped answering")
            check(sfd.stop() == 0, "sfd did not exit cleanly")
        finally:
            sfd.close()


main()
