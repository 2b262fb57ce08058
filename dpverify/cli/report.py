"""``dpverify report REPORT [REPORT ...]``: render saved ``report.json`` files as Markdown
and HTML.

Re-renders a report without re-running its checks (after a change to the renderer, or to
read someone else's results), optionally judging it against a baseline report, or merges
the reports of separate runs (one per paper, CI shards) into one:

    dpverify report reports/papers/report.json
    dpverify report reports/latest --baseline reports/papers.json   # exit 1 on regressions
    dpverify report reports/papers --json reports/papers.json        # refresh the baseline copy
    dpverify report shard1/report.json shard2/report.json --out merged --json merged/report.json

Exit codes: 0 when written (and, with ``--baseline``, no regression), 1 on a regression,
2 on bad input (no such report, not a dpverify report, an unknown schema, reports that do
not merge: another seed, scale or schema version, or one check with two results).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dpverify.core.errors import InputError
from dpverify.report.io import write_json_atomic
from dpverify.report.merge import load_reports, merge_reports
from dpverify.report.runs import LATEST, resolve_latest
from dpverify.report.writer import compare_baseline, load_report, write_rendered


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dpverify report``.

    Examples
    --------
    >>> p = argparse.ArgumentParser(); configure_parser(p)
    >>> a = p.parse_args(["r.json", "--format", "html", "--plots", "png"])
    >>> a.report, a.formats, a.plots
    (['r.json'], ['html'], 'png')
    """
    parser.description = ("Render a report.json (written by `dpverify run`) as report.md and "
                          "a self-contained report.html with figures; given several, merge "
                          "them into one report (same seed, scale and schema); with "
                          "--baseline, list its regressions against another report.")
    parser.add_argument("report", nargs="+",
                        help="a report.json, or the folder that holds one; several are merged")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="where report.md and report.html go (default: beside the JSON; "
                             "required when merging)")
    parser.add_argument("--format", dest="formats", nargs="+", choices=["md", "html"],
                        default=["md", "html"], help="which reports to write (default both)")
    parser.add_argument("--plots", choices=["svg", "png", "none"], default="svg",
                        help="figures in the HTML as inline SVG (default), base64 PNG, or none")
    parser.add_argument("--baseline", default=None, metavar="FILE",
                        help="a report.json to compare against: regressions are listed in the "
                             "reports and the exit code is 1 (default: no comparison)")
    parser.add_argument("--quiet", action="store_true",
                        help="print only the regressions, not the files written")
    parser.add_argument("--json", dest="json_path", default=None, metavar="FILE",
                        help="also write the report JSON (with the regressions found) here, "
                             "e.g. the committed baseline copy, or the merged report (default: not "
                             "written)")


def run_command(args: argparse.Namespace) -> int:
    """Render the report the arguments name; 0 on success, 1 on a regression.

    Examples
    --------
    >>> import tempfile
    >>> p = argparse.ArgumentParser()
    >>> configure_parser(p)
    >>> try:
    ...     run_command(p.parse_args([tempfile.mkdtemp()]))
    ... except InputError as e:
    ...     print(str(e).split(" ")[:2])
    ['no', 'report']
    """
    names = [args.report] if isinstance(args.report, str) else list(args.report)
    # reports/latest as a pointer file (where links cannot be made) leads to its run folder
    names = [str(resolve_latest(Path(n))) if Path(n).name == LATEST and Path(n).is_file()
             else n for n in names]
    if len(names) > 1 and not args.out:
        raise InputError(f"merging {len(names)} reports needs --out DIR for the merged report")
    loaded = load_reports(names)
    rep = merge_reports(loaded)
    baseline = load_report(args.baseline) if args.baseline else None
    out_dir = Path(args.out) if args.out else Path(loaded[0][0]).parent
    blocked = next((p for p in (out_dir, *out_dir.parents) if p.exists()), None)
    if blocked is not None and not blocked.is_dir():
        raise InputError(f"--out {str(out_dir)!r}: {str(blocked)!r} is not a folder")
    regressions: list[str] = []
    if baseline is not None:
        regressions = compare_baseline(rep, baseline)
        rep["regressions"] = regressions
    written = write_rendered(rep, out_dir, formats=tuple(dict.fromkeys(args.formats)),
                             plot_format=args.plots)
    if args.json_path:
        written.append(write_json_atomic(args.json_path, rep))
    for r in regressions:  # the reason for exit code 1, even with --quiet
        print(f"regression: {r}")
    if not getattr(args, "quiet", False):
        print("wrote " + ", ".join(str(p) for p in written))
    return 1 if regressions else 0
