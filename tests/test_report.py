"""The verification report: grouping by paper, statements, commands that reproduce each
number, Markdown, the self-contained HTML page (parsed, and rendered in headless Chromium
when one is installed) and ``dpverify report``.

One small real suite runs once for the module (audits black-box and white-box, a rate
fit, a sensitivity counterexample, backend agreement, accounting), through
``dpverify run``, so every figure kind has real numbers behind it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from dpverify.cli.app import main
from dpverify.report import html as report_html
from dpverify.report import plots
from dpverify.report import writer as report_writer
from dpverify.report.merge import load_reports, merge_reports
from dpverify.report.paper import build_document, summary_rows
from dpverify.report.writer import load_report, write_rendered

SUITE = """
[suite]
name = "report fixture"
seed = 3

[[check]]
id = "gauss.sound.audit"
kind = "audit"
target = "gaussian_mechanism:sound"
[check.options]
trials = 4000
distinguisher = "projection"

[[check]]
id = "gauss.half_noise.audit"
kind = "audit"
target = "gaussian_mechanism:planted_half_noise"
expected = "FAIL"
[check.options]
mode = "whitebox"
trials = 500

[[check]]
id = "gd.sound.audit.whitebox"
kind = "audit"
target = "noisy_gd:sound"
[check.params]
T = 5
n = 50
loss = "linear"
[check.options]
mode = "whitebox"
trials = 500

[[check]]
id = "gd.sound.rate.n"
kind = "rate"
target = "noisy_gd:sound"
[check.params]
T = 30
[check.options]
vary = "n"
values = [250, 500, 1000, 2000]
seeds = 10
n_boot = 200

[[check]]
id = "gd.mean_on_sum.sensitivity"
kind = "sensitivity"
target = "noisy_gd:planted_mean_noise_on_sum"
expected = "FAIL"
[check.params]
T = 3
n = 50
[check.options]
search = "canaries"
neighbours = ["clip_boundary"]

[[check]]
id = "gd.sound.agree"
kind = "agree"
target = "noisy_gd:sound"
expected = "{agree}"
[check.params]
T = 2
n = 20
[check.options]
mode = "trajectory"

[[check]]
id = "gd.sound.account"
kind = "account"
target = "noisy_gd:sound"
[check.params]
T = 5

[[check]]
id = "gd.half_steps.account"
description = "sigma calibrated for half the steps it takes"
kind = "account"
target = "noisy_gd:planted_half_steps"
expected = "FAIL"
[check.params]
T = 6
"""

# Every figure the fixture's records support: the epsilons of each group, the ROC of
# each audit, the privacy loss of each white-box audit, the rate fit.
PLOT_IDS = {
    "plot-eps-baselines", "plot-eps-mechanisms",
    "plot-roc-gauss-sound-audit", "plot-roc-gauss-half_noise-audit",
    "plot-roc-gd-sound-audit-whitebox", "plot-loss-gauss-half_noise-audit",
    "plot-loss-gd-sound-audit-whitebox", "plot-rate-gd-sound-rate-n",
}
ALGORITHMS = 2  # gaussian_mechanism, noisy_gd
VARIANTS = 5


def _torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """``dpverify run`` of the fixture suite: (suite path, report folder)."""
    root = tmp_path_factory.mktemp("report")
    suite = root / "suite.toml"
    suite.write_text(SUITE.replace("{agree}", "PASS" if _torch() else "INCONCLUSIVE"))
    out = root / "out"
    assert main(["run", str(suite), "--report-dir", str(out), "--quiet"]) == 0
    return suite, out


@pytest.fixture(scope="module")
def rep(run_dir):
    return load_report(run_dir[1] / "report.json", what="report")


@pytest.fixture(scope="module")
def page(run_dir):
    return (run_dir[1] / "report.html").read_text(encoding="utf-8")


class _Dom(HTMLParser):
    """Tags, table classes and figure contents of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.tables: list[str] = []
        self.figures: dict[str, list[str]] = {}
        self._figure: str | None = None
        self.ids: set[str] = set()
        self.summary_rows = 0
        self._in_summary = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "table":
            self.tables.append(a.get("class", ""))
            self._in_summary = a.get("class") == "summary"
        if tag == "tr" and self._in_summary:
            self.summary_rows += 1
        if tag == "figure" and "plot" in (a.get("class") or ""):
            self._figure = a.get("id", "")
            self.figures[self._figure] = []
        elif self._figure is not None and tag in ("svg", "img"):
            self.figures[self._figure].append(tag)

    def handle_endtag(self, tag):
        if tag == "figure":
            self._figure = None
        if tag == "table":
            self._in_summary = False


