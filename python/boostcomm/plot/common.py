"""What every chart kind shares: the error type, checked field access (so a
bad file names its field), size labels, and the title / footer that say
which command, machine and date the numbers came from."""

import os
import textwrap


class PlotError(Exception):
    """Bad input: printed as one line, `FILE: field 'X': what is wrong`."""

    def __init__(self, path, message, field=None):
        self.path = path
        self.field = field
        where = f"field '{field}': " if field else ""
        super().__init__(f"{path}: {where}{message}")


class Source:
    """One input file: its path, its parsed JSON and a short label for legends."""

    def __init__(self, path, doc, kind):
        self.path = path
        self.doc = doc
        self.kind = kind
        self.label = os.path.splitext(os.path.basename(path))[0]

    def fail(self, field, message):
        raise PlotError(self.path, message, field)


def field(source, obj, key, where, types=None, allow_none=False):
    """obj[key], checked: `where` is the dotted path of obj for the message
    (e.g. "results[3]"); `types` the accepted Python types."""
    name = f"{where}.{key}" if where else key
    if not isinstance(obj, dict):
        source.fail(where or "(top level)", f"is {type(obj).__name__}, expected an object")
    if key not in obj:
        source.fail(name, "missing")
    value = obj[key]
    if value is None and allow_none:
        return None
    if types is not None:
        numeric = types in (float, (int, float))
        ok = isinstance(value, types) and not isinstance(value, bool) if numeric else isinstance(value, types)
        if not ok:
            expected = "a number" if numeric else getattr(types, "__name__", str(types))
            source.fail(name, f"is {json_type(value)}, expected {expected}")
    return value


def records(source, obj, key, nothing):
    """(where, item) for each item of the array obj[key], which must not be
    empty (`nothing` says what an empty one means)."""
    items = field(source, obj, key, "", list)
    if not items:
        source.fail(key, f"empty: {nothing}")
    return [(f"{key}[{i}]", item) for i, item in enumerate(items)]


def number(source, obj, key, where, allow_none=False):
    value = field(source, obj, key, where, (int, float), allow_none)
    return None if value is None else float(value)


def json_type(value):
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null", int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def format_bytes(n):
    """8 -> "8", 1536 -> "1.5K", 16777216 -> "16M" (powers of 1024, as the tools print)."""
    n = float(n)
    for suffix in ("", "K", "M", "G", "T"):
        if abs(n) < 1024 or suffix == "T":
            text = f"{n:.1f}".rstrip("0").rstrip(".")
            return text + suffix
        n /= 1024.0
    return str(n)


def provenance(source, meta):
    """(command, footer) for a file whose metadata object is `meta`: the
    command that produced the data ("" when not recorded) and "host, date,
    extra" for the footer."""
    meta = meta if isinstance(meta, dict) else {}
    command = meta.get("command") or ""
    host = meta.get("hostname") or "host not recorded"
    date = meta.get("date") or "date not recorded"
    footer = f"{source.label}: {host}, {date}"
    if meta.get("version"):
        footer += f", boostcomm {meta['version']}"
    return command, footer


def decorate(fig, title, sources_meta):
    """Title (plus the producing command of each file) on top, machine and
    date of each file in a footer. sources_meta: [(source, meta dict)]."""
    width = int(fig.get_figwidth() * 14) - 3  # characters of 9 pt monospace per line
    lines = [title]
    footers = []
    commands = []
    for source, meta in sources_meta:
        command, footer = provenance(source, meta)
        footers.append(footer)
        if command and command not in commands:
            commands.append(command)
    for command in commands:
        wrapped = textwrap.wrap("$ " + command, width, subsequent_indent="    ", break_on_hyphens=False)
        lines.extend(wrapped[:3] if len(wrapped) <= 3 else wrapped[:2] + [wrapped[2][:width - 4] + " ..."])
    if not commands:
        lines.append("(command not recorded in the file)")
    fig.suptitle("\n".join(lines), fontsize=9, x=0.01, ha="left", va="top", family="monospace")
    fig.text(0.01, 0.005, "\n".join(footers), fontsize=7, ha="left", va="bottom", color="0.35")
    return len(lines), len(footers)


def layout(fig, title_lines, footer_lines, left_inches=0.95, right_inches=0.2):
    """Leaves room (in inches, so any figure size works) for the title block
    with the panels' own titles under it, the x label and footer, and the
    y labels."""
    width, height = fig.get_figwidth(), fig.get_figheight()
    top = 1.0 - (0.17 * title_lines + 0.45) / height
    bottom = (0.13 * footer_lines + 0.65) / height
    fig.subplots_adjust(top=max(top, 0.5), bottom=min(bottom, 0.4), left=min(left_inches / width, 0.4),
                        right=1.0 - right_inches / width)
