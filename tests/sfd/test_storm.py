"""A hello storm of thousands of connections is bounded by max_connections:
the excess is refused and counted, operators can still query, and the
daemon serves a normal job afterwards."""

from sfdtest import Sfd, check, send, spawn, wait_for

N = 3000
MAX = 256
CONF = """[limits]
max_connections = %d
[gates]
warmup_steps = 0
window_steps = 10
""" % MAX


def main():
    sfd = Sfd(CONF)
    try:
        storm = spawn(sfd, mode="storm", storm=N, job="storm", world=4096)
        check(storm.stdout.readline().strip() == b"ready", "storm sender did not start")
        wait_for(lambda: sfd.rejected("max_connections") >= N - MAX,
                 "max_connections rejections")
        st = sfd.status()
        check(st["connections"] <= MAX, "connections %d above the bound" % st["connections"])
        check(st["rejected"]["max_connections"] == N - st["connections"],
              "refused %d + open %d != %d" % (st["rejected"]["max_connections"],
                                             st["connections"], N))
        storm.stdin.close()
        out = storm.stdout.read().decode()
        check(storm.wait(timeout=120) == 0, "storm sender failed")
        check("open=%d" % MAX in out, "storm sender saw: %s" % out)
        wait_for(lambda: sfd.status()["connections"] == 0, "storm connections to go")
        rc, out, _ = send(sfd, job="after", rank=0, world=1, steps=25)
        check(rc == 0 and out["sent"] == "25", "job after the storm: %s" % out)
        wait_for(lambda: sfd.jobs().get("after", {}).get("records") == 25, "records after storm")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
