"""The live verdict in the real sfd (docs/LIVE.md): once the baseline of the
job's first eligible windows exists, every complete step is tested; a rank
slowed by a tenth of a step from a known step is named, with its stage, in
`sfctl jobs --json` within ten steps of the onset; the verdict ends once the
rank is back; both are events in `sfctl events`, text and JSON; STATUS and
Prometheus carry them; a restarted sfd lists the events again from its
history; a clean job carries no verdict; with `live_verdict = no` a slowed
job is never tested."""

import json
import os
import subprocess

from sfdtest import Sfd, check, sender_args, wait_for, fail, TIMEOUT

WARMUP, WINDOW, CALIBRATION = 2, 10, 30
ONSET = WARMUP + 6 * WINDOW  # well after the three baseline windows
BACK = ONSET + 40
STEPS = BACK + 40
SLOW_STAGE = 1


def start_job(sfd, job, world, slow, until=BACK):
    procs = []
    for r in range(world):
        kw = dict(job=job, rank=r, world=world, steps=STEPS, batch=1, step_us=3000)
        if slow and r == 2:
            # a tenth of the sender's ~12.6 ms step, on rank 2's stage 1
            kw.update(slow_rank=2, slow_stage=SLOW_STAGE, slow_ns=1260000, slow_from=ONSET,
                      slow_until=until)
        procs.append(subprocess.Popen(sender_args(sfd, **kw), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    return procs


def finish(procs):
    for p in procs:
        _, e = p.communicate(timeout=TIMEOUT * 4)
        if p.returncode != 0:
            fail("sender rc %d: %s" % (p.returncode, e.decode()))


def events(sfd, job):
    return json.loads(sfd.sfctl("events", job, "--json").stdout)


def main():
    prom = None
    sfd = Sfd("", start=False)
    prom = os.path.join(sfd.dir, "prom")
    os.mkdir(prom)
    with open(sfd.conf, "w") as f:
        f.write("[sfd]\nprom_dir = %s\nlive_calibration_steps = %d\n"
                "[gates]\nwarmup_steps = %d\nwindow_steps = %d\n"
                % (prom, CALIBRATION, WARMUP, WINDOW))
    try:
        sfd.start()
        slow = start_job(sfd, "lv", 4, True)
        clean = start_job(sfd, "clean", 4, False)
        # slow to its last step: its verdict is still in force once it has ended
        held = start_job(sfd, "held", 4, True, until=0)

        # The verdict names rank 2 and its stage while the fault lasts.
        seen = {}

        def named():
            # In force now, else the start event: on a loaded machine the
            # verdict can start and end between two polls.
            v = sfd.jobs().get("lv", {}).get("verdict")
            if v is None:
                starts = [e["verdict"] for e in events(sfd, "lv")["events"]
                          if e["event"] == "start"]
                v = starts[0] if starts else None
            if v is not None:
                seen.update(v)
            return v is not None

        wait_for(named, "a live verdict on lv")
        v = seen
        stage = sfd.jobs()["lv"]["stages"][SLOW_STAGE]
        check(v["kind"] == "straggler" and v["rank"] == 2 and v["stage"] == stage,
              "verdict %s" % v)
        check(ONSET <= v["detected_step"] < ONSET + 10,
              "detected at step %d, onset %d" % (v["detected_step"], ONSET))
        check(ONSET - 10 <= v["since_step"] <= v["detected_step"], "since %s" % v)
        check(0.0009 < v["effect_s"] < 0.0016, "effect %s" % v["effect_s"])
        check(v["detected_at"] > 1e12 and v["evidence"]["cusum_sigmas"] > 0, "evidence %s" % v)
        finish(slow)
        finish(clean)
        finish(held)

        # A verdict in force: STATUS, the jobs view, watch and the export name it.
        wait_for(lambda: (sfd.jobs()["held"].get("verdict") or {}).get("rank") == 2,
                 "the held job's verdict")
        status = sfd.status()
        check([x["job"] for x in status["verdicts"]] == ["held"] and
              status["verdicts"][0]["verdict"]["rank"] == 2, "STATUS verdicts %s" %
              status["verdicts"])
        one = json.loads(sfd.sfctl("jobs", "held", "--json").stdout)
        check(one["job_id"] == "held" and one["verdict"]["rank"] == 2 and
              one["verdict"]["kind"] == "straggler", "sfctl jobs held --json: %s" % one)
        sfd.sfctl("jobs", "nosuchjob", "--json", check_rc=5)
        line = "straggler: rank 2 in %s" % stage
        jobs_text = sfd.sfctl("jobs").stdout.decode()
        check("held: LIVE VERDICT " + line in jobs_text, "jobs view: %s" % jobs_text)
        one_text = sfd.sfctl("jobs", "held").stdout.decode()
        check("held: LIVE VERDICT " + line in one_text and "\nlv " not in one_text,
              "sfctl jobs held: %s" % one_text)
        watch = sfd.sfctl("watch", "held", "--count", "1").stdout.decode()
        check("\n*** live verdict " + line in "\n" + "\n".join(watch.splitlines()[:2]),
              "watch: %s" % watch[:300])
        # Back at the base durations: the verdict ends, and both are events.
        wait_for(lambda: len(events(sfd, "lv")["events"]) >= 2, "the verdict's end")
        ev = events(sfd, "lv")
        if os.environ.get("SF_TEST_VERBOSE"):
            print(json.dumps(ev, indent=1), sfd.sfctl("events", "lv").stdout.decode())
        check([e["event"] for e in ev["events"]] == ["start", "end"], "events %s" % ev)
        check(BACK <= ev["events"][1]["step"] < BACK + 30, "ended at %s" % ev["events"][1])
        check(ev["verdict"] is None and sfd.jobs()["lv"]["verdict"] is None, "still in force")
        text = sfd.sfctl("events", "lv").stdout.decode()
        check("straggler: rank 2 in %s" % stage in text and " start " in text and " end " in text,
              "events text: %s" % text)

        # A clean job: tested at every step, never a verdict.
        ce = events(sfd, "clean")
        check(ce["calibrated"] and ce["steps_tested"] > 0 and ce["events"] == [],
              "clean job %s" % ce)
        check(sfd.jobs()["clean"]["verdict"] is None, "clean job carries a verdict")

        path = os.path.join(prom, "stagefrontier.prom")

        def exported():
            if not os.path.exists(path):
                return False
            with open(path) as f:
                t = f.read()
            return 'stagefrontier_job_live_verdict_events_total{job_id="lv"} 2' in t and \
                'stagefrontier_job_live_verdict_events_total{job_id="clean"} 0' in t and \
                ('stagefrontier_job_live_verdict_info{job_id="held",kind="straggler",rank="2",'
                 'stage="%s"} ' % stage) in t and 'live_verdict_info{job_id="lv"' not in t
        wait_for(exported, "the verdict events in Prometheus")
        sfd.sfctl("events", "nosuchjob", check_rc=5)

        # The events are kept in the history: a restarted sfd lists them again.
        check(sfd.stop() == 0, "sfd did not exit cleanly")
        sfd.start()
        again = events(sfd, "lv")
        check(again["events"] == ev["events"], "after a restart: %s, before: %s" %
              (again["events"], ev["events"]))
        check(events(sfd, "clean")["events"] == [], "the clean job gained events")

        # live_verdict = no: the same fault is never tested, never named.
        check(sfd.stop() == 0, "sfd did not exit cleanly")
        with open(sfd.conf, "a") as f:
            f.write("[sfd]\nlive_verdict = no\n")
        sfd.start()
        finish(start_job(sfd, "off", 4, True, until=0))
        wait_for(lambda: sfd.jobs().get("off", {}).get("windows", 0) >= 8,
                 "the off job's windows")
        off = events(sfd, "off")
        check(not off["calibrated"] and off["steps_tested"] == 0 and off["events"] == [] and
              sfd.jobs()["off"]["verdict"] is None, "live_verdict = no: %s" % off)
    finally:
        sfd.close()


if __name__ == "__main__":
    main()
