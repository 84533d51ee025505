#!/usr/bin/python3
"""Writes test fixtures in the layout of `nsys export --type sqlite`.

The real exporter is not available to the test suite, so these files carry
the tables and columns the exporter's schema documents for NVTX data
(NVTX_EVENTS, StringIds, TARGET_INFO_SESSION_START_TIME); names are stored
both inline (text) and through textId, as the exporter does.
usage: make_nsys.py OUT.sqlite RANK [SHIFT_S]
"""

import sqlite3
import sys

SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER REFERENCES StringIds (id), domainId INTEGER,
    uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
    int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
"""

PUSH_POP, START_END, MARK = 59, 60, 34


def main():
    out, rank = sys.argv[1], int(sys.argv[2])
    shift = int(float(sys.argv[3]) * 1e9) if len(sys.argv) > 3 else 0
    db = sqlite3.connect(out)
    db.executescript(SCHEMA)
    db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')",
               (1700000000000000000 + shift,))
    ids = {}

    def string_id(s):
        if s not in ids:
            ids[s] = len(ids) + 1
            db.execute("INSERT INTO StringIds VALUES (?, ?)", (ids[s], s))
        return ids[s]

    def rng(start, end, name, kind=PUSH_POP, inline=True):
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, textId, globalTid) "
                   "VALUES (?, ?, ?, ?, ?, 1)",
                   (start, end, kind, name if inline else None,
                    None if inline else string_id(name)))

    # Times in ns from the session start. Rank 1 waits longer for data.
    t = 1000
    for step in range(3):
        data = 200000 + (300000 if rank == 1 else 0)
        rng(t, t + data + 900000, "ProfilerStep#%d" % step, START_END, inline=False)
        rng(t, t + data, "data.next_wait", inline=(step % 2 == 0))
        t += data
        rng(t, t + 400000, "model.fwd_loss_cpu_wall")
        rng(t + 100, t + 200, "aten::linear")  # unmapped, inside forward
        t += 400000
        rng(t, t + 300000, "model.backward_cpu_wall", inline=False)
        t += 300000
        rng(t, t + 150000, "optim.step_cpu_wall")
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text) VALUES (?, NULL, ?, ?)",
                   (t, MARK, "checkpoint"))
        rng(t + 200000, None, "an unclosed range")
        t += 200000
    db.commit()
    db.close()


if __name__ == "__main__":
    main()