def _dom(text: str) -> _Dom:
    d = _Dom()
    d.feed(text)
    return d


def _assert_layout(d: _Dom, *, figures: set[str]) -> None:
    assert d.tables.count("summary") == 1
    assert d.summary_rows == VARIANTS + 1  # and the header
    assert d.tables.count("variants") == ALGORITHMS
    assert d.tables.count("checks") == ALGORITHMS
    assert d.tables.count("versions") == 1
    assert set(d.figures) == figures
    assert all(len(v) == 1 for v in d.figures.values()), d.figures


# The document --------------------------------------------------------------------------


def test_run_writes_json_markdown_and_html(run_dir, rep):
    _, out = run_dir
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json", "report.md"]
    assert rep["schema_version"] == "2.0" and rep["scale"] == "quick"
    assert rep["algorithms"]["noisy_gd:planted_half_steps"]["findings"][0]["detected_by"]
    for c in rep["checks"]:
        assert c["source"].startswith(str(run_dir[0]))
        assert c["claim"]["epsilon"] == 1.0


def test_checks_are_grouped_by_paper_algorithm_and_variant(rep):
    doc = build_document(rep)
    assert [g.key for g in doc.groups] == ["baselines", "mechanisms"]
    placed = [c.id for g in doc.groups for c in g.checks]
    assert sorted(placed) == sorted(c["id"] for c in rep["checks"])
    gd = next(a for g in doc.groups for a in g.algorithms if a.name == "noisy_gd")
    assert [v.target for v in gd.variants] == [
        "noisy_gd:sound", "noisy_gd:planted_mean_noise_on_sum", "noisy_gd:planted_half_steps"]
    rows = {r.target: r for r in summary_rows(doc)}
    assert rows["noisy_gd:sound"].privacy == ("PASS", 2, 2)
    assert rows["noisy_gd:sound"].rate == ("PASS", 1, 1)
    assert rows["noisy_gd:sound"].agreement[2] == 1
    assert rows["gaussian_mechanism:planted_half_noise"].privacy == ("FAIL", 1, 1)
    assert rows["noisy_gd:planted_half_steps"].rate is None


def test_statements_carry_the_numbers_behind_each_verdict(rep):
    doc = build_document(rep)
    views = {c.id: c for g in doc.groups for c in g.checks}
    recs = {c["id"]: c for c in rep["checks"]}
    half = views["gauss.half_noise.audit"].statement
    m = recs["gauss.half_noise.audit"]["metrics"]
    assert f"ε ≥ {m['epsilon_lower']:.4g}" in half.measured
    assert "ε_lower > ε_claimed" in half.measured
    assert "confidence 0.95" in half.confidence
    acc = views["gd.half_steps.account"].statement.measured
    assert f"ε = {recs['gd.half_steps.account']['metrics']['epsilon_accountant']:.4g}" in acc
    sens = views["gd.mean_on_sum.sensitivity"].statement
    assert "grad_sum" in sens.measured and "proof" in sens.confidence
    rate = views["gd.sound.rate.n"].statement.measured
    assert f"{recs['gd.sound.rate.n']['metrics']['exponent']:.3g}" in rate


def test_findings_name_the_checks_that_measure_them(rep):
    doc = build_document(rep)
    findings = {f.target: f for g in doc.groups for f in g.findings}
    f = findings["noisy_gd:planted_half_steps"]
    assert [c.id for c in f.checks] == ["gd.half_steps.account"]
    text = f.paragraph()
    assert "claims (ε = 1, δ = 1e-05)-DP" in text and "FAIL, as expected" in text
    assert "Reproduce: `dpverify run " in text and "--only gd.half_steps.account" in text
    # The planted mean-noise bug is found by the sensitivity check of this run.
    assert "gd.mean_on_sum.sensitivity" in findings["noisy_gd:planted_mean_noise_on_sum"
                                                   ].paragraph()


