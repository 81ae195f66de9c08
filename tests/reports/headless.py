"""Open a page in headless Chromium: its DOM after the scripts ran, its console, and a screenshot of all of it."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from tests.reports.pngread import Image, read_png

WIDTH = 1200
FLAGS = ["--headless=new", "--disable-gpu", "--no-sandbox", "--force-device-scale-factor=1", "--hide-scrollbars",
         "--no-first-run", "--disable-extensions", "--virtual-time-budget=10000"]
CONSOLE = re.compile(r":CONSOLE[:(]")  # how --enable-logging=stderr prints console messages and uncaught errors


@dataclass(frozen=True)
class Page:
    dom: str
    console: tuple[str, ...]  # console messages (log, error, uncaught exceptions)
    body: dict  # <body>'s attributes after the scripts ran
    screenshot: Image


def open_page(chromium: str, path: Path, profile: Path) -> Page:
    url = path.resolve().as_uri()
    dump = _run(chromium, [f"--user-data-dir={profile}/dom", "--enable-logging=stderr", "--v=0",
                           f"--window-size={WIDTH},900", "--dump-dom", url])
    console = tuple(line for line in dump.stderr.splitlines() if CONSOLE.search(line))
    body = _body_attributes(dump.stdout)
    height = int(body.get("data-height") or 900)
    shot = profile / "page.png"
    _run(chromium, [f"--user-data-dir={profile}/shot", f"--window-size={WIDTH},{height}", f"--screenshot={shot}", url])
    return Page(dump.stdout, console, body, read_png(shot.read_bytes()))


def _run(chromium: str, args: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.run([chromium, *FLAGS, *args], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def _body_attributes(dom: str) -> dict:
    m = re.search(r"<body([^>]*)>", dom)
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m[1])) if m else {}


class _Collect(HTMLParser):
    """Elements' attributes and text, by a predicate on the start tag."""

    def __init__(self, want) -> None:
        super().__init__(convert_charrefs=True)
        self.want, self.found, self.stack = want, [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if self.want(tag, a):
            self.found.append({"tag": tag, "attrs": a, "text": ""})
            self.stack.append((tag, len(self.found) - 1))
        elif self.stack:
            self.stack.append((tag, None))

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        for _tag, i in self.stack:
            if i is not None:
                self.found[i]["text"] += data


def elements(dom: str, want) -> list[dict]:
    p = _Collect(want)
    p.feed(dom)
    return p.found


def chart_boxes(dom: str) -> list[dict]:
    return [json.loads(e["attrs"]["data-box"]) for e in elements(dom, lambda t, a: "data-box" in a)]


def data_blob(dom: str) -> dict:
    (blob,) = elements(dom, lambda t, a: a.get("id") == "fetchtool-data")
    return json.loads(blob["text"])


def coloured_pixels(img: Image, box: dict) -> int:
    """Pixels in the box with a clear hue (series strokes and points; the axes, grid and text are grey)."""
    x0, y0 = int(box["x"]), int(box["y"])
    x1, y1 = min(int(box["x"] + box["w"]), img.width), min(int(box["y"] + box["h"]), img.height)
    n = 0
    for y in range(y0, y1):
        row = img.rows[y]
        for x in range(x0, x1):
            i = x * img.channels
            r, g, b = row[i], row[i + 1], row[i + 2]
            if max(r, g, b) - min(r, g, b) > 60:
                n += 1
    return n
