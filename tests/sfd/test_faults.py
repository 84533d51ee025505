"""Faults never stop training: a stopped daemon (SIGSTOP until the socket
buffer fills), a killed daemon (kill -9 mid-run, no SIGPIPE) and its restart
(clients reconnect, the affected window is downgraded), and a flood (drops
counted, the daemon's memory stays bounded)."""

import json
import signal
import subprocess

from sfdtest import Sfd, check, parse_kv, run_job, send, sender_args, vm_rss_kb, wait_for

CONF = """[sfd]
window_grace_ms = 300
[gates]
warmup_steps = 0
window_steps = 10
"""


def stopped_daemon():
    sfd = Sfd(CONF)
    try:
        sfd.proc.send_signal(signal.SIGSTOP)
        steps = 40000
        rc, out, p = send(sfd, job="stop", rank=0, world=1, steps=steps, batch=16)
        check(rc == 0, "sender failed while sfd was stopped: %s" % p.stderr.decode())
        sent, dropped = int(out["sent"]), int(out["dropped"])
        check(dropped > 0, "the full socket buffer must drop records: %s" % out)
        check(sent + dropped == steps, "every step completed: %s" % out)
        sfd.proc.send_signal(signal.SIGCONT)
        # The daemon drains what the socket buffer held: exactly what was sent.
        wait_for(lambda: sfd.jobs().get("stop", {}).get("records") == sent,
                 "sfd to drain the buffered records")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()


def killed_and_restarted():
    sfd = Sfd(CONF)
    try:
        procs = [subprocess.Popen(sender_args(sfd, job="kr", rank=r, world=2, steps=300,
                                              batch=10, pause_every=100),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for r in range(2)]

        def phase(want):
            for p in procs:
                line = p.stdout.readline().decode().strip()
                check(line == "paused %d" % want, "sender phase: %r" % line)

        def resume():
            for p in procs:
                p.stdin.write(b"\n")
                p.stdin.flush()

        phase(100)                              # steps 0..99 delivered
        wait_for(lambda: sfd.jobs().get("kr", {}).get("records") == 200, "first records")
        sfd.proc.kill()                          # kill -9 mid-run
        sfd.proc.wait()
        resume()
        phase(200)                              # steps 100..199 sent into the void
        sfd.start()                              # same sockets, fresh daemon
        resume()
        outs = []
        for p in procs:
            o, e = p.communicate(timeout=120)
            check(p.returncode == 0, "sender died (rc %d, SIGPIPE is -13): %s"
                  % (p.returncode, e.decode()))
            outs.append(parse_kv(o.decode()))
        for o in outs:
            check(int(o["reconnects"]) >= 1, "sender did not reconnect: %s" % o)
            check(int(o["dropped"]) >= 100, "records sent while sfd was dead: %s" % o)
        wait_for(lambda: sfd.jobs().get("kr", {}).get("records") == 200, "records after restart")
        jobs = sfd.jobs()
        check(jobs["kr"]["dropped"] >= 100, "restarted sfd counts the drops: %s" % jobs["kr"])
        wait_for(lambda: sfd.jobs()["kr"]["open_windows"] == 0, "windows to close")
        ws = json.loads(sfd.sfctl("report", "kr", "--last", "100", "--json").stdout)
        first = min(ws, key=lambda w: w["window"]["index"])
        check(first["window"]["index"] == 10, "first window after restart: %s" % first["window"])
        check("dropped_records" in first["downgrade_reasons"],
              "the window after the gap is downgraded: %s" % first["downgrade_reasons"])
        clean = [w for w in ws if w["window"]["index"] >= 21]
        check(clean and all("dropped_records" not in w["downgrade_reasons"] for w in clean),
              "later windows are clean")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()


def flood():
    sfd = Sfd(CONF + "[limits]\nmax_pending_steps = 65536\nkeep_windows = 8\n")
    try:
        run_job(sfd, "warm", 1, 200)
        before = vm_rss_kb(sfd.pid())
        steps = 100000
        outs = run_job(sfd, "flood", 8, steps, batch=64)
        sent = sum(int(o["sent"]) for o in outs)
        dropped = sum(int(o["dropped"]) for o in outs)
        check(sent + dropped == 8 * steps, "flood senders completed every step")
        wait_for(lambda: sfd.jobs()["flood"]["records"] + sfd.status()["rejected_total"] >= sent
                 or sfd.jobs()["flood"]["records"] == sent, "sfd to take the flood")
        after = vm_rss_kb(sfd.pid())
        print("flood: sent %d dropped %d, sfd VmRSS %d kB -> %d kB" % (sent, dropped, before,
                                                                      after))
        check(after < before + 256 * 1024, "sfd memory grew from %d to %d kB" % (before, after))
        st = sfd.status()
        check(st["dropped"] <= dropped, "drops counted by sfd exceed the clients' own")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()


stopped_daemon()
killed_and_restarted()
flood()
print("ok")
