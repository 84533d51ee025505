"""libsfclient against the real sfd: four client processes with one rank
slow in data.next_wait; every record arrives, every window closes complete,
the route names the slow stage and rank, and the live report equals the
replay of its recording."""

import json
import os
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
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
