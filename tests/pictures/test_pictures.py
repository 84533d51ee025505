"""Black-box tests of `sfctl plot` and `sfctl export --format perfetto` on
replay files: the SVG is well-formed (xmllint) and headless Chromium renders
it at its size with the hottest cell in the hot colour; the trace export's
rank spans sum exactly to the input durations and its frontier track to the
report's advances; bad input gets its documented exit code and leaves no file
behind; a window above 256 ranks is binned and says so.

usage: test_pictures.py SFCTL SOURCE_DIR"""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from decimal import Decimal

SFCTL, SRC = sys.argv[1], sys.argv[2]
STRAGGLER = os.path.join(SRC, "docs/examples/straggler.csv")
DISPLACEMENT = os.path.join(SRC, "docs/examples/displacement.csv")
PIPELINE = os.path.join(SRC, "docs/examples/pipeline.jsonl")
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg, file=sys.stderr)


def sfctl(*args, rc=0):
    p = subprocess.run([SFCTL] + list(args), capture_output=True, timeout=120)
    if rc is not None and p.returncode != rc:
        check(False, "sfctl %s: exit %d, want %d: %s"
              % (" ".join(args), p.returncode, rc, p.stderr.decode()))
    return p


def ns(seconds_text):
    """CSV seconds to integer ns, rounded to nearest as the readers do."""
    return int((Decimal(seconds_text) * 1000000000).to_integral_value())


def read_csv(path):
    with open(path) as f:
        head = f.readline().strip().split(",")
        n = len(head) - 2 - (head[-1] == "step_wall")
        rows = {}
        for line in f:
            cells = line.strip().split(",")
            rows[(int(cells[0]), int(cells[1]))] = [ns(c) for c in cells[2:2 + n]]
    return head[2:2 + n], rows


# ---- the SVG: well-formed, rendered by Chromium -------------------------------

def svg_size(path):
    import xml.etree.ElementTree as ET
    root = ET.parse(path).getroot()
    return float(root.get("width").rstrip("px")), float(root.get("height").rstrip("px"))


def test_svg_and_chromium(tmp):
    for kind in ("heatmap", "frontier", "windows"):
        out = os.path.join(tmp, kind + ".svg")
        sfctl("plot", "--file", STRAGGLER, "--warmup-steps", "0", "--window-steps", "10",
              "--kind", kind, "-o", out, "--data", os.path.join(tmp, kind + ".json"))
        p = subprocess.run(["xmllint", "--noout", out], capture_output=True)
        check(p.returncode == 0, "%s SVG is not well-formed: %s" % (kind, p.stderr.decode()))
    # PNG and PDF come from the same drawing: a PNG of the size --data gives.
    for ext, magic in (("png", b"\x89PNG\r\n\x1a\n"), ("pdf", b"%PDF-")):
        out = os.path.join(tmp, "heatmap." + ext)
        sfctl("plot", "--file", STRAGGLER, "--warmup-steps", "0", "--window-steps", "10",
              "-o", out, "--data", os.path.join(tmp, ext + ".json"))
        head = open(out, "rb").read(24)
        check(head.startswith(magic), "%s does not start like a %s" % (out, ext))
    pic = json.load(open(os.path.join(tmp, "png.json")))["picture"]
    head = open(os.path.join(tmp, "heatmap.png"), "rb").read(24)
    width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    check((width, height) == (pic["width"], pic["height"]), "PNG %dx%d, --data %s"
          % (width, height, pic))
    out = os.path.join(tmp, "heatmap.svg")
    data = json.load(open(os.path.join(tmp, "heatmap.json")))
    w, h = svg_size(out)
    check((w, h) == (data["picture"]["width"], data["picture"]["height"]),
          "SVG size %sx%s differs from --data %s" % (w, h, data["picture"]))
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        check(False, "chromium is not installed (.ci/setup installs it)")
        return
    page = os.path.join(tmp, "page.html")
    with open(page, "w") as f:
        f.write('<html><body style="margin:0"><img src="heatmap.svg"></body></html>')
    png = os.path.join(tmp, "chromium.png")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", "--user-data-dir=" + os.path.join(tmp, "profile"),
                    "--window-size=%d,%d" % (w, h), "--screenshot=" + png, "file://" + page],
                   capture_output=True, timeout=120)
    from PIL import Image
    img = Image.open(png).convert("RGB")
    check(img.size == (int(w), int(h)), "Chromium PNG is %s, want %dx%d" % (img.size, w, h))
    colours = img.getcolors(maxcolors=1 << 20)
    check(colours is not None and len(colours) > 20, "Chromium PNG looks blank")
    # The hottest cell (rank 3 x backward) is drawn in the hottest colour.
    hot = data["hottest"]
    check(hot["first_rank"] == 3 and hot["stage"] == "model.backward_cpu_wall",
          "hottest cell %s" % hot)
    row = [r["first_rank"] for r in data["rows"]].index(hot["first_rank"])
    col = data["stages"].index(hot["stage"])
    pic = data["picture"]
    x = int(pic["grid_x"] + (col + 0.15) * pic["cell_width"])
    y = int(pic["grid_y"] + (row + 0.5) * pic["cell_height"])
    r, g, b = img.getpixel((x, y))
    check(r > 110 and g < 40 and b < 60, "hottest cell pixel at %d,%d is %s" % (x, y, (r, g, b)))
    r, g, b = img.getpixel((int(pic["grid_x"] + 0.15 * pic["cell_width"]), y))
    check(min(r, g, b) > 200, "a cold cell is not near white: %s" % ((r, g, b),))