def test_commands_reproduce_the_reported_numbers(rep, tmp_path, monkeypatch, capsys):
    """Each statement's commands, run as printed, give the report's verdict and numbers."""
    monkeypatch.chdir(tmp_path)  # `dpverify run` writes reports/latest under the cwd
    doc = build_document(rep)
    views = {c.id: c for g in doc.groups for c in g.checks}
    recs = {c["id"]: c for c in rep["checks"]}
    for cid, code in (("gd.half_steps.account", 1), ("gauss.half_noise.audit", 1)):
        run_cmd, alone = views[cid].commands
        argv = shlex.split(run_cmd)
        assert argv[:2] == ["dpverify", "run"]
        assert main(argv[1:] + ["--quiet"]) == 0  # the verdict met its expectation again
        again = json.loads((tmp_path / "reports/latest/report.json").read_text())["checks"]
        assert [c["id"] for c in again] == [cid]
        assert again[0]["metrics"] == recs[cid]["metrics"]
        argv = shlex.split(alone)
        assert main([*argv[1:], "--json", str(tmp_path / "one.json")]) == code
        one = json.loads((tmp_path / "one.json").read_text())
        got = one.get("epsilon") or one["metrics"]["epsilon_lower"]
        want = recs[cid]["metrics"].get("epsilon_lower", recs[cid]["metrics"][
            "epsilon_accountant"])
        assert got == pytest.approx(want, rel=1e-12)
    capsys.readouterr()


def test_markdown_lists_every_check_by_paper(run_dir, rep):
    md = (run_dir[1] / "report.md").read_text()
    assert md.startswith("# dpverify report")
    assert "not a proof of privacy" in md and "Run at the **quick** scale" in md
    assert "| group | algorithm | variant | kind | privacy | rate | agreement |" in md
    for c in rep["checks"]:
        assert f"| {c['id']} |" in md
        assert f"--only {c['id']} --seed 3 --scale quick" in md
    assert md.index("## Baselines") < md.index("## Mechanisms")
    assert "*sigma calibrated for half the steps it takes.*" in md
    assert "#### Findings of noisy_gd" in md


# The HTML page ---------------------------------------------------------------------------


def test_html_is_self_contained_with_every_table_and_figure(page):
    d = _dom(page)
    _assert_layout(d, figures=PLOT_IDS)
    assert '<p class="desc">sigma calibrated for half the steps it takes</p>' in page
    # No external asset: nothing is fetched, no script runs.
    assert not re.search(r"""(src|href)=["'](https?:|//|file:)""", page)
    assert "<script" not in page and "<link" not in page
    # Each inline SVG is well-formed XML on its own.
    svgs = re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
    assert len(svgs) == len(PLOT_IDS)
    for s in svgs:
        assert ET.fromstring(s).tag.endswith("svg")


