"""Groups a perf profile of sfd (ingest_bench.py --perf FILE) by where the
CPU goes: each sample is charged to the first of these sfd functions found on
its stack, in this order (the window close before the ingest path that calls
it), and the share of every group is printed.

usage: ingest_profile.py FILE"""

import collections
import subprocess
import sys

# (group, a function name that marks it), most specific first.
GROUPS = [
    ("window close: change against the baseline", "sf__change_of_parts"),
    ("window close: what-if", "whatif"),
    ("window close: report compute", "sf_report_compute"),
    ("window close: summary build", "sf_summary_build"),
    ("window close: history pack and queue", "sfd_history_put_report"),
    ("window close: baseline, other", "sfd_baseline_attach"),
    ("window close: store and alerts", "sfd_publish_report"),
    ("window close: sfd's rows, order, store", "sfd_window_close"),
    ("ingest: protobuf-c decode", "sfd_message_decode"),
    ("ingest: window insert", "sfd_window_add"),
    ("ingest: shed peek", "sfd_shed_check"),
    ("ingest: validation and handling", "handle_batch"),
    ("ingest: recvmsg", "recvmsg"),
    ("ingest: other", "sfd_ingest_handle"),
    ("history writer thread", "writer_main"),
    ("loop: epoll_wait, sleeping and waking", "epoll_wait"),
    ("loop: other", "uv_run"),
]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ingest_profile.py FILE")
    out = subprocess.run(["perf", "script", "-i", sys.argv[1]], capture_output=True,
                         check=True, text=True).stdout
    shares = collections.Counter()
    total = 0
    for sample in out.split("\n\n"):
        frames = [line.split()[1] for line in sample.split("\n")[1:] if len(line.split()) > 1]
        if not frames:
            continue
        total += 1
        stack = " ".join(frames)
        shares[next((g for g, f in GROUPS if f in stack), "other")] += 1
    if total == 0:
        sys.exit("no samples")
    for group, n in shares.most_common():
        print("%-42s %5.1f %%" % (group, 100.0 * n / total))
    print("%d samples" % total)


main()
