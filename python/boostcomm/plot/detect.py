"""Reads a results file and says which of the tools wrote it.

Kinds and the metadata that identifies them:
  bench     `boostcomm bench --output`: meta.tool == "boostcomm bench" (docs/BENCH_JSON.md)
  replay    `boostcomm replay --output`: meta.tool == "boostcomm replay"; files written
            before the meta object existed are recognised by their "modes" and "model"
  tuning    `boostcomm tune` cache: format == "boostcomm-tuning-cache"
  timeline  Chrome trace (`replay --timeline`, BOOSTCOMM_TIMELINE): a JSON array of
            events with "ph" (or an object with "traceEvents")
"""

import json

from .common import PlotError, Source

KINDS = ("bench", "replay", "tuning", "timeline")


def read_json(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise PlotError(path, f"cannot read ({e.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PlotError(path, f"not JSON (not UTF-8 text at byte {e.start})") from None
    if not text.strip():
        raise PlotError(path, "not JSON (the file is empty)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        repaired = _repair_trace(text)
        if repaired is not None:
            return repaired
        raise PlotError(path, f"not JSON (line {e.lineno} column {e.colno}: {e.msg})") from None


def _repair_trace(text):
    """A timeline cut off by a killed run lacks its closing "]" (allowed by
    the Trace Event Format) and maybe half a last line (timeline.h): keep
    every whole event, as readTrace() does. None when that does not help."""
    if not text.lstrip().startswith("["):
        return None
    lines = text.lstrip()[1:].splitlines()
    events = []
    for number, line in enumerate(lines):
        line = line.strip().lstrip(",").strip()
        if not line or line == "]":
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) - 1:
                break  # the partial last event of an interrupted write
            return None
        if not isinstance(event, dict):
            return None
        events.append(event)
    return events if events else None


def kind_of(path, doc):
    if isinstance(doc, list) or (isinstance(doc, dict) and "traceEvents" in doc):
        events = doc if isinstance(doc, list) else doc["traceEvents"]
        if isinstance(events, list) and events and all(isinstance(e, dict) and "ph" in e for e in events[:50]):
            return "timeline"
        if isinstance(events, list) and not events:
            raise PlotError(path, "empty trace: no events", "traceEvents" if isinstance(doc, dict) else None)
        raise PlotError(path, "unknown kind: a JSON array, but not of trace events (objects with \"ph\")")
    if not isinstance(doc, dict):
        raise PlotError(path, f"unknown kind: the top level is a {type(doc).__name__}, not an object")
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    tool = meta.get("tool")
    if tool == "boostcomm bench":
        return "bench"
    if tool == "boostcomm replay" or (tool is None and "modes" in doc and "model" in doc):
        return "replay"
    if doc.get("format") == "boostcomm-tuning-cache":
        return "tuning"
    found = ", ".join(sorted(doc)[:8]) or "none"
    what = f"meta.tool is '{tool}'" if tool is not None else f"top-level keys: {found}"
    raise PlotError(path, f"unknown kind ({what}); expected a `boostcomm bench` or `boostcomm replay` "
                          "--output file, a `boostcomm tune` cache or a Chrome-trace timeline")


def load(path):
    """Source of `path` with its kind detected; raises PlotError."""
    doc = read_json(path)
    return Source(path, doc, kind_of(path, doc))
