"""``dpverify rates TARGET``: sweep parameters, fit exponents, judge them against the theorem.

Examples (shell)::

    dpverify rates noisy_gd:sound --vary n=250,500,1000,2000,4000 --fixed T=100 --seeds 20
    dpverify rates noisy_gd:planted_noise_grows_sqrt_n --vary n=250,500,1000,2000
    dpverify rates mymod:f --vary n=100,200,400,800 --theory n=-1 --plot rate.png
    dpverify rates noisy_gd:sound --vary n --json rates.json --baseline old_rates.json
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dpverify.checks.rates.baseline import compare, load_baseline
from dpverify.checks.rates.plots import plot_fits
from dpverify.checks.rates.theory import SIDES, evaluate
from dpverify.checks.rates.verify import RateOptions, verify_rates
from dpverify.cli.app import parse_params, positive_int
from dpverify.core.errors import InputError
from dpverify.execution.experiment import Experiment
from dpverify.report.io import write_json_atomic
from dpverify.stats.rate_fit import MODELS


def configure_parser(p: argparse.ArgumentParser) -> None:
    """Add the options of ``dpverify rates`` (shared options come from the CLI)."""
    p.add_argument("target", help="name:variant, or module:function f(**params, seed) -> "
                                  "utility (a file path ending in .py works as the module)")
    p.add_argument("--vary", action="append", default=[], metavar="K=V1,V2,...",
                   help="sweep K over these values (repeatable; K alone: a log2 grid around "
                        "its current value). Default: every parameter the theorem names")
    p.add_argument("--fixed", action="append", default=[], metavar="K=V",
                   help="hold a parameter at a value (repeatable; same as --param; "
                        "default: the algorithm's own, or for a function n=100, d=2, "
                        "epsilon=1, delta=1e-5)")
    p.add_argument("--seeds", type=positive_int, default=None,
                   help="runs per grid point, batched as trials (default 20; --trials too)")
    p.add_argument("--theory", action="append", default=[], metavar="K=P",
                   help="theorem exponent of K, a parameter the grid varies (repeatable, "
                        "e.g. n=-1 or n=-2/3); replaces the declared exponents; required "
                        "for module:function targets (default: the declared theorem)")
    p.add_argument("--log-factor", action="append", default=None, metavar="EXPR",
                   help="log factor of the theorem to divide out, e.g. 'log(n)' (repeatable; "
                        "default: the declared theorem's)")
    p.add_argument("--regime", action="append", default=None, metavar="EXPR",
                   help="where the theorem holds, e.g. 'n*epsilon >= sqrt(d)' (repeatable; "
                        "default: the declared theorem's)")
    p.add_argument("--sided", choices=list(SIDES), default=None,
                   help="upper: an upper bound (default); two: a tight rate")
    p.add_argument("--metric", default=None, help="utility metric (default: the theorem's)")
    p.add_argument("--axis", choices=["auto", "param", "gdp"], default="auto",
                   help="for epsilon/rho sweeps: regress on the ledger's GDP mu (auto/gdp)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level")
    p.add_argument("--tolerance", type=float, default=0.10,
                   help="slack on the theory exponent before a worse rate fails")
    p.add_argument("--max-width", type=float, default=0.5,
                   help="widest interval that still decides")
    p.add_argument("--boot", type=positive_int, default=2000, help="bootstrap resamples")
    p.add_argument("--model", choices=list(MODELS), default="auto",
                   help="power (log-log), offset (with a floor) or auto")
    p.add_argument("--rate", default=None, metavar="EXPR",
                   help="the theorem's full bound, every term (e.g. '(sqrt(d)/n)**(1/3) + "
                        "(d/(n*epsilon))**(1/2)'): regress on 1/EXPR, theory exponent -1 (default: "
                        "fit one exponent per parameter)")
    p.add_argument("--saturation", type=float, default=None, metavar="S",
                   help="window: leave out points whose mean is above S times the metric "
                        "at the start (the trivial value; default: none left out)")
    p.add_argument("--control", action="append", default=[], metavar="K=V",
                   help="window: a non-private control, these parameter overrides on the "
                        "same grid (repeatable, e.g. epsilon=1e6; default: no control)")
    p.add_argument("--control-ratio", type=float, default=10.0, metavar="R",
                   help="window: leave out points less than R times the control's mean")
    p.add_argument("--no-crn", action="store_true",
                   help="independent randomness per grid point (default: common random "
                        "numbers)")
    p.add_argument("--plot", default=None, metavar="FILE",
                   help="write a log-log PNG here (default: not drawn)")
    p.add_argument("--baseline", default=None, metavar="FILE",
                   help="a previous rates JSON (or report.json): flag exponents that drift "
                        "outside its intervals (default: no comparison)")


def _parse_value(raw: str) -> Any:
    return parse_params([f"v={raw.strip()}"])["v"]


def parse_vary(items: list[str]) -> dict[str, list[Any]] | list[str] | None:
    """``["n=100,200", "d"]`` -> grids; names alone ask for default grids.

    Examples
    --------
    >>> parse_vary(["n=100,200,400"])
    {'n': [100, 200, 400]}
    >>> parse_vary(["n", "d"])
    ['n', 'd']
    """
    if not items:
        return None
    grids: dict[str, list[Any]] = {}
    names: list[str] = []
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not key:
            raise InputError(f"--vary expects K=V1,V2,... or K, got {item!r}")
        if not sep:
            names.append(key)
            continue
        vals = [_parse_value(v) for v in raw.split(",") if v.strip()]
        grids[key] = vals
    if grids and names:
        raise InputError("give every --vary with values, or none (default grids)")
    return grids or names


def parse_theory(items: list[str]) -> dict[str, float] | None:
    """``["n=-2/3", "d=1"]`` -> exponents (fractions allowed).

    Examples
    --------
    >>> parse_theory(["n=-2/3,d=1/3"])
    {'n': -0.6666666666666666, 'd': 0.3333333333333333}
    """
    out: dict[str, float] = {}
    for item in items:
        for part in item.split(","):
            key, sep, raw = part.partition("=")
            if not sep or not key.strip():
                raise InputError(f"--theory expects K=P, got {part!r}")
            out[key.strip()] = float(evaluate(raw, {}))
    return out or None


def run_command(args: argparse.Namespace) -> int:
    """Run ``dpverify rates``; 0 when every exponent passes and none drifted, else 1."""
    fixed = {**parse_params(args.param), **parse_params(args.fixed)}
    baseline = load_baseline(args.baseline) if args.baseline else None

    def progress(label: str, frac: float) -> None:
        if not args.quiet:
            print(f"  {label}", file=sys.stderr, flush=True)

    vary = parse_vary(args.vary)
    options = RateOptions(
        vary=tuple(vary) if isinstance(vary, list) else vary, seeds=args.seeds,
        metric=args.metric, theory=parse_theory(args.theory),
        log_factors=None if args.log_factor is None else tuple(args.log_factor),
        regime=None if args.regime is None else tuple(args.regime), sided=args.sided,
        axis=args.axis, common_random_numbers=not args.no_crn,
        control=parse_params(args.control) or None, rate=args.rate,
        confidence=args.confidence, tolerance=args.tolerance, max_width=args.max_width,
        n_boot=args.boot, model=args.model, saturation=args.saturation,
        control_ratio=args.control_ratio)
    exp = Experiment(args.target, fixed or None, seed=args.seed, scale=args.scale,
                     backend=args.backend, trials=args.trials, progress=progress)
    res = verify_rates(exp, options)
    record = res.to_dict()
    if baseline is not None:
        res.drift = compare(record["fits"], res.target, baseline)
        record["drift"] = res.drift
    _print(res)
    if args.plot:
        out = plot_fits(res.fits, args.plot, title=res.target, ylabel=res.theory.quantity)
        if out is not None:
            print(f"plot: {out}")
    if args.json_path:
        write_json_atomic(args.json_path, record)
    drifted = any(d["drifted"] for d in res.drift)
    return 0 if res.verdict.value == "PASS" and not drifted else 1


def _print(res: Any) -> None:
    th = res.theory
    rate = " ".join(f"{k}^{v:g}" for k, v in th.exponents.items())
    logs = "".join(f" * {e}" for e in th.log_factors)
    print(f"{res.target}: {th.quantity} <= C {rate}{logs} ({th.sided}"
          f"{', ' + th.source if th.source else ''})")
    for f in res.fits:
        print(f"  {f.message}")
        for flag in f.flags:
            print(f"    note: {flag}")
        print(f"    {f.parameter:>10} {'median':>11} {'mean':>11}")
        for v, md, mn, why in zip(f.values, f.medians, f.means, f.excluded, strict=True):
            print(f"    {v:>10g} {md:>11.4g} {mn:>11.4g}{f'  ({why})' if why else ''}")
    for d in res.drift:
        word = "DRIFTED" if d["drifted"] else "steady"
        lo, hi = d["baseline_interval"]
        print(f"  baseline {d['parameter']}: {word}: {d['exponent']:.3f} vs "
              f"{d['baseline_exponent']:.3f} [{lo:.3f}, {hi:.3f}]")
    print(f"verdict: {res.verdict.value}")
