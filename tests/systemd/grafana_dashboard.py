"""The shipped Grafana dashboard (systemd/grafana/stagefrontier-dashboard.json).
Debian packages no Grafana, so it is checked against the classic dashboard
JSON model's schema (Grafana's dashboard kind: required fields and their
types, the 24-column grid, variable types, unique panel ids and refIds), and
every PromQL query against the metrics sfd writes: each metric name must be a
family sfd's Prometheus writer declares (daemon/report/prom_text.c), and each label a query
matches or groups on must be a label sfd writes on that metric (read from
prom_sample, which writes the file through sfd's own writer).

usage: grafana_dashboard.py SOURCE_DIR PROM_SAMPLE"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

SRC, SAMPLE = sys.argv[1], sys.argv[2]
FAILS = []

PANEL_TYPES = {"timeseries", "stat", "table", "bargauge", "gauge", "barchart", "piechart",
               "text", "row", "heatmap", "state-timeline", "status-history"}
VARIABLE_TYPES = {"query", "adhoc", "constant", "datasource", "interval", "textbox", "custom",
                  "system"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                "unless", "bool", "offset", "time", "rate", "sum", "avg", "max", "min",
                "count", "label_values", "topk", "increase", "irate", "e", "inf", "nan"}


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# ---- the schema --------------------------------------------------------------

def check_dashboard(d):
    check(isinstance(d.get("title"), str) and d["title"], "title: a non-empty string")
    check(isinstance(d.get("uid"), str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"]),
          "uid: 1-40 of [A-Za-z0-9_-]")
    check(is_int(d.get("schemaVersion")) and 0 < d["schemaVersion"] < 65536,
          "schemaVersion: an unsigned 16-bit integer")
    check(d.get("graphTooltip", 0) in (0, 1, 2), "graphTooltip: 0, 1 or 2")
    check(isinstance(d.get("time", {}).get("from"), str) and isinstance(d["time"].get("to"), str),
          "time: from and to strings")
    check(isinstance(d.get("tags", []), list) and all(isinstance(t, str) for t in d.get("tags", [])),
          "tags: strings")
    check(isinstance(d.get("refresh", ""), str) or d.get("refresh") is False, "refresh")
    check(isinstance(d.get("panels"), list) and d["panels"], "panels: a non-empty list")
    for v in d.get("templating", {}).get("list", []):
        check(isinstance(v.get("name"), str) and v["name"], "variable without a name")
        check(v.get("type") in VARIABLE_TYPES, "variable %s: type %r" % (v.get("name"), v.get("type")))


def check_panels(panels, variables):
    ids, cells = set(), {}
    for p in panels:
        pid = p.get("id")
        check(is_int(pid) and pid not in ids, "panel id %r missing or repeated" % pid)
        ids.add(pid)
        check(p.get("type") in PANEL_TYPES, "panel %r: type %r" % (pid, p.get("type")))
        check(isinstance(p.get("title"), str) and p["title"], "panel %r: no title" % pid)
        g = p.get("gridPos", {})
        ok = all(is_int(g.get(k)) for k in "xywh") and g["w"] >= 1 and g["h"] >= 1 \
            and g["x"] >= 0 and g["y"] >= 0 and g["x"] + g["w"] <= 24
        check(ok, "panel %r: gridPos %s outside the 24-column grid" % (pid, g))
        if ok:
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    check((x, y) not in cells, "panels %r and %r overlap" % (cells.get((x, y)), pid))
                    cells[(x, y)] = pid
        if p.get("type") == "row":
            continue
        ds = p.get("datasource", {})
        check(ds.get("type") == "prometheus" and ds.get("uid") == "${datasource}",
              "panel %r: datasource %s is not the dashboard's Prometheus variable" % (pid, ds))
        refs = [t.get("refId") for t in p.get("targets", [])]
        check(refs and len(set(refs)) == len(refs) and all(isinstance(r, str) and r for r in refs),
              "panel %r: refIds %s" % (pid, refs))
        for t in p.get("targets", []):
            check(isinstance(t.get("expr"), str) and t["expr"], "panel %r: a target without expr" % pid)
            for var in re.findall(r"\$\{?([A-Za-z_]\w*)", t.get("expr", "")):
                check(var in variables, "panel %r: undefined variable $%s" % (pid, var))


# ---- the queries against what sfd writes --------------------------------------

def declared_families():
    """The metric families sfd's Prometheus writer declares, name -> type
    (its family table: "NAME", "gauge|counter", in daemon/report/prom_text.c)."""
    families = {}
    for path in glob.glob(os.path.join(SRC, "daemon", "*", "*.c")):
        text = open(path).read()
        families.update(re.findall(r'"(stagefrontier_[a-z0-9_]+)",\s*"(gauge|counter)"', text))
    check(len(families) > 20, "sfd's Prometheus families not found: %s" % sorted(families))
    return families


def written_labels():
    """Labels on each metric in a file written by sfd's writer (two variants)."""
    labels = {}
    with tempfile.TemporaryDirectory() as d:
        for variant in ("1", "2"):
            subprocess.run([SAMPLE, d, variant], check=True, capture_output=True)
            for line in open(os.path.join(d, "stagefrontier.prom")):
                m = re.match(r"([a-z_:][a-z0-9_:]*)(\{[^}]*\})?\s", line)
                if m and not line.startswith("#"):
                    names = set(re.findall(r'(\w+)="', m.group(2) or ""))
                    labels.setdefault(m.group(1), set()).update(names)
    return labels


