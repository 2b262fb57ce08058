"""The reviewer's view of a run: checks grouped by paper and algorithm, in plain words.

A ``report.json`` lists checks in the order they ran. A reviewer of a paper reads them by
paper, then by algorithm, then by variant (the printed algorithm next to its correction),
with each variant's claims (privacy guarantee, utility theorem), the verdict and the
numbers of every check, one paragraph per known finding, and the one command that
reproduces each number. This module builds that view (:func:`build_document`) from the
report dictionary alone, so a saved report renders the same later; the Markdown and HTML
writers only format it.

Groups come from the registry: the package that registered an algorithm (its
``dpverify.algorithms`` entry point, e.g. ``paper002``) is its group, titled by the first
paragraph of that package's docstring. Targets given as ``module:function`` form a group
of their own.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpverify.checks.base import CheckKind, get_kind, result_of
from dpverify.core.errors import InputError
from dpverify.core.prose import Statement, claim_text, fmt, param_args
from dpverify.core.registry import all_algorithms, is_registered_target, load_callable, resolve
from dpverify.report.registers import RegisterRow, register_rows

USER_GROUP = "user"
_VERDICT_ORDER = ("FAIL", "INCONCLUSIVE", "PASS")


# Numbers -----------------------------------------------------------------------------------


def _first_paragraph(doc: str | None) -> str:
    if not doc:
        return ""
    para = doc.strip().split("\n\n")[0]
    return " ".join(para.split())


def _entry_point_groups() -> dict[str, tuple[str, str]]:
    """``{algorithm name: (entry point name, module)}`` of the registered packages."""
    known = {a.name for a in all_algorithms()}
    out: dict[str, tuple[str, str]] = {}
    for ep in importlib.metadata.entry_points(group="dpverify.algorithms"):
        module = ep.value.partition(":")[0]
        try:
            obj = ep.load()
            algos = obj() if callable(obj) else obj
            names = [a.name for a in algos]
        except Exception:  # the registry already warned about a broken plugin
            continue
        for name in names:
            if name in known:
                out.setdefault(name, (ep.name, module))
    return out


_GROUPS: dict[str, tuple[str, str]] | None = None


def _group_of(algorithm: Any) -> tuple[str, str]:
    """(group key, title) of a registered algorithm."""
    global _GROUPS
    if _GROUPS is None:
        _GROUPS = _entry_point_groups()
    ep = _GROUPS.get(algorithm.name)
    if ep is None:  # registered by a call to register(), not by an entry point
        return _source_key(algorithm.source), algorithm.source
    name, module = ep
    title = _first_paragraph(getattr(sys.modules.get(module), "__doc__", None)) or name
    return name, title


def _source_key(source: str) -> str:
    m = re.search(r"paper\s*(\d+)", source or "", flags=re.IGNORECASE)
    return f"paper{m.group(1)}" if m else (source or "other").split(",")[0].strip()


def target_info(target: str, params: Mapping[str, Any] | None = None,
                scale: str = "quick") -> dict[str, Any] | None:
    """What the registry knows of a target, JSON-ready; ``None`` for a ``module:function``.

    ``claim`` is the variant's privacy claim at ``params`` (the check's overrides) and
    ``scale``; ``findings`` are the defects the variant carries.

    Examples
    --------
    >>> info = target_info("noisy_gd:planted_half_steps")
    >>> info["group"], info["kind"], info["findings"][0]["detected_by"]
    ('baselines', 'planted', ['account', 'audit'])
    """
    if not is_registered_target(target):
        return declared_target_info(target)
    try:
        t = resolve(target)
    except InputError:
        return None
    group, title = _group_of(t.algorithm)
    try:
        claim: dict[str, Any] = t.variant.claim(
            t.algorithm.params(t.variant.name, params, scale)).to_dict()
    except Exception as e:  # a claim that cannot be formed is shown, not hidden
        claim = {"error": f"{type(e).__name__}: {e}"}
    return {
        "target": t.id,
        "algorithm": t.algorithm.name,
        "variant": t.variant.name,
        "kind": t.variant.kind,
        "group": group,
        "group_title": title,
        "source": t.algorithm.source,
        "algorithm_description": t.algorithm.description,
        "description": t.variant.description,
        "claim": claim,
        "utility": t.variant.utility.to_dict() if t.variant.utility else None,
        "findings": [{"summary": f.summary, "source": f.source,
                      "detected_by": list(f.detected_by)} for f in t.variant.findings],
    }


def declared_target_info(target: str) -> dict[str, Any] | None:
    """What a ``module:function`` declares of itself (its claim, the source it follows,
    a known epsilon above the claim as a finding); ``None`` where it declares nothing.

    Examples
    --------
    >>> declared_target_info("algorithms.catalogue:svt4")["claim"]["delta"]
    0.0
    >>> declared_target_info("math:sqrt") is None
    True
    """
    try:
        decl = getattr(load_callable(target), "dpverify_declaration", None)
    except InputError:
        return None
    if decl is None:
        return None
    module, _, name = target.partition(":")
    findings = []
    if decl.epsilon_true is not None and decl.epsilon is not None and \
            decl.epsilon_true > decl.epsilon:
        findings.append({"summary": f"true epsilon {fmt(decl.epsilon_true)} exceeds the "
                                    f"claimed {fmt(decl.epsilon)}", "source": decl.source,
                         "detected_by": ["audit"]})
    return {"target": target, "algorithm": module, "variant": name, "kind": "user",
            "group": USER_GROUP, "group_title": "Targets given as module:function",
            "source": decl.source, "algorithm_description": f"declared mechanisms of {module}",
            "description": decl.source,
            "claim": {"epsilon": decl.epsilon, "delta": decl.delta, "rho": None,
                      "relation": decl.relation or "add_remove"},
            "utility": None, "findings": findings}


# Statements -------------------------------------------------------------------------------


def verdict_words(check: Mapping[str, Any]) -> str:
    """A check's verdict in words a reviewer reads without a glossary (its kind's words).

    A rate check that FAILs refutes a stated rate, and says whose: it judges a utility
    theorem, not the variant's privacy. An INCONCLUSIVE says why.

    Examples
    --------
    >>> verdict_words({"kind": "rate", "verdict": "FAIL", "metrics": {"parameter": "d",
    ...     "theory": 0.75}, "evidence": {"theory": {"source": "Zhang et al."}}})
    "FAIL: refutes Zhang et al.'s d^(3/4)"
    >>> verdict_words({"kind": "account", "verdict": "PASS"})
    'PASS'
    """
    return _kind(check).verdict_words(check)


class _RecordOnly(CheckKind):
    """A kind this installation lacks, known from its records alone: they are worded
    generically, and it cannot run."""

    def run(self, exp: Any, options: Any) -> Any:
        raise InputError(f"check kind {self.name!r} is not installed here: its records can "
                         "be read, not rerun")


def _kind(check: Mapping[str, Any]) -> CheckKind:
    """The kind of a record (a :class:`_RecordOnly` where this installation lacks it)."""
    try:
        return get_kind(str(check.get("kind")))
    except InputError:
        kind = _RecordOnly()
        kind.name = str(check.get("kind"))
        return kind


def statement(check: Mapping[str, Any], info: Mapping[str, Any] | None = None) -> Statement:
    """What a check claims, measured and how sure it is, in plain words (its kind's words).

    Examples
    --------
    >>> chk = {"kind": "account", "verdict": "FAIL", "metrics": {
    ...     "epsilon_accountant": 2.0, "epsilon_claimed": 1.0, "delta": 1e-5, "ratio": 2.0,
    ...     "epsilon_pld": 2.0, "releases": 10}}
    >>> print(statement(chk).measured)  # doctest: +NORMALIZE_WHITESPACE
    The ledger of one run (10 noisy releases), composed by dp_accounting's PLD accountant,
    spends ε = 2 at δ = 1e-05 against the claimed ε = 1 (ratio 2).
    """
    error = result_of(check).error
    if error:
        return Statement("", f"The check did not complete: {error}.",
                         "Its verdict is INCONCLUSIVE; the traceback is in the evidence.")
    claim = claim_text(check.get("claim") or (info or {}).get("claim"))
    return _kind(check).statement(check, claim, info)


# Reproduction -----------------------------------------------------------------------------



def suite_path_of(check: Mapping[str, Any], rep: Mapping[str, Any]) -> str | None:
    """The suite file a check came from (its ``source`` is ``path:line``)."""
    src = str(check.get("source") or "")
    if src:
        return src.rsplit(":", 1)[0] if re.search(r":\d+$", src) else src
    suites = rep.get("suites") or []
    return str(suites[0]["path"]) if len(suites) == 1 else None


def seed_of(check: Mapping[str, Any], rep: Mapping[str, Any]) -> int:
    """The root seed a check ran with (its suite's)."""
    path = suite_path_of(check, rep)
    for s in rep.get("suites") or []:
        if str(s.get("path")) == path and isinstance(s.get("seed"), int):
            return int(s["seed"])
    return int(rep.get("seed") or 0)


def reproduce(check: Mapping[str, Any], rep: Mapping[str, Any]) -> list[str]:
    """Shell commands that reproduce a check: its suite entry, and a subcommand if one fits.

    Examples
    --------
    >>> rep = {"seed": 0, "scale": "quick", "suites": [{"path": "s.toml", "seed": 3}]}
    >>> chk = {"id": "a.b", "kind": "account", "target": "noisy_gd:sound",
    ...        "params": {"T": 5}, "source": "s.toml:4"}
    >>> for c in reproduce(chk, rep):
    ...     print(c)
    dpverify run s.toml --only a.b --seed 3 --scale quick
    dpverify account noisy_gd:sound --param T=5 --seed 3 --scale quick
    """
    seed, scale = seed_of(check, rep), str(rep.get("scale") or "quick")
    out = []
    path = suite_path_of(check, rep)
    if path:
        # Overrides the run was given (run --param) that reached this check.
        over = {k: v for k, v in (rep.get("param_overrides") or {}).items()
                if k in (check.get("params") or {})}
        out.append(shlex.join(["dpverify", "run", path, "--only", str(check.get("id")),
                               *param_args(over), "--seed", str(seed), "--scale", scale]))
    alone = _kind(check).command(check)
    if alone:
        tail = [*param_args(check.get("params") or {}), "--seed", str(seed), "--scale", scale]
        out.append(shlex.join([*alone, *tail]))
    return out


# The document -----------------------------------------------------------------------------


@dataclass
class CheckView:
    """One check with its words and commands."""

    record: dict[str, Any]
    statement: Statement
    commands: list[str]

    @property
    def id(self) -> str:
        return str(self.record.get("id"))


@dataclass
class FindingView:
    """A known defect of a variant and the checks of this run that bear on it."""

    target: str
    summary: str
    source: str
    detected_by: list[str]
    claim: str
    checks: list[CheckView]
    shared: int = 1  # findings of the same variant these checks also bear on

    def paragraph(self) -> str:
        """The finding in plain words: claim, defect, measurement, confidence, command."""
        head = (f"{self.target} claims {self.claim}. The finding"
                + (f" ({self.source})" if self.source else "") + f": {self.summary.rstrip('.')}.")
        if not self.checks:
            kinds = ", ".join(self.detected_by) or "no check kind named"
            return (head + f" Not measured in this run (detected by: {kinds}); no check of "
                    "those kinds targets this variant here.")
        parts = []
        for c in self.checks:
            v, e = c.record.get("verdict"), c.record.get("expected")
            verdict = verdict_words(c.record) + (", as expected" if v == e else
                                                 f", expected {e}")
            what = c.statement.short or (c.statement.measured + " " +
                                         c.statement.confidence)
            parts.append(f"{c.id} ({verdict}): {what.rstrip('.')}.")
        cmds = [c.commands[0] for c in self.checks if c.commands]
        tail = f" Reproduce: `{cmds[0]}`." if cmds else ""
        if self.shared > 1:
            tail += (f" These checks judge the variant as a whole: they bear on all "
                     f"{self.shared} of its findings of these kinds and cannot tell which "
                     "one a violation comes from.")
        return head + " Measured: " + " ".join(parts) + tail


@dataclass
class VariantView:
    """One target (``name:variant``) and its checks."""

    target: str
    info: dict[str, Any] | None
    checks: list[CheckView] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return str((self.info or {}).get("kind", "user"))

    def verdict(self, kinds: Sequence[str]) -> tuple[str, int, int] | None:
        """(worst verdict, checks met, checks) over the checks of ``kinds``; None if none."""
        cs = [c.record for c in self.checks if c.record.get("kind") in kinds]
        if not cs:
            return None
        vs = [str(c.get("verdict")) for c in cs]
        worst = next((v for v in _VERDICT_ORDER if v in vs), vs[0])
        return worst, sum(bool(c.get("met")) for c in cs), len(cs)


@dataclass
class AlgorithmView:
    """An algorithm with the variants the run checked."""

    name: str
    source: str
    description: str
    variants: list[VariantView] = field(default_factory=list)

    @property
    def findings(self) -> list[FindingView]:
        """The known findings of the checked variants, each with the checks that bear on it:
        those of a kind the finding names as able to detect it (all, if it names none)."""
        out = []
        for v in self.variants:
            info = v.info or {}
            mine = []
            for f in info.get("findings") or []:
                kinds = list(f.get("detected_by") or [])
                cs = [c for c in v.checks if not kinds or c.record.get("kind") in kinds]
                mine.append(FindingView(v.target, str(f.get("summary", "")),
                                        str(f.get("source", "")), kinds,
                                        claim_text(info.get("claim")), cs))
            for f in mine:
                ids = {c.id for c in f.checks}
                f.shared = sum(bool(ids & {c.id for c in g.checks}) for g in mine)
            out += mine
        return out


@dataclass
class GroupView:
    """A paper (or a registering package, or the user's targets)."""

    key: str
    title: str
    algorithms: list[AlgorithmView] = field(default_factory=list)
    register: list[RegisterRow] = field(default_factory=list)

    @property
    def checks(self) -> list[CheckView]:
        return [c for a in self.algorithms for v in a.variants for c in v.checks]

    @property
    def findings(self) -> list[FindingView]:
        return [f for a in self.algorithms for f in a.findings]


def group_heading(g: GroupView, limit: int | None = None) -> str:
    """A group's heading: its title, led by its key unless the title already names it.

    Examples
    --------
    >>> group_heading(GroupView("paper002", "Paper 002: Wang, Ye and Xu (2017), DP-ERM."))
    'Paper 002: Wang, Ye and Xu (2017), DP-ERM.'
    >>> group_heading(GroupView("user", "Targets given as module:function"))
    'user: Targets given as module:function'
    """
    squash = re.sub(r"[^a-z0-9]", "", g.title.lower())
    text = g.title if squash.startswith(re.sub(r"[^a-z0-9]", "", g.key.lower())) else \
        f"{g.key}: {g.title}"
    if limit is not None and len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


@dataclass
class Document:
    """The whole reviewer's view of one report."""

    report: dict[str, Any]
    groups: list[GroupView]

    @property
    def scale(self) -> str:
        return str(self.report.get("scale", "quick"))


def _group_sort_key(key: str) -> tuple[int, str]:
    if key == USER_GROUP:
        return (2, key)
    return (0, key) if re.fullmatch(r"paper\d+", key) else (1, key)


def build_document(rep: Mapping[str, Any]) -> Document:
    """Group a report's checks by paper, algorithm and variant, with words and commands.

    Uses the report's ``algorithms`` section (written by
    :func:`dpverify.report.writer.report_dict`) and falls back to the registry for
    reports without one.

    Examples
    --------
    >>> rep = {"scale": "quick", "seed": 0, "suites": [], "checks": [
    ...     {"id": "x", "kind": "account", "target": "noisy_gd:sound", "verdict": "PASS",
    ...      "expected": "PASS", "met": True, "metrics": {}}]}
    >>> doc = build_document(rep)
    >>> [(g.key, [a.name for a in g.algorithms]) for g in doc.groups]
    [('baselines', ['noisy_gd'])]
    """
    rep = dict(rep)
    infos: dict[str, Any] = dict(rep.get("algorithms") or {})
    groups: dict[str, GroupView] = {}
    algos: dict[tuple[str, str], AlgorithmView] = {}
    variants: dict[tuple[str, str], VariantView] = {}
    ids = [c.get("id") for c in rep.get("checks") or []]
    for chk in rep.get("checks") or []:
        target = str(chk.get("target"))
        info = infos.get(target)
        if info is None and target not in infos:
            info = target_info(target, scale=str(rep.get("scale", "quick")))
            infos[target] = info
        if info is None:
            gkey, gtitle = USER_GROUP, "Targets given as module:function"
            aname, source, desc, vkey = target, "", "a user's callable", target
        else:
            gkey, gtitle = str(info["group"]), str(info["group_title"])
            aname, source = str(info["algorithm"]), str(info["source"])
            desc, vkey = str(info.get("algorithm_description", "")), str(info["target"])
        g = groups.setdefault(gkey, GroupView(gkey, gtitle))
        a = algos.get((gkey, aname))
        if a is None:
            a = algos[(gkey, aname)] = AlgorithmView(aname, source, desc)
            g.algorithms.append(a)
        v = variants.get((gkey, vkey))
        if v is None:
            v = variants[(gkey, vkey)] = VariantView(vkey, info)
            a.variants.append(v)
        record = dict(chk)
        if ids.count(chk.get("id")) > 1:  # one id in two suites: the page needs unique ids
            record["id"] = f"{chk.get('id')}@{suite_path_of(chk, rep) or '?'}"
        v.checks.append(CheckView(record, statement(chk, info), reproduce(chk, rep)))
    registers = rep.get("registers") or {}
    for key, entries in registers.items():
        if key in groups:
            groups[key].register = register_rows(entries, rep.get("checks") or [])
    ordered = sorted(groups.values(), key=lambda g: _group_sort_key(g.key))
    return Document(rep, ordered)


@dataclass
class SummaryRow:
    """One row of the cross-paper summary: a variant and its three verdicts."""

    group: str
    algorithm: str
    target: str
    kind: str
    privacy: tuple[str, int, int] | None
    rate: tuple[str, int, int] | None
    agreement: tuple[str, int, int] | None
    other: tuple[str, int, int] | None
    rate_words: str = "—"  # the rate checks in words (see rate_cell)


def summary_rows(doc: Document) -> list[SummaryRow]:
    """Privacy, rate and agreement verdicts of every variant, paper by paper.

    Examples
    --------
    >>> rep = {"checks": [{"id": "x", "kind": "account", "target": "noisy_gd:sound",
    ...        "verdict": "PASS", "expected": "PASS", "met": True, "metrics": {}}]}
    >>> r = summary_rows(build_document(rep))[0]
    >>> r.target, r.privacy, r.rate
    ('noisy_gd:sound', ('PASS', 1, 1), None)
    """
    rows = []
    for g in doc.groups:
        for a in g.algorithms:
            for v in a.variants:
                col: dict[str, list[str]] = {}
                for c in v.checks:
                    kind = str(c.record.get("kind"))
                    col.setdefault(_kind(c.record).column, []).append(kind)
                rows.append(SummaryRow(g.key, a.name, v.target, v.kind,
                                       v.verdict(col.get("privacy", [])),
                                       v.verdict(col.get("rate", [])),
                                       v.verdict(col.get("agreement", [])),
                                       v.verdict(col["other"]) if "other" in col else None,
                                       rate_cell([c.record for c in v.checks
                                                  if _kind(c.record).column == "rate"])))
    return rows


def verdict_cell(v: tuple[str, int, int] | None) -> str:
    """A summary cell: the worst verdict and how many checks met their expectation.

    Examples
    --------
    >>> verdict_cell(("FAIL", 2, 2)), verdict_cell(("PASS", 1, 2)), verdict_cell(None)
    ('FAIL (2/2 as expected)', 'PASS (1/2 as expected)', '—')
    """
    if v is None:
        return "—"
    return f"{v[0]} ({v[1]}/{v[2]} as expected)"


def rate_cell(checks: Sequence[Mapping[str, Any]]) -> str:
    """A variant's rate checks in the summary: the claims refuted, why others could not
    decide, the passes, and how many met their expectation.

    Examples
    --------
    >>> fail = {"kind": "rate", "verdict": "FAIL", "expected": "FAIL", "met": True,
    ...         "metrics": {"parameter": "d", "theory": 0.75},
    ...         "evidence": {"theory": {"source": "Zhang et al."}}}
    >>> ok = {"kind": "rate", "verdict": "PASS", "expected": "PASS", "met": True}
    >>> rate_cell([fail, ok])
    "refutes Zhang et al.'s d^(3/4); 1 PASS (2/2 as expected)"
    >>> rate_cell([])
    '—'
    """
    if not checks:
        return "—"
    parts: list[str] = []
    for verdict in ("FAIL", "INCONCLUSIVE"):  # what a reviewer must read first
        for c in checks:
            words = verdict_words(c).removeprefix("FAIL: ")
            if c.get("verdict") == verdict and words not in parts:
                parts.append(words)
    passed = sum(c.get("verdict") == "PASS" for c in checks)
    if passed:
        parts.append(f"{passed} PASS")
    met = sum(bool(c.get("met")) for c in checks)
    return "; ".join(parts) + f" ({met}/{len(checks)} as expected)"


HEADLINE = ("epsilon_lower", "epsilon_accountant", "epsilon_claimed", "worst_ratio",
            "exponent", "theory", "max_rel_dev", "auc")


def headline(check: Mapping[str, Any]) -> str:
    """The few numbers a table row shows.

    Examples
    --------
    >>> headline({"kind": "account", "metrics": {"epsilon_accountant": 2.0,
    ...           "epsilon_claimed": 1.0}})
    'ε_acc=2, ε_claimed=1'
    """
    names = {"epsilon_lower": "ε_lower", "epsilon_accountant": "ε_acc",
             "epsilon_claimed": "ε_claimed", "worst_ratio": "ratio", "exponent": "exponent",
             "theory": "theory", "max_rel_dev": "max_rel_dev", "auc": "AUC"}
    # The names are fields of several kinds' results (a kind without one shows none).
    r = result_of(check)
    out = [f"{names[k]}={fmt(r.get(k))}" for k in HEADLINE if r.get(k) is not None]
    if r.get("exponent") is not None and r.get("ci_low") is not None:
        i = next(j for j, s in enumerate(out) if s.startswith("exponent="))
        out.insert(i + 1, f"[{fmt(r.get('ci_low'), 3)}, {fmt(r.get('ci_high'), 3)}]")
    return ", ".join(out)


def run_command_line(rep: Mapping[str, Any]) -> str:
    """The ``dpverify run`` command that regenerates a report.

    Suites that make up every ``*.toml`` of one folder are named by the folder.

    Examples
    --------
    >>> run_command_line({"scale": "thorough", "suites": [{"path": "a.toml", "seed": 0}]})
    'dpverify run a.toml --scale thorough'
    """
    paths = [str(s.get("path")) for s in rep.get("suites") or []]
    parents = {str(Path(p).parent) for p in paths}
    args: list[str] = paths
    if len(parents) == 1 and len(paths) > 1:
        folder = Path(next(iter(parents)))
        if folder.is_dir() and {str(p) for p in sorted(folder.rglob("*.toml"))} == set(paths):
            args = [str(folder)]
    return shlex.join(["dpverify", "run", *args, "--scale", str(rep.get("scale", "quick"))])
