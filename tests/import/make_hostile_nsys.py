#!/usr/bin/python3
"""Writes nsys-shaped SQLite files whose schema attacks the reader.

usage: make_hostile_nsys.py OUT.sqlite KIND
KIND: recursive-view (StringIds recurses forever), huge-view (StringIds makes
a 400 MB value), trigger (a trigger on NVTX_EVENTS), huge-column (a generated
column of 400 MB), quadratic (StringIds without a key: every event scans it),
heavy-row (one event that scans 2 million keyless strings).
"""

import os
import sqlite3
import sys

EVENTS = """CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER,
    eventType INTEGER NOT NULL, text TEXT, textId INTEGER, globalTid INTEGER)"""


def main():
    out, kind = sys.argv[1], sys.argv[2]
    if os.path.exists(out):
        os.unlink(out)
    db = sqlite3.connect(out)
    if kind == "huge-column":
        db.execute(EVENTS.replace("text TEXT,", "text TEXT GENERATED ALWAYS AS "
                                  "(hex(zeroblob(400000000))) VIRTUAL,"))
    else:
        db.execute(EVENTS)
    if kind == "recursive-view":
        db.execute("CREATE VIEW StringIds AS WITH RECURSIVE r(id, value) AS "
                   "(SELECT 1, 'x' UNION ALL SELECT id + 1, value FROM r) SELECT id, value FROM r")
    elif kind == "huge-view":
        db.execute("CREATE VIEW StringIds AS SELECT 1 AS id, hex(randomblob(400000000)) AS value")
    elif kind == "heavy-row":
        db.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
        db.execute("INSERT INTO StringIds WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL "
                   "SELECT i + 1 FROM r WHERE i < 2000000) SELECT i, '' FROM r")
    elif kind == "quadratic":
        db.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
        db.execute("INSERT INTO StringIds WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL "
                   "SELECT i + 1 FROM r WHERE i < 20000) SELECT i, 's' || i FROM r")
    else:
        db.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    if kind == "trigger":
        db.execute("CREATE TRIGGER steal AFTER INSERT ON NVTX_EVENTS BEGIN "
                   "DELETE FROM StringIds; END")
    n = {"quadratic": 20000, "heavy-row": 1}.get(kind, 3)
    db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, textId, globalTid) "
               "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < ?) "
               "SELECT i * 10, i * 10 + 5, 59, i, 1 FROM r", (n,))
    db.commit()
    db.close()


if __name__ == "__main__":
    main()
