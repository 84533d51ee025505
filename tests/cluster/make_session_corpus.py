#!/usr/bin/python3
"""Writes the seed corpus of fuzz_peer_session: sessions of records
[type][sender][term][length u16 LE][payload] built from the payload seeds of
fuzz_peer_frame and fuzz_peer_summary (peer_corpus_gen writes those).
usage: make_session_corpus.py tests/fuzz/corpus
"""

import os
import struct
import sys

TYPES = {"tick": 0, "heartbeat": 11, "claim": 1, "vote": 2, "summary": 3, "ack": 4,
         "report": 5, "capture_request": 7, "capture_result": 8, "catchup_request": 9,
         "catchup_done": 10}
REPLAY = 0x80


def main():
    corpus = sys.argv[1]
    frame, summary = os.path.join(corpus, "fuzz_peer_frame"), os.path.join(corpus, "fuzz_peer_summary")

    def payload(name):
        if name.startswith("summary:"):
            with open(os.path.join(summary, name[8:]), "rb") as f:
                return f.read()
        path = os.path.join(frame, name)
        with open(path if "_payload" in name else path + "_payload", "rb") as f:
            return f.read()[1:]  # the lead byte picks fuzz_peer_frame's layer

    def record(kind, sender, term, name=None, replay=False, final=False):
        body = payload(name) if name else b""
        if final:
            body += bytes([7 << 3, 1])  # Report.final = true, appended as protobuf allows
        return struct.pack("<BBBH", TYPES[kind] | (REPLAY if replay else 0), sender, term,
                           len(body)) + body

    sessions = {
        "election": [record("heartbeat", 0, 1, "heartbeat"), record("claim", 1, 2, "claim"),
                     record("heartbeat", 1, 2, "heartbeat_view"), record("tick", 0, 0)],
        "summaries_and_report": [record("heartbeat", 0, 1, "heartbeat"),
                                 record("summary", 0, 1, "summary:mergeable"),
                                 record("summary", 1, 1, "summary:dense"), record("tick", 0, 0),
                                 record("report", 0, 1, "report"),
                                 record("report", 1, 1, "report_payload_dense"),
                                 record("ack", 0, 1, "ack")],
        "final_report": [record("heartbeat", 0, 1, "heartbeat"),
                         record("report", 0, 1, "report", final=True),
                         record("report", 1, 1, "report_payload_dense", final=True),
                         record("report", 0, 1, "report", final=True), record("tick", 0, 0)],
        "replayed": [record("heartbeat", 0, 1, "heartbeat"),
                     record("heartbeat", 0, 1, "heartbeat", replay=True),
                     record("report", 0, 1, "report"), record("report", 0, 1, "report", replay=True)],
        "subtree": [record("heartbeat", 1, 3, "heartbeat_subtree"), record("tick", 0, 0),
                    record("heartbeat", 1, 200, "heartbeat_payload_no_owner")],
        "captures": [record("heartbeat", 0, 1, "heartbeat"),
                     record("capture_request", 0, 1, "capture_request"),
                     record("capture_result", 0, 1, "capture_result")],
        "catchup": [record("heartbeat", 0, 1, "heartbeat"),
                    record("catchup_request", 1, 1, "catchup_request"),
                    record("report", 0, 1, "report"), record("catchup_done", 0, 1, "catchup_done")],
    }
    out = os.path.join(corpus, "fuzz_peer_session")
    os.makedirs(out, exist_ok=True)
    for name, records in sessions.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"".join(records))


if __name__ == "__main__":
    main()
