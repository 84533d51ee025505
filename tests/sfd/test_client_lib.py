"""libsfclient against the real sfd: four client processes with one rank
slow in data.next_wait; every record arrives, every window closes complete,
the route names the slow stage and rank, and the live report equals the
replay of its recording. Then a stopped daemon: the client completes every
step and counts its drops once its ring and the socket buffer are full."""

import json
import os
import signal
import subprocess

from sfdtest import SFCTL, Sfd, check, fail, parse_kv, wait_for

CLIENT = os.environ.get("SF_CLIENT_JOB")
CONF = """[sfd]
window_grace_ms = 5000
[gates]
warmup_steps = 0
window_steps = 20
"""
WORLD, STEPS = 4, 60


def main():
    if not CLIENT:
        print("skipped: libsfclient not built")
        return
    sfd = Sfd(CONF)
    try:
        procs = [subprocess.Popen([CLIENT, sfd.ingest, "lib", str(r), str(WORLD), str(STEPS),
                                   "1", "0", "4000"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for r in range(WORLD)]
        for p in procs:
            o, e = p.communicate(timeout=300)
            check(p.returncode == 0, "client rank failed: %s" % e.decode())
            st = parse_kv(o.decode())
            check(st["sent"] == str(STEPS) and st["dropped"] == "0", "client stats: %s" % st)
        wait_for(lambda: sfd.jobs().get("lib", {}).get("windows") == STEPS // 20,
                 "every window to close")
        job = sfd.jobs()["lib"]
        check(job["records"] == WORLD * STEPS and job["rejected"] == 0, "job: %s" % job)
        live = sfd.sfctl("report", "lib", "--last", "10", "--json").stdout
        for w in json.loads(live):
            check(w["window"]["incomplete_steps"] == 0 and w["window"]["missing_ranks"] == 0,
                  "complete window: %s" % w["window"])
            check("data.next_wait" in w["routing_set"][:2], "route: %s" % w["routing_set"])
            lead = w["stages"][0]
            check(lead["leader_rank"] == 1, "leader of data.next_wait: %s" % lead)
        rec = os.path.join(sfd.dir, "lib.jsonl")
        sfd.sfctl("record", "lib", "-o", rec)
        p = subprocess.run([SFCTL, "replay", "--json", rec], capture_output=True, timeout=60)
        if p.returncode != 0 or p.stdout != live:
            fail("replay of the client job differs from the live report")

        sfd.proc.send_signal(signal.SIGSTOP)
        steps = 30000
        p = subprocess.run([CLIENT, sfd.ingest, "stopped", "0", "1", str(steps), "-1", "0", "0",
                            "0", "0"], capture_output=True, timeout=300)
        sfd.proc.send_signal(signal.SIGCONT)
        check(p.returncode == 0, "client failed against a stopped sfd: %s" % p.stderr.decode())
        st = parse_kv(p.stdout.decode())
        check(st["steps"] == str(steps), "client steps: %s" % st)
        check(int(st["dropped"]) > 0, "ring and socket buffer full: drops counted: %s" % st)
        check(int(st["sent"]) + int(st["dropped"]) <= steps, "client counters: %s" % st)
        wait_for(lambda: sfd.jobs().get("stopped", {}).get("records", 0) >= int(st["sent"]),
                 "sfd to drain what the client sent")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
