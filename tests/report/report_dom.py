#!/usr/bin/env python3
"""report_dom.py FILE.html [EXPR...]

Reads a `detrain report` page (the file itself, or the DOM a browser rendered from it with
--dump-dom) with the standard library's HTML parser and prints one JSON object of what the
tests check:
  verdicts        one per row of the verdict table: its data-* attributes and its cells' text
  runs            label -> the resume steps of the run table ("" when none)
  first_mismatch  the data-step of every first-mismatch mark drawn in a difference panel
  captions        the text of every difference panel's caption
  resume_marks    [run label, step] of every resume mark drawn on a trajectory
  trace_ranks     the data-* attributes of the trace table's rows
  trace_io        per rank with a mismatch: [role, name, digest A, digest B, same/differs]
  ranges          the leaderboard's ranges, and each one's tax text
  svgs            how many SVG charts there are, by class
  text            the page's whole text
With expressions, prints none of it but evaluates each one with d (that object) and v (its
verdicts), prints FAIL and the expression for each that is false, and exits 1 if any is.
"""
import json
import sys
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.out = {"verdicts": [], "runs": {}, "first_mismatch": [], "captions": [], "resume_marks": [],
                    "trace_ranks": [], "trace_io": {}, "ranges": {}, "svgs": {}, "text": ""}
        self.stack = []          # open elements: (tag, attrs)
        self.row = None          # verdict row being read
        self.cell = None
        self.capture = None      # (kind, key, list of text pieces)
        self.io_rank = None
        self.io_row = None
        self.range = None
        self.last_tr = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class", "").split()
        if tag not in ("br", "meta", "hr", "img"):  # void elements never close
            self.stack.append((tag, a))
        if tag == "tr":
            self.last_tr = a
        if tag == "br":
            self.handle_data(" ")
        if tag == "svg" and cls:
            self.out["svgs"][cls[0]] = self.out["svgs"].get(cls[0], 0) + 1
        if tag == "tr" and "verdict" in cls:
            self.row = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
            self.row["cells"] = []
        if tag == "td" and self.row is not None:
            self.cell = []
        if tag == "td" and "resumes" in cls:
            self.out["runs"][self.last_tr.get("data-run")] = a.get("data-resumes", "")
        if tag == "g" and "first-mismatch" in cls:
            self.out["first_mismatch"].append(int(a["data-step"]))
        if tag == "g" and "resume" in cls:
            self.capture = ("resume", a["data-step"], [])
        if tag == "p" and "caption" in cls:
            self.capture = ("caption", None, [])
        if tag == "tr" and "trace-rank" in cls:
            self.out["trace_ranks"].append({k[5:]: v for k, v in a.items() if k.startswith("data-")})
        if tag == "div" and "trace-event" in cls:
            self.io_rank = a["data-rank"]
            self.out["trace_io"][self.io_rank] = []
        if tag == "tr" and self.io_rank is not None and cls and cls[0] in ("ok", "bad"):
            self.io_row = []
        if tag == "td" and self.io_row is not None:
            self.io_row.append("")
        if tag == "g" and "range" in cls:
            self.range = a["data-range"]
            self.out["ranges"][self.range] = ""

    def handle_endtag(self, tag):
        if any(t == tag for t, _ in self.stack):
            while self.stack and self.stack.pop()[0] != tag:
                pass
        if tag == "td" and self.row is not None and self.cell is not None:
            self.row["cells"].append(" ".join("".join(self.cell).split()))
            self.cell = None
        if tag == "tr" and self.row is not None:
            self.out["verdicts"].append(self.row)
            self.row = None
        if tag in ("g", "p") and self.capture:
            kind, key, text = self.capture
            if kind == "resume" and tag == "g":
                label = "".join(text).split()[0]
                self.out["resume_marks"].append([label, int(key)])
                self.capture = None
            elif kind == "caption" and tag == "p":
                self.out["captions"].append(" ".join("".join(text).split()))
                self.capture = None
        if tag == "tr" and self.io_row is not None:
            r = self.io_row
            self.out["trace_io"][self.io_rank].append([r[0], r[1], r[3], r[4], r[5]])
            self.io_row = None
        if tag == "table" and self.io_rank is not None:
            self.io_rank = None
        if tag == "g" and self.range is not None:
            self.range = None

    def handle_data(self, data):
        self.out["text"] += data
        if self.cell is not None:
            self.cell.append(data)
        if self.capture:
            self.capture[2].append(data)
        if self.io_row is not None and self.io_row:
            self.io_row[-1] += data
        if self.range is not None and data.startswith("tax "):
            self.out["ranges"][self.range] = data


def parse(path):
    p = Page()
    p.feed(open(path, encoding="utf-8").read())
    p.close()
    return p.out


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    d = parse(argv[1])
    if len(argv) == 2:
        json.dump(d, sys.stdout, indent=1)
        print()
        return 0
    bad = 0
    for expr in argv[2:]:
        try:
            ok = eval(expr, {"d": d, "v": d["verdicts"]})
        except Exception as e:  # a missing key or index is a failed check too
            ok = False
            expr += "  (%s: %s)" % (type(e).__name__, e)
        if not ok:
            print("FAIL: %s: %s" % (argv[1], expr))
            bad += 1
    if bad:
        print("  the page holds: %s" % json.dumps({k: d[k] for k in d if k != "text"})[:3000])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