# ---- the trace export ------------------------------------------------------------

def us_to_ns(v):
    return int(Decimal(str(v)) * 1000)


def test_perfetto(tmp):
    out = os.path.join(tmp, "trace.json")
    sfctl("export", "--file", DISPLACEMENT, "--warmup-steps", "0", "--window-steps", "40",
          "--format", "perfetto", "--windows", "0-2", "-o", out)
    with open(out) as f:
        text = f.read()
    trace = json.loads(text, parse_float=Decimal)
    events = trace["traceEvents"]
    stages, rows = read_csv(DISPLACEMENT)
    spans = {}
    for e in events:
        if e["ph"] == "X" and e["cat"] == "stage":
            key = (e["args"]["step"], e["tid"])
            spans.setdefault(key, []).append(e)
    check(set(spans) == set(rows), "rank tracks cover %d (step, rank), want %d"
          % (len(spans), len(rows)))
    for key, evs in spans.items():
        durs = [us_to_ns(e["dur"]) for e in sorted(evs, key=lambda e: Decimal(e["ts"]))]
        check(durs == rows[key], "step %d rank %d spans %s, want %s" % (key + (durs, rows[key])))
        check(all(us_to_ns(e["dur"]) == e["args"]["dur_ns"] for e in evs), "dur_ns differs")
        # Each stage starts where the rank's previous stage ended.
        evs = sorted(evs, key=lambda e: Decimal(e["ts"]))
        for a, b in zip(evs, evs[1:]):
            check(us_to_ns(a["ts"]) + us_to_ns(a["dur"]) == us_to_ns(b["ts"]), "gap in spans")
    # The frontier track equals the report's advances, window by window.
    report = json.loads(sfctl("replay", "--json", "--warmup-steps", "0", "--window-steps", "40",
                              DISPLACEMENT).stdout)
    for w in report:
        index = w["window"]["index"]
        for s in w["stages"]:
            got = sum(us_to_ns(e["dur"]) for e in events
                      if e["ph"] == "X" and e["cat"] == "frontier" and e["name"] == s["name"]
                      and e["args"]["window"] == index and e["args"]["complete"])
            want = int(Decimal(str(s["advance_s"])) * 1000000000)
            check(got == want, "window %d %s frontier %d ns, report %d ns"
                  % (index, s["name"], got, want))
    # Every step starts at the previous step's frontier end.
    fr = [e for e in events if e["ph"] == "X" and e["cat"] == "frontier"]
    for a, b in zip(fr, fr[1:]):
        check(us_to_ns(a["ts"]) + us_to_ns(a["dur"]) == us_to_ns(b["ts"]), "frontier gap")
    starts = {}
    for e in fr:
        starts.setdefault(e["args"]["step"], us_to_ns(e["ts"]))
    for (step, rank), evs in spans.items():
        first = min(us_to_ns(e["ts"]) for e in evs)
        check(first == starts[step], "rank %d step %d starts off the step" % (rank, step))
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    check({"rank %d" % r for r in range(8)} <= names and "frontier" in names,
          "track names %s" % sorted(names))
    # Arrivals, the verdict and labels as instant events (straggler.csv has arrivals).
    out2 = os.path.join(tmp, "straggler-trace.json")
    sfctl("export", "--file", STRAGGLER, "--warmup-steps", "0", "--window-steps", "10",
          "--format", "perfetto", "-o", out2)
    ev2 = json.load(open(out2))["traceEvents"]
    cats = {}
    for e in ev2:
        if e["ph"] == "i":
            cats.setdefault(e["cat"], []).append(e)
    check(len(cats.get("arrival", [])) == 40, "arrival events: %d" % len(cats.get("arrival", [])))
    verdicts = [e["name"] for e in cats.get("verdict", [])]
    check("straggler: rank 3" in verdicts, "verdicts: %s" % verdicts)
    check(any("frontier_accounting" in e["name"] for e in cats.get("labels", [])), "no labels")