def query_parts(expr):
    """(metric names, {metric: matcher labels}, grouping labels) of a PromQL query."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # strings
    e = re.sub(r"\[[0-9smhdwy]+\]", "", e)                   # range selectors
    metrics, matched, grouping = set(), {}, set()
    for name, sel in re.findall(r"([a-zA-Z_:][\w:]*)\s*(\{[^}]*\})", e):
        matched.setdefault(name, set()).update(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", sel))
    e_no_sel = re.sub(r"\{[^}]*\}", "", e)
    for clause in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)",
                             e_no_sel):
        grouping.update(x.strip() for x in clause.split(",") if x.strip())
    e_bare = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "",
                    e_no_sel)
    for tok in re.finditer(r"[a-zA-Z_:][\w:]*", e_bare):
        rest = e_bare[tok.end():].lstrip()
        if tok.group() not in PROMQL_WORDS and not rest.startswith("("):
            metrics.add(tok.group())
    return metrics, matched, grouping


def check_queries(d, families, labels):
    exprs = [(p["id"], t["expr"]) for p in d["panels"] for t in p.get("targets", [])]
    for v in d["templating"]["list"]:
        q = v.get("query")
        if isinstance(q, dict):
            exprs.append(("variable " + v["name"], q.get("query", "")))
    used = set()
    for where, expr in exprs:
        inner = re.sub(r"^label_values\((.*),\s*(\w+)\)$", r"\1{\2=\"\"}", expr)
        metrics, matched, grouping = query_parts(inner)
        check(metrics, "%s: no metric in %r" % (where, expr))
        for m in metrics:
            used.add(m)
            check(m in families, "%s: %s is not a metric sfd writes (%r)" % (where, m, expr))
        scrape = {"instance", "job"}        # added by the scrape, not by sfd
        for m, ls in matched.items():
            for label in ls - scrape:
                check(m not in labels or label in labels[m],
                      "%s: %s has no label %r (it has %s)" % (where, m, label,
                                                              sorted(labels.get(m, ()))))
        for label in grouping - scrape:
            check(any(label in labels.get(m, ()) for m in metrics),
                  "%s: groups on %r, which none of %s carries" % (where, label, sorted(metrics)))
    return used


def main():
    path = os.path.join(SRC, "systemd", "grafana", "stagefrontier-dashboard.json")
    d = json.load(open(path))
    check_dashboard(d)
    variables = {v["name"] for v in d.get("templating", {}).get("list", [])} | {"__rate_interval",
                                                                                "__interval"}
    check_panels(d["panels"], variables)
    families, labels = declared_families(), written_labels()
    check(set(labels) <= set(families), "the sample writes undeclared metrics: %s"
          % sorted(set(labels) - set(families)))
    used = check_queries(d, families, labels)
    titles = " ".join(p["title"].lower() for p in d["panels"])
    for topic in ("step time", "slowdown", "stage shares", "leader", "straggler", "stall", "capture",
                  "daemon health", "rejections"):
        check(topic in titles, "no panel about %s" % topic)
    if FAILS:
        sys.exit(1)
    print("ok: %d panels, %d metrics queried, all written by sfd" % (len(d["panels"]), len(used)))


main()