def test_html_with_png_figures(rep, tmp_path):
    out = write_rendered(rep, tmp_path, formats=("html",), plot_format="png")[0]
    d = _dom(out.read_text())
    _assert_layout(d, figures=PLOT_IDS)
    src = re.search(r'src="data:image/png;base64,([^"]+)"', out.read_text()).group(1)
    assert base64.b64decode(src)[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_without_matplotlib_keeps_the_tables(rep, tmp_path, monkeypatch):
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert "matplotlib" in plots.unavailable()
    page = report_html.render_html(rep)
    d = _dom(page)
    _assert_layout(d, figures=set())
    assert "no-plots" in d.ids and "pip install" in page


def test_a_renderer_bug_leaves_the_json_whole(run_dir, tmp_path, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(report_html, "render_html", broken)
    out = tmp_path / "r"
    with pytest.warns(UserWarning, match="could not be rendered"):
        assert main(["run", str(run_dir[0]), "--only", "gd.sound.account", "--report-dir",
                     str(out), "--quiet"]) == 0
    assert json.loads((out / "report.json").read_text())["checks"][0]["id"] == "gd.sound.account"
    assert "Rendering failed" in (out / "report.html").read_text()
    assert "| gd.sound.account |" in (out / "report.md").read_text()


# `dpverify report` -------------------------------------------------------------------------


def test_report_subcommand_renders_and_gates(run_dir, tmp_path, capsys):
    _, out = run_dir
    dest = tmp_path / "again"
    assert main(["report", str(out), "--out", str(dest), "--plots", "none",
                 "--json", str(tmp_path / "copy.json")]) == 0
    assert sorted(p.name for p in dest.iterdir()) == ["report.html", "report.md"]
    assert _dom((dest / "report.html").read_text()).figures == {}
    assert json.loads((tmp_path / "copy.json").read_text())["checks"] == json.loads(
        (out / "report.json").read_text())["checks"]
    # Against itself: no regression. Against a baseline where a verdict differs: exit 1,
    # and the regression is in the reports.
    assert main(["report", str(out / "report.json"), "--out", str(dest), "--format", "md",
                 "--baseline", str(out / "report.json")]) == 0
    base = json.loads((out / "report.json").read_text())
    base["checks"][0]["verdict"] = "FAIL"
    (tmp_path / "base.json").write_text(json.dumps(base))
    assert main(["report", str(out), "--out", str(dest), "--plots", "none",
                 "--baseline", str(tmp_path / "base.json")]) == 1
    assert "verdict FAIL -&gt; PASS" in (dest / "report.html").read_text()
    assert "## Regressions against the baseline" in (dest / "report.md").read_text()
    # Bad input: exit 2.
    (tmp_path / "x.json").write_text("[1, 2]")
    for bad in (tmp_path / "missing", tmp_path / "x.json"):
        assert main(["report", str(bad)]) == 2
    assert "not a dpverify report" in capsys.readouterr().out


# A real browser --------------------------------------------------------------------------

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"]  # containers often have a tiny /dev/shm


def _chromium() -> str | None:
    for name in (os.environ.get("DPVERIFY_CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome", "google-chrome-stable"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _browser(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    binary = _chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (apt-get install chromium; or set "
                    "DPVERIFY_CHROMIUM)")
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    profile.mkdir()
    # Generous: a loaded machine can take minutes to start a browser; a page that never
    # finishes loading still fails the test.
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=300)


def test_html_renders_in_headless_chromium(run_dir, tmp_path):
    url = (run_dir[1] / "report.html").resolve().as_uri()
    res = _browser(tmp_path, "--dump-dom", url)
    assert res.returncode == 0, res.stderr[-2000:]
    d = _dom(res.stdout)
    _assert_layout(d, figures=PLOT_IDS)
    assert d.tags.get("svg", 0) == len(PLOT_IDS)
    # And it paints: a screenshot of the top of the page is not blank.
    shot = tmp_path / "shot.png"
    res = _browser(tmp_path, "--window-size=1200,2400", f"--screenshot={shot}", url)
    assert res.returncode == 0 and shot.stat().st_size > 10_000, res.stderr[-2000:]
    mpimg = pytest.importorskip("matplotlib.image")
    img = mpimg.imread(shot)
    assert img.shape[:2] == (2400, 1200)
    assert (img[..., :3].min(axis=2) < 0.5).mean() > 0.01  # dark pixels: text and lines


def test_a_users_callable_gets_a_group_of_its_own():
    rep = {"scale": "quick", "seed": 0, "suites": [{"path": "s.toml", "seed": 0}], "checks": [
        {"id": "mine.audit", "kind": "audit", "target": "mymodule:mechanism",
         "verdict": "PASS", "expected": "PASS", "met": True, "source": "s.toml:7",
         "options": {"trials": 100, "epsilon": 1.0, "delta": 1e-5},
         "metrics": {"epsilon_lower": 0.1, "epsilon_claimed": 1.0, "delta": 1e-5}}]}
    doc = build_document(rep)
    assert [(g.key, g.algorithms[0].name) for g in doc.groups] == [("user",
                                                                     "mymodule:mechanism")]
    assert doc.groups[0].checks[0].commands == [
        "dpverify run s.toml --only mine.audit --seed 0 --scale quick",
        "dpverify audit mymodule:mechanism --mode blackbox --trials 100 --epsilon 1.0 "
        "--delta 1e-05 --seed 0 --scale quick"]
    d = _dom(report_html.render_html(rep, plot_format="none"))
    assert d.tables.count("checks") == 1 and "g-user" in d.ids and "c-mine-audit" in d.ids


def test_figures_use_a_recorded_roc_curve_loss_histogram_and_band(rep):
    """The fuller evidence an auditor or a rate fit may record is drawn when present."""
    from scipy import stats

    recs = {c["id"]: json.loads(json.dumps(c)) for c in rep["checks"]}
    audit = recs["gauss.sound.audit"]
    fpr = [float(x) for x in (0.0, 0.01, 0.1, 0.5, 1.0)]
    audit["evidence"]["roc"] = {"fpr": fpr,
                                "tpr": stats.norm.cdf(stats.norm.ppf(fpr) + 0.5).tolist()}
    # White-box audits record the ROC of the privacy loss; it is drawn as a curve.
    assert "roc" in recs["gd.sound.audit.whitebox"]["evidence"]
    assert "one operating point" not in plots.roc_plot(recs["gd.sound.audit.whitebox"]).caption
    roc = plots.roc_plot(audit)
    assert "one operating point" not in roc.caption and "audit's ROC" in roc.data
    wb = recs["gd.sound.audit.whitebox"]
    wb["evidence"]["loss_histogram"] = {"edges": [-1.0, 0.0, 1.0], "counts_D": [10, 30],
                                        "counts_D_prime": [30, 10]}
    loss = plots.loss_plot(wb)
    assert "not a histogram" not in loss.caption and "privacy-loss histogram" in loss.data
    # A rate check records its fitted curve and bootstrap band per grid point; the plot
    # shades the band around the curve. An older record without them gets the band of
    # slopes its interval allows.
    rate = recs["gd.sound.rate.n"]
    point = rate["evidence"]["points"][0]
    assert all(len(point[k]) == len(point["values"])
               for k in ("fit", "band_low", "band_high", "log_factor"))
    assert all(lo <= f <= hi for lo, f, hi in zip(point["band_low"], point["fit"],
                                                  point["band_high"], strict=True))
    drawn = plots.rate_plot(rate)
    assert "95% bootstrap band" in drawn.data and "pointwise bootstrap band" in drawn.caption
    old = json.loads(json.dumps(rate))
    for k in ("fit", "band_low", "band_high", "log_factor"):
        del old["evidence"]["points"][0][k]
    assert "bootstrap band" not in plots.rate_plot(old).data
    assert "slopes in [" in plots.rate_plot(old).data
    # A log factor that varies along the grid is divided out of what is drawn, as out of
    # the fit; a constant one is not.
    assert "divided out" not in drawn.caption
    point["log_factor"] = [float(np.log(v)) for v in point["values"]]
    rate["evidence"]["theory"]["log_factors"] = ["log(n)"]
    divided = plots.rate_plot(rate)
    assert "is divided out of every plotted value" in divided.caption
    assert "/ (log(n))" in divided.data


def test_one_check_id_in_two_suites_keeps_the_page_ids_unique(rep):
    rec = next(c for c in rep["checks"] if c["id"] == "gd.sound.account")
    other = dict(rec, source="other/suite.toml:4")
    two = dict(rep, checks=[rec, other], suites=rep["suites"] + [{"path": "other/suite.toml",
                                                                   "seed": 0}])
    views = [c for g in build_document(two).groups for c in g.checks]
    assert [c.id for c in views] == [f"gd.sound.account@{rec['source'].rsplit(':', 1)[0]}",
                                     "gd.sound.account@other/suite.toml"]
    assert views[1].commands[0].startswith("dpverify run other/suite.toml --only "
                                           "gd.sound.account ")


def test_descriptions_come_from_the_specs_not_the_suite_files(tmp_path):
    """The writer reads no suite file: one id in two suites keeps each suite's words."""
    from dpverify.checks.base import CheckResult, CheckSpec, Outcome
    from dpverify.cli.suites import Suite, SuiteRun
    from dpverify.core.claims import Verdict
    from dpverify.report.writer import report_dict

    specs = [CheckSpec("a", "account", "noisy_gd:sound", source=f"{p}:3", description=d)
             for p, d in ((tmp_path / "gone1.toml", "first"), (tmp_path / "gone2.toml", ""))]
    suites = [Suite(tmp_path / f"gone{i}.toml", f"s{i}", [s]) for i, s in enumerate(specs, 1)]
    run = SuiteRun(suites, [CheckResult(s, Outcome(Verdict.PASS), 0.1) for s in specs])
    recs = report_dict(run)["checks"]
    assert not any(s.path.exists() for s in suites)
    assert recs[0]["description"] == "first" and "description" not in recs[1]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_report_files_honour_the_umask(tmp_path, umask):
    """Reports are created like any file (0644 under umask 022), not 0600 like a tempfile."""
    from dpverify.report.io import write_json_atomic, write_text_atomic

    old = os.umask(umask)
    try:
        paths = [write_text_atomic(tmp_path / "r.md", "x"),
                 write_json_atomic(tmp_path / "sub" / "r.json", {"a": 1})]
        paths.append(write_text_atomic(tmp_path / "r.md", "y"))  # replacing keeps the rule
    finally:
        os.umask(old)
    for p in paths:
        assert p.stat().st_mode & 0o777 == 0o666 & ~umask, oct(p.stat().st_mode)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# Merging the reports of separate runs ------------------------------------------------------

SHARD_A = """
[suite]
name = "shard a"
seed = 5

[[check]]
id = "gd.account"
description = "the sound variant's ledger"
kind = "account"
target = "noisy_gd:sound"
[check.params]
T = 4

[[check]]
id = "gd.half_steps.account"
kind = "account"
target = "noisy_gd:planted_half_steps"
expected = "FAIL"
[check.params]
T = 6
"""

SHARD_B = """
[suite]
name = "shard b"

[[check]]
id = "gd.account"
kind = "account"
target = "noisy_gd:sound"
[check.params]
T = 7

[[check]]
id = "gauss.audit"
kind = "audit"
target = "gaussian_mechanism:sound"
[check.options]
trials = 1000
"""


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two suites run apart and together: (folder, a.json, b.json, both.json)."""
    root = tmp_path_factory.mktemp("shards")
    (root / "a.toml").write_text(SHARD_A)
    (root / "b.toml").write_text(SHARD_B)
    with pytest.MonkeyPatch.context() as mp:
        # Only the JSON matters here; the page of each run is what takes the time.
        mp.setattr(report_writer, "write_rendered", lambda *a, **k: [])
        for name, suites in (("a", ["a.toml"]), ("b", ["b.toml"]),
                             ("both", ["a.toml", "b.toml"])):
            args = ["run", *(str(root / s) for s in suites), "--report-dir", str(root / name),
                    "--quiet"]
            assert main(args) == 0
    return root, *(root / n / "report.json" for n in ("a", "b", "both"))


def _comparable(rep: dict) -> dict:
    """A report without what differs between runs of the same checks: times."""
    rep = {k: v for k, v in rep.items() if k not in ("created", "merged_from")}
    rep["checks"] = [{k: v for k, v in c.items() if k != "seconds"} for c in rep["checks"]]
    return rep


def test_merged_reports_equal_one_run_over_both_suites(shards, tmp_path):
    root, a, b, both = shards
    out = tmp_path / "merged"
    assert main(["report", str(a), str(b.parent), "--out", str(out), "--format", "md",
                 "--json", str(tmp_path / "merged.json"), "--quiet"]) == 0
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert _comparable(merged) == _comparable(json.loads(both.read_text()))
    assert [m["file"] for m in merged["merged_from"]] == [str(a), str(b)]
    assert merged["summary"] == {"checks": 4, "met": 4,
                                 "by_verdict": {"PASS": 3, "FAIL": 1, "INCONCLUSIVE": 0}}
    assert sorted(p.name for p in out.iterdir()) == ["report.md"]
    md = (out / "report.md").read_text()
    assert "*the sound variant's ledger.*" in md
    assert f"Merged from the reports of 2 runs: `{a}` (2 checks, created " in md
    # Overlapping shards: the same check with the same result is kept once.
    again = merge_reports(load_reports([a, b, a]))
    assert _comparable(again) == _comparable(merged)


@pytest.mark.parametrize("field,value,words", [
    ("seed", 9, ["seeds", "9", "0"]),
    ("scale", "thorough", ["scales", "'thorough'", "'quick'"]),
    ("schema_version", "1.0", ["schema versions", "'1.0'", "'2.0'"]),
    ("verdict", "FAIL", ["'gd.account'", "a.toml", "verdict", '"PASS" vs "FAIL"']),
])
def test_reports_that_do_not_merge_are_input_errors(shards, tmp_path, capsys, field, value,
                                                    words):
    root, a, b, _ = shards
    other = json.loads(a.read_text())
    if field == "verdict":  # the same check of the same suite, with another result
        other["checks"][0]["verdict"] = value
    else:
        other[field] = value
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps(other))
    assert main(["report", str(a), str(b), str(bad), "--out", str(tmp_path / "m")]) == 2
    msg = capsys.readouterr().out
    for w in [str(a), str(bad), *words]:
        assert w in msg, (w, msg)
    assert not (tmp_path / "m").exists()  # refused before anything is written


def test_merging_needs_an_output_folder(shards, capsys):
    _, a, b, _ = shards
    assert main(["report", str(a), str(b)]) == 2
    assert "--out" in capsys.readouterr().out


# What a reviewer meets: ids, contents, size, verdict words, a figure actually drawn -------

PAPERS_JSON = Path(__file__).resolve().parents[1] / "reports" / "papers.json"


def _ids(page: str) -> list[str]:
    return re.findall(r'\sid="([^"]+)"', page)


def _assert_ids_unique_and_links_resolve(page: str) -> None:
    ids = _ids(page)
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, dupes[:10]
    targets = set(re.findall(r'href="#([^"]+)"', page)) | set(
        re.findall(r'url\(#([^)]+)\)', page))
    assert targets <= set(ids), sorted(targets - set(ids))[:10]


def test_element_ids_are_unique_and_every_check_is_in_the_contents(page, rep):
    """matplotlib names every figure's groups figure_1, axes_1...: the page must not."""
    _assert_ids_unique_and_links_resolve(page)
    nav = re.search(r"<nav.*?</nav>", page, flags=re.S).group(0)
    for c in rep["checks"]:
        assert f'href="#{report_html.anchor("c", c["id"])}"' in nav


@pytest.fixture(scope="module")
def papers_page(tmp_path_factory):
    """The committed paper report re-rendered, as `dpverify report` does."""
    out = tmp_path_factory.mktemp("papers")
    assert main(["report", str(PAPERS_JSON), "--out", str(out), "--format", "html",
                 "--quiet"]) == 0
    return (out / "report.html").read_bytes()


@pytest.mark.slow
def test_the_paper_report_page_is_light_with_unique_ids(papers_page):
    """Every figure inline, yet under 12 kB a check (it was 30 kB, 7.3 MB for 246 checks
    with 143 copies of each of matplotlib's ids); the JSON keeps every number the page
    leaves out."""
    page = papers_page.decode("utf-8")
    rep = json.loads(PAPERS_JSON.read_text())
    assert len(papers_page) < 12_000 * len(rep["checks"]), len(papers_page)
    assert page.count("<svg") >= 100
    _assert_ids_unique_and_links_resolve(page)
    nav = re.search(r"<nav.*?</nav>", page, flags=re.S).group(0)
    assert nav.count('href="#c-') == len(rep["checks"])


def test_rate_verdicts_say_whose_claim_they_refute_and_why_they_cannot_decide(tmp_path):
    """A sound variant's rate FAIL refutes a named theorem's rate; the page never pairs
    "a FAIL would be a bug" with "FAIL as expected" on a rate."""
    from dpverify.checks.base import CheckSpec, RunContext, run_check
    from dpverify.core.claims import Verdict
    from dpverify.report.markdown import DISCLAIMER
    from dpverify.report.paper import rate_cell, verdict_words

    mymod = Path(__file__).resolve().parents[1] / "examples" / "mymod.py"
    spec = CheckSpec("mine.rate", "rate", f"{mymod}:mean_error_planted", Verdict.FAIL,
                     options={"vary": "n", "values": [100, 200, 400, 800], "seeds": 8,
                              "theory": {"n": -1}, "claimed_by": "A. Author (2030)"})
    rec = run_check(spec, RunContext()).to_dict()
    assert rec["evidence"]["theory"]["source"] == "A. Author (2030)"
    assert verdict_words(rec) == "FAIL: refutes A. Author (2030)'s n^-1"
    assert rate_cell([rec]) == "refutes A. Author (2030)'s n^-1 (1/1 as expected)"
    assert "privacy FAIL would be a bug" in DISCLAIMER and "names the claim" in DISCLAIMER
    # The committed paper report, rendered again: its sound variants' rate cells name the
    # theorem refuted, or why the grid could not decide.
    rows = {r.target: r for r in summary_rows(build_document(json.loads(
        PAPERS_JSON.read_text())))}
    assert rows["dp_recursive_spider:sound"].rate_words.startswith(
        "refutes paper 000, Theorem 4 (Theorem 8)'s n^(-2/3)")
    assert rows["o2nc_fo:sound"].rate_words.startswith(
        "INCONCLUSIVE: not observable on this grid: every point saturated")
    for r in rows.values():
        assert "FAIL (" not in r.rate_words
    with pytest.raises(Exception, match="claimed_by"):
        run_check(CheckSpec("x", "rate", spec.target, options={**spec.options,
                                                               "claimed_by": 3}), RunContext())


def test_a_figure_is_drawn_in_headless_chromium(run_dir, tmp_path):
    """Pixels, not markup: the rate figure, pinned to the top of the real page with its
    own CSS, paints lines in colour inside its bounding box (measured by the browser)."""
    page = (run_dir[1] / "report.html").read_text(encoding="utf-8")
    fid = "plot-rate-gd-sound-rate-n"
    assert f'id="{fid}"' in page
    pin = (f"<style>#{fid}{{position:fixed;top:0;left:0;margin:0;z-index:2147483647;"
           "background:#fff;width:900px}</style>")
    measure = (f'<script>addEventListener("load",function(){{var r=document.querySelector('
               f'"#{fid} svg").getBoundingClientRect();document.body.setAttribute('
               f'"data-rect",[r.left,r.top,r.width,r.height].join(","));}});</script>')
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</head>", pin + "</head>", 1).replace(
        "</body>", measure + "</body>"), encoding="utf-8")
    res = _browser(tmp_path, "--dump-dom", probe.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    left, top, width, height = (float(x) for x in re.search(
        r'data-rect="([^"]+)"', res.stdout).group(1).split(","))
    assert width > 200 and height > 100
    shot = tmp_path / "figure.png"
    res = _browser(tmp_path, "--hide-scrollbars", "--force-device-scale-factor=1",
                   "--window-size=1000,800", f"--screenshot={shot}", probe.as_uri())
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    mpimg = pytest.importorskip("matplotlib.image")
    img = mpimg.imread(shot)[..., :3]
    box = img[int(top):int(top + height), int(left):int(left + width)]
    ink = box.min(axis=2) < 0.6  # anything darker than a light grid line
    colour = (box.max(axis=2) - box.min(axis=2)) > 0.3  # the data's coloured lines
    assert ink.mean() > 0.01, ink.mean()
    assert colour.sum() > 200, colour.sum()
    # The same box of a page without figures is blank: the test can fail.
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r"<svg\b.*?</svg>", "", probe.read_text(encoding="utf-8"),
                           flags=re.S), encoding="utf-8")
    shot2 = tmp_path / "bare.png"
    _browser(tmp_path, "--hide-scrollbars", "--force-device-scale-factor=1",
             "--window-size=1000,800", f"--screenshot={shot2}", bare.as_uri())
    empty = mpimg.imread(shot2)[..., :3][int(top):int(top + height),
                                         int(left):int(left + width)]
    assert ((empty.max(axis=2) - empty.min(axis=2)) > 0.3).sum() < 50