# ---- bad input -------------------------------------------------------------------

def expect_refusal(tmp, rc, message, out, *args):
    before = sorted(os.listdir(os.path.dirname(out)))
    p = sfctl(*args, rc=rc)
    check(message in p.stderr.decode(), "%s: message %r not in %r"
          % (" ".join(args), message, p.stderr.decode()))
    check(not os.path.exists(out), "%s left %s behind" % (" ".join(args), out))
    check(sorted(os.listdir(os.path.dirname(out))) == before,
          "%s left a file: %s" % (" ".join(args), sorted(os.listdir(os.path.dirname(out)))))


def test_bad_input(tmp):
    d = os.path.join(tmp, "bad")
    os.mkdir(d)
    svg, data = os.path.join(d, "x.svg"), os.path.join(d, "x.json")
    expect_refusal(tmp, 2, "unknown kind 'pie'", svg,
                   "plot", "--file", STRAGGLER, "--kind", "pie", "-o", svg)
    expect_refusal(tmp, 2, "unknown metric", svg,
                   "plot", "--file", STRAGGLER, "--metric", "heat", "-o", svg)
    expect_refusal(tmp, 2, "cannot tell the format", os.path.join(d, "x.gif"),
                   "plot", "--file", STRAGGLER, "-o", os.path.join(d, "x.gif"))
    expect_refusal(tmp, 2, "unknown format", data,
                   "export", "--file", STRAGGLER, "--format", "otf2", "-o", data)
    expect_refusal(tmp, 5, "no window 7", svg, "plot", "--file", STRAGGLER, "--warmup-steps",
                   "0", "--window-steps", "10", "--window", "7", "-o", svg, "--data", data)
    expect_refusal(tmp, 5, "no window", data, "export", "--file", STRAGGLER, "--format",
                   "perfetto", "--warmup-steps", "1000", "-o", data)
    # A window whose every step misses one rank or another has no complete step.
    empty = os.path.join(tmp, "incomplete.csv")
    with open(STRAGGLER) as f, open(empty, "w") as g:
        lines = f.readlines()
        g.write(lines[0])
        g.writelines(l for l in lines[1:]
                     if int(l.split(",")[1]) != int(l.split(",")[0]) % 4)
    expect_refusal(tmp, 5, "window 0 has no complete step", svg, "plot", "--file", empty,
                   "--warmup-steps", "0", "--window-steps", "10", "--window", "0", "-o", svg,
                   "--data", data)
    expect_refusal(tmp, 5, "has no baseline yet", svg, "plot", "--file", STRAGGLER,
                   "--warmup-steps", "0", "--window-steps", "10", "--metric", "change",
                   "-o", svg)
    expect_refusal(tmp, 3, "No such file", svg, "plot", "--file", os.path.join(d, "none.csv"),
                   "-o", svg)
    nodir = os.path.join(d, "missing", "x.svg")
    p = sfctl("plot", "--file", STRAGGLER, "-o", nodir, rc=1)
    check("cannot write" in p.stderr.decode() and "No such file" in p.stderr.decode(),
          "unwritable path message: %s" % p.stderr.decode())
    # The picture can be written but its data cannot: neither is left.
    expect_refusal(tmp, 1, "cannot write", svg, "plot", "--file", STRAGGLER, "-o", svg,
                   "--data", nodir)
    if os.geteuid() != 0:    # root writes into a read-only directory anyway
        ro = os.path.join(tmp, "ro")
        os.mkdir(ro, 0o555)
        expect_refusal(tmp, 1, "Permission denied", os.path.join(ro, "x.png"),
                       "plot", "--file", STRAGGLER, "-o", os.path.join(ro, "x.png"))
    # A target that is not a regular file is written in place, never renamed over.
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", fifo], stdout=subprocess.PIPE)
    sfctl("export", "--file", STRAGGLER, "--format", "perfetto", "-o", fifo)
    got = reader.communicate(timeout=60)[0]
    check(json.loads(got)["traceEvents"], "nothing came through the pipe")
    check(stat.S_ISFIFO(os.stat(fifo).st_mode), "the pipe was replaced")
    os.unlink(fifo)


# ---- many ranks: rows binned -----------------------------------------------------

