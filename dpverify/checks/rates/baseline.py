"""Comparison against a saved baseline: flag a slope that drifts between versions.

A baseline is a previous ``dpverify rates --json`` file, or a ``report.json`` of
``dpverify run`` whose ``rate`` checks carry ``parameter``, ``exponent``, ``ci_low`` and
``ci_high`` in their metrics. A fitted exponent *drifts* when it leaves the baseline's
interval for the same target and parameter (with a fixed root seed an unchanged
implementation reproduces its exponent exactly, so any move is the code's).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dpverify.core.errors import InputError


def load_baseline(path: str | Path) -> dict[tuple[str, str], dict[str, float]]:
    """``{(target, parameter): {"exponent", "ci_low", "ci_high"}}`` from a saved file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "b.json"
    >>> _ = p.write_text(json.dumps({"schema": "dpverify-rates/1", "target": "t", "fits": [
    ...     {"parameter": "n", "exponent": -2.0, "ci_low": -2.1, "ci_high": -1.9}]}))
    >>> load_baseline(p)[("t", "n")]["ci_high"]
    -1.9
    """
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"no baseline file {str(path)!r}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"baseline {str(path)!r} is not JSON: {e}") from None
    out: dict[tuple[str, str], dict[str, float]] = {}

    def add(target: str, rec: Mapping[str, Any]) -> None:
        try:
            out[(str(target), str(rec["parameter"]))] = {
                k: float(rec[k]) for k in ("exponent", "ci_low", "ci_high")}
        except (KeyError, TypeError, ValueError):
            pass  # a record without a fitted exponent (e.g. an inconclusive empty fit)

    records = data if isinstance(data, list) else [data]
    for doc in records:
        if not isinstance(doc, Mapping):
            continue
        if "fits" in doc:  # a rates file
            for rec in doc["fits"]:
                add(doc.get("target", ""), rec)
        for chk in doc.get("checks", []) or []:  # a suite report
            if chk.get("kind") == "rate":
                m = chk.get("metrics", {})
                add(chk.get("target", ""), m)
                for sub in m.get("fits", []) or []:
                    add(chk.get("target", ""), sub)
    if not out:
        raise InputError(f"baseline {str(path)!r} holds no fitted exponents")
    return out


def compare(fits: Iterable[Mapping[str, Any]], target: str,
            baseline: Mapping[tuple[str, str], Mapping[str, float]]) -> list[dict[str, Any]]:
    """One record per fit that has a baseline: drifted or not, and by how much.

    Examples
    --------
    >>> base = {("t", "n"): {"exponent": -2.0, "ci_low": -2.1, "ci_high": -1.9}}
    >>> compare([{"parameter": "n", "exponent": -1.5}], "t", base)[0]["drifted"]
    True
    """
    out = []
    for f in fits:
        b = baseline.get((target, str(f["parameter"])))
        if b is None:
            continue
        p = float(f["exponent"])
        drifted = not (math.isfinite(p) and b["ci_low"] <= p <= b["ci_high"])
        out.append({"parameter": f["parameter"], "exponent": p,
                    "baseline_exponent": b["exponent"],
                    "baseline_interval": [b["ci_low"], b["ci_high"]],
                    "change": p - b["exponent"], "drifted": drifted})
    return out