def test_binning(tmp):
    csv = os.path.join(tmp, "wide.csv")
    with open(csv, "w") as f:
        f.write("step,rank,data.next_wait,model.backward_cpu_wall,step.other_cpu_wall\n")
        for step in range(4):
            for rank in range(600):
                slow = "0.009" if rank == 437 else "0.001"
                f.write("%d,%d,%s,0.002,0.0001\n" % (step, rank, slow))
    svg, data = os.path.join(tmp, "wide.svg"), os.path.join(tmp, "wide.json")
    sfctl("plot", "--file", csv, "--warmup-steps", "0", "--window-steps", "4", "-o", svg,
          "--data", data)
    d = json.load(open(data))
    check(d["ranks"] == 600 and d["ranks_per_row"] == 3 and len(d["rows"]) == 200,
          "binning: %s ranks, %s per row, %d rows" % (d["ranks"], d["ranks_per_row"],
                                                      len(d["rows"])))
    hot = d["hottest"]
    check(hot["first_rank"] <= 437 <= hot["last_rank"] and hot["stage"] == "data.next_wait"
          and hot["value"] == 4, "binned hottest: %s" % hot)
    sfctl("plot", "--file", csv, "--warmup-steps", "0", "--window-steps", "4", "--metric",
          "slack", "-o", svg, "--data", data)
    d = json.load(open(data))
    check(d["metric"] == "slack" and d["hottest"]["first_rank"] <= 437 <= d["hottest"]["last_rank"],
          "slack hottest: %s" % d["hottest"])


def test_pipeline(tmp):
    """--kind pipeline of a recording whose ranks declare pp x dp: the data
    name the slowed rank's pipeline stage as every step's first delay and
    its hottest cell, the SVG is well-formed and the PNG is of the size the
    data give; a window without coordinates has no pipeline view (exit 5,
    no file left)."""
    svg, data = os.path.join(tmp, "pipeline.svg"), os.path.join(tmp, "pipeline.json")
    sfctl("plot", "--file", PIPELINE, "--kind", "pipeline", "-o", svg, "--data", data)
    p = subprocess.run(["xmllint", "--noout", svg], capture_output=True)
    check(p.returncode == 0, "pipeline SVG is not well-formed: %s" % p.stderr.decode())
    with open(data) as f:
        d = json.load(f)
    check(d["kind"] == "pipeline" and d["pipeline_stages"] == 2, "pipeline data: %r" % d["kind"])
    check(d["origin"] == {"pipeline_stage": 0, "rank": 1, "stage": "model.backward_cpu_wall"},
          "pipeline origin: %r" % d["origin"])
    check(d["hottest"]["pipeline_stage"] == 0, "pipeline hottest: %r" % d["hottest"])
    check(len(d["steps"]) == 20 and all(s["origin"] == 0 for s in d["steps"]),
          "pipeline steps' origins: %r" % [s["origin"] for s in d["steps"]])
    check(all(s["delay_ns"][0] > 25000000 > s["delay_ns"][1] for s in d["steps"]),
          "pipeline delays: %r" % [s["delay_ns"] for s in d["steps"]])
    report = json.loads(sfctl("replay", "--json", PIPELINE).stdout)
    report = report[0] if isinstance(report, list) else report
    check(max(s["delay_ns"][0] for s in d["steps"]) == d["hottest"]["delay_ns"],
          "pipeline hottest is not the largest cell")
    check(report["pipeline"]["origin"]["rank"] == d["origin"]["rank"],
          "pipeline picture and report disagree: %r" % report["pipeline"]["origin"])
    png = os.path.join(tmp, "pipeline.png")
    sfctl("plot", "--file", PIPELINE, "--kind", "pipeline", "-o", png)
    with open(png, "rb") as f:
        head = f.read(24)
    w, h = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    check((w, h) == (d["picture"]["width"], d["picture"]["height"]),
          "pipeline PNG %dx%d, data %r" % (w, h, d["picture"]))
    d2 = os.path.join(tmp, "nopipe")
    os.mkdir(d2)
    expect_refusal(tmp, 5, "has no pipeline view", os.path.join(d2, "x.svg"),
                   "plot", "--file", STRAGGLER, "--kind", "pipeline", "-o",
                   os.path.join(d2, "x.svg"))


def main():
    tmp = tempfile.mkdtemp(prefix="sfpictures-")
    try:
        test_svg_and_chromium(tmp)
        test_perfetto(tmp)
        test_bad_input(tmp)
        test_binning(tmp)
        test_pipeline(tmp)
    finally:
        if not FAILS:
            shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("%d failures (files in %s)" % (len(FAILS), tmp))
        sys.exit(1)
    print("ok")


main()
