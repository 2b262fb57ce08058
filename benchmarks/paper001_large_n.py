"""Paper 001's headline at the n where it can show: Theorem 6.1 against Zhang et al. on a GPU.

The rate checks of suites/papers/001.toml stay on x0's plateau at the n two cores afford
(their register entries give the arithmetic: the single-pass bound with constants 1 falls
below half the start's stationarity only from n ~ 1.5e6 at d = 4, eps = 0.5). This script
runs the two single-pass algorithms of the comparison with the harness's own parameter
rules, batched over seeds, grid points, dimensions and both algorithms in one loop of
T = n/2 sequential steps on one GPU, and measures Goldstein (2 alpha)-stationarity of the
population F at x_out (dpverify.checks.rates.goldstein, as the rate checks do):

* ``kornowski``: Algorithms 2 + 5 (Theorem 6.1, first order: the sample complexity of
  Theorem 3.1 with gradients; Theorem 3.1's zero-order m of ~1e8 function values per
  record and step is out of reach), the sound variant of algorithms/paper001/single_pass.py:
  schedule ``settings.single_pass_schedule``, projection radii ``settings.sound_radii``
  with Lemma 6.4's m (uncapped), node noise ``settings.sound_tree_noise``, eta from
  ``settings.single_pass_g1``;
* ``zhang``: the reconstructed baseline of algorithms/paper001/baseline_zhang.py (zero
  order, m = d coupled directions, worst-case sensitivity), its schedule, radii and G1.

Both on the amplitude problem (P1, f = ||<a, x>| - b|, records of unit norm) drawn by
``algorithms.paper001.problems.make_problem``. Estimators are sampled exactly in law but
cheaply: a first-order estimate of a GLM is a (1/m) sum of dphi(<a, z> + t_j, b) a with t_j
the 1-D marginal of the ball, so the mean of m gradients is a * (2 Binomial(m, P+) / m - 1)
with P+ from the marginal's CDF (one binomial draw per record and step, whatever m);
the zero-order baseline's m = d directions are drawn in full. The tree mechanism is the
dyadic tree of dpverify.mechanisms.tree (a fresh tree each period, node (level b, index p >> b)).

What it reports, per algorithm, d and n: the mean stationarity over seeds with its
standard error, the start's (trivial) value, and per algorithm and d the fitted n-slope over
the points below half the start (the window the rate checks use), with the sample
complexity ratio n_zhang / n_kornowski at a common beta where both curves reach it.

Two steps. The plan (every row's schedule and PLD-calibrated noise) needs dp-accounting and
is computed where it is installed; the GPU run needs numpy, scipy and torch only:

    python benchmarks/paper001_large_n.py --plan-out benchmarks/paper001_large_n_plan.json \
        [--n 1e4 3e4 1e5 3e5] [--d 4 16] [--seeds 8]
    python benchmarks/paper001_large_n.py [--budget-s 270] [--json out.json]

The committed plan is the default grid (n = 1e4 .. 3e5, d = 4 and 16, 8 seeds, eps = 0.5).
On one H100 the run takes about 5 minutes: the loop stops at ``--budget-s`` and reports
the grid points it completed. A CPU smoke test: plan ``--n 400 2000 --d 3 8 --seeds 2``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PLAN = Path(__file__).with_name("paper001_large_n_plan.json")
ALPHA, EPS, DELTA, GAMMA = 0.1, 0.5, 1e-5, 0.01


def _module(name: str, rel: str) -> Any:
    """A module of this repository loaded from its file, without its package's __init__:
    the GPU machine has numpy, scipy and torch but not dp-accounting, which the packages
    import (the plan, computed where it is installed, carries what needs it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def tree_levels(length: int) -> int:
    """floor(log2 length) + 1, as dpverify.mechanisms.tree.tree_levels."""
    return int(length).bit_length()
ALGOS = ("kornowski", "zhang")


@dataclass
class Row:
    """One run: an algorithm at (d, n, seed) with its schedule and noise."""

    algo: str
    d: int
    n: int
    seed: int
    T: int
    D: float
    Sigma: int
    M: int
    m: int
    sigma: float
    R1: float
    R2: float
    eta: float


def schedule(algo: str, d: int, n: int, L: float, Phi: float) -> dict[str, Any]:
    """The harness's own rules for one (algorithm, d, n) (needs dp-accounting: PLD)."""
    from algorithms.paper001 import baseline_zhang as zb
    from algorithms.paper001 import settings as st

    p = {"alpha": ALPHA, "epsilon": EPS, "delta": DELTA}
    if algo == "kornowski":
        s = st.single_pass_schedule(p, L, Phi, n, d, first_order=True)
        # Lemma 6.4's m with its constant explicit: the projection slack u (Pinelis, b = 2L)
        # at the notes' error target u2 = H_alpha D, so R2 = 4 H_alpha D
        H = L * st.smoothing_constant(d) / ALPHA
        m = max(s.m_theorem, math.ceil(8.0 * L**2 * math.log(2.0 / GAMMA) / (H * s.D) ** 2))
        s = st.SinglePassSchedule(s.T, s.D, s.Sigma, s.B1, s.B2, s.M, m, s.m_theorem)
        R1, R2 = st.sound_radii(L, s.D, ALPHA, d, s.m, GAMMA, first_order=True)
        _, _, sigma = st.sound_tree_noise(R1, R2, s, EPS, DELTA)
        g1 = st.single_pass_g1(L, s, sigma, ALPHA, d, first_order=True)
    else:
        s = zb.zhang_schedule(p, L, Phi, n, d)
        R1, R2 = zb.zhang_radii(L, s.D, ALPHA, d)
        _, _, sigma = st.sound_tree_noise(R1, R2, s, EPS, DELTA)
        g1 = zb.zhang_g1(L, s, sigma, ALPHA, d)
    return {"T": s.T, "D": s.D, "Sigma": s.Sigma, "M": s.M, "m": s.m, "sigma": sigma,
            "R1": R1, "R2": R2, "eta": s.D / (g1 * math.sqrt(s.M))}


def ball_marginal_cdf(d: int, grid: int = 20001) -> tuple[np.ndarray, np.ndarray]:
    """(t, F(t)) on [-1, 1]: the CDF of <a, y> for y uniform in the unit ball of R^d."""
    t = np.linspace(-1.0, 1.0, grid)
    dens = (1.0 - t**2) ** ((d - 1) / 2.0)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(t))])
    return t, cdf / cdf[-1]


class Batch:
    """Every row of the run as tensors (rows, ...) on one device."""

    def __init__(self, rows: list[Row], data: dict[tuple[int, int], Any], x0: dict, torch: Any,
                 device: str) -> None:
        self.torch, self.dev, self.rows = torch, device, rows
        f64 = torch.float64
        R = len(rows)
        self.dmax = max(r.d for r in rows)
        self.n_max = max(r.n for r in rows)
        col = lambda k, dt=f64: torch.tensor([getattr(r, k) for r in rows], dtype=dt,  # noqa: E731
                                             device=device)
        self.T, self.Sigma, self.M = (col(k, torch.int64) for k in ("T", "Sigma", "M"))
        self.m = col("m")
        self.D, self.sigma, self.R1, self.R2, self.eta = (col(k) for k in
                                                          ("D", "sigma", "R1", "R2", "eta"))
        self.dd = col("d")
        self.zo = torch.tensor([r.algo == "zhang" for r in rows], device=device)
        self.mask = (torch.arange(self.dmax, device=device)[None, :] < self.dd[:, None]).to(f64)
        A = torch.zeros((R, self.n_max, self.dmax), dtype=f64, device=device)
        b = torch.zeros((R, self.n_max), dtype=f64, device=device)
        x = torch.zeros((R, self.dmax), dtype=f64, device=device)
        for i, r in enumerate(rows):
            X, y = data[(r.d, r.seed)]
            A[i, : r.n, : r.d] = torch.as_tensor(X[: r.n], device=device)
            b[i, : r.n] = torch.as_tensor(y[: r.n], device=device)
            x[i, : r.d] = torch.as_tensor(x0[(r.d, r.seed)], device=device)
        self.A, self.b, self.x0 = A, b, x
        self.levels = max(tree_levels(r.Sigma) for r in rows)
        tables = {d: ball_marginal_cdf(d) for d in {r.d for r in rows}}
        self.tt = torch.as_tensor(np.stack([tables[r.d][0] for r in rows]), device=device)
        self.FF = torch.as_tensor(np.stack([tables[r.d][1] for r in rows]), device=device)
        self.zo_rows = torch.nonzero(self.zo).squeeze(1)
        self.fo_rows = torch.nonzero(~self.zo).squeeze(1)


def _cdf_at(batch: Batch, ri: Any, u: Any) -> Any:
    """F_d(u / alpha) for rows ``ri`` (u: len(ri) x k): the ball marginal's CDF."""
    torch = batch.torch
    t, F = batch.tt[ri], batch.FF[ri]
    v = (u / ALPHA).clamp(-1.0, 1.0).contiguous()
    idx = torch.searchsorted(t, v).clamp(1, t.shape[1] - 1)
    t0, t1 = t.gather(1, idx - 1), t.gather(1, idx)
    F0, F1 = F.gather(1, idx - 1), F.gather(1, idx)
    return F0 + (v - t0) / (t1 - t0) * (F1 - F0)


def _sample_marginal(batch: Batch, ri: Any, k: int, gen: Any) -> Any:
    """alpha <a, y> for y uniform in the unit ball of each row's dimension, (len(ri), k)."""
    torch = batch.torch
    t, F = batch.tt[ri], batch.FF[ri]
    u = torch.rand((ri.numel(), k), dtype=torch.float64, device=batch.dev, generator=gen)
    idx = torch.searchsorted(F, u).clamp(1, F.shape[1] - 1)
    t0, t1 = t.gather(1, idx - 1), t.gather(1, idx)
    F0, F1 = F.gather(1, idx - 1), F.gather(1, idx)
    return ALPHA * (t0 + (u - F0) / (F1 - F0).clamp_min(1e-300) * (t1 - t0))


def _dphi(u: Any, b: Any, torch: Any) -> Any:
    return torch.sign(torch.abs(u) - b) * torch.sign(u)  # amplitude: f = ||u| - b|


def _p_plus(batch: Batch, ri: Any, c: Any, b: Any) -> Any:
    """P(dphi(c_j + t, b) = +1) for the ball marginal t: u = c + t > b, or -b < u < 0.

    c (r, k), b (r, 1); one CDF evaluation for all 3 k breakpoints.
    """
    torch = batch.torch
    k = c.shape[1]
    F = _cdf_at(batch, ri, torch.cat([b - c, -c, -b - c], dim=1))
    return (1.0 - F[:, :k] + F[:, k:2 * k] - F[:, 2 * k:]).clamp(0.0, 1.0)


def _zo_estimate(batch: Batch, ri: Any, z: Any, z_old: Any, A: Any, b: Any, gen: Any) -> Any:
    """Zhang et al.'s estimates for rows ``ri``: m = d sphere directions per record, the same
    at z and z_old. A (r, k, dmax), b (r, k); returns (r, k, dmax), a difference when
    ``z_old`` is given. (d / (2 alpha)) (1/m) sum_j ... with m = d: a factor 1 / (2 alpha).
    """
    torch = batch.torch
    r, k, dm = A.shape
    mask = batch.mask[ri]
    g = torch.randn((r, k, dm, dm), dtype=torch.float64, device=batch.dev, generator=gen)
    g = g * mask[:, None, None, :]
    y = g / g.norm(dim=-1, keepdim=True).clamp_min(1e-300)  # (r, k, j, d)
    ya = torch.einsum("rkjd,rkd->rkj", y, A)

    def diff(zz: Any) -> Any:
        c = torch.einsum("rd,rkd->rk", zz, A)[..., None]
        f = lambda u: torch.abs(torch.abs(u) - b[..., None])  # noqa: E731
        return f(c + ALPHA * ya) - f(c - ALPHA * ya)

    delta = diff(z) if z_old is None else diff(z) - diff(z_old)
    delta = delta * mask[:, None, :]  # directions j >= d are not drawn
    return torch.einsum("rkj,rkjd->rkd", delta, y) / (2.0 * ALPHA)


def _clip(v: Any, radius: Any, torch: Any) -> Any:
    nrm = v.norm(dim=-1, keepdim=True)
    return v * torch.where(nrm > radius, radius / nrm.clamp_min(1e-300), torch.ones_like(nrm))


def _period_start(batch: Batch, ri: Any, z: Any, cursor: Any, gen: Any) -> Any:
    """g_t at a period start for rows ``ri``: the mean of B1 = Sigma records' estimates."""
    torch = batch.torch
    k = int(batch.Sigma[ri].max())
    offs = torch.arange(k, device=batch.dev)
    idx = (cursor[ri][:, None] + offs[None, :]).clamp(max=batch.n_max - 1)
    valid = (offs[None, :] < batch.Sigma[ri][:, None]).to(torch.float64)
    A, b = batch.A[ri[:, None], idx], batch.b[ri[:, None], idx]
    zr = z[ri]
    # Alg. 5 line 4: one ball point per record
    c = torch.einsum("rd,rkd->rk", zr, A) + _sample_marginal(batch, ri, k, gen)
    fo = _dphi(c, b, torch)[..., None] * A
    zo = _clip(_zo_estimate(batch, ri, zr, None, A, b, gen), batch.R1[ri][:, None, None],
               torch)
    e = torch.where(batch.zo[ri][:, None, None], zo, fo)
    return (e * valid[..., None]).sum(1) / batch.Sigma[ri][:, None]


def _difference(batch: Batch, z: Any, z_prev: Any, cursor: Any, gen: Any) -> Any:
    """est(z_t) - est(z_{t-1}) of the record at each row's cursor, projected (B2 = 1)."""
    torch = batch.torch
    R = len(batch.rows)
    ar = torch.arange(R, device=batch.dev)
    cur = cursor.clamp(max=batch.n_max - 1)
    A, b = batch.A[ar, cur], batch.b[ar, cur]
    out = torch.zeros_like(z)
    fo, zo = batch.fo_rows, batch.zo_rows
    if fo.numel():  # the mean of m gradients in law: a (2 Binomial(m, P+) / m - 1)
        c = torch.stack([(z[fo] * A[fo]).sum(-1), (z_prev[fo] * A[fo]).sum(-1)], dim=1)
        pp = _p_plus(batch, fo, c, b[fo][:, None])
        m = batch.m[fo][:, None].expand(-1, 2).contiguous()
        kk = torch.binomial(m, pp.contiguous(), generator=gen)
        k1, k2, m = kk[:, 0], kk[:, 1], m[:, 0]
        R2 = batch.R2[fo]
        out[fo] = (2.0 * (k1 - k2) / m).clamp(-R2, R2)[:, None] * A[fo]  # ||a|| = 1
    if zo.numel():
        est = _zo_estimate(batch, zo, z[zo], z_prev[zo], A[zo][:, None], b[zo][:, None], gen)
        out[zo] = _clip(est[:, 0], batch.R2[zo][:, None], torch)
    return out


def run(batch: Batch, budget_s: float, seed: int) -> tuple[Any, int, float]:
    """The O2NC loop for every row; returns x_out (rows, dmax), the steps run, seconds."""
    torch = batch.torch
    gen = torch.Generator(device=batch.dev)
    gen.manual_seed(seed)
    R, dm, dev, f64 = len(batch.rows), batch.dmax, batch.dev, torch.float64
    x = batch.x0.clone()
    delta = torch.zeros_like(x)
    z_prev = x.clone()
    g = torch.zeros_like(x)
    cursor = torch.zeros(R, dtype=torch.int64, device=dev)
    lv = torch.arange(batch.levels, device=dev)
    node_id = torch.full((R, batch.levels), -1, dtype=torch.int64, device=dev)
    node = torch.zeros((R, batch.levels, dm), dtype=f64, device=dev)
    n_blocks = batch.T // batch.M
    pick = (torch.rand(R, dtype=f64, device=dev, generator=gen) * n_blocks).long()
    acc = torch.zeros_like(x)
    T_max = int(batch.T.max())
    start, t = time.time(), 0
    for t in range(1, T_max + 1):
        alive = t <= batch.T
        s = torch.rand((R, 1), dtype=f64, device=dev, generator=gen)
        x_new, z = x + delta, x + s * delta  # Alg. 2 lines 4-6
        p = (t - 1) % batch.Sigma + 1
        first = p == 1
        est = g + _difference(batch, z, z_prev, cursor, gen)  # Alg. 5 line 13
        ri = torch.nonzero(first & alive).squeeze(1)
        if ri.numel():
            est[ri] = _period_start(batch, ri, z, cursor, gen)  # lines 3-5
        g = est
        cursor = cursor + torch.where(first, batch.Sigma, torch.ones_like(cursor)) * alive
        # the dyadic tree of the period: fresh node noise where a node is first used
        node_id = torch.where(first[:, None], torch.full_like(node_id, -1), node_id)
        bits = ((p[:, None] >> lv[None, :]) & 1).bool()
        q = p[:, None] >> lv[None, :]
        fresh = bits & (q != node_id)
        noise = torch.randn(node.shape, dtype=f64, device=dev, generator=gen)
        node = torch.where(fresh[..., None],
                           noise * batch.sigma[:, None, None] * batch.mask[:, None, :], node)
        node_id = torch.where(fresh, q, node_id)
        released = g + (node * bits[..., None].to(f64)).sum(1)  # line 15
        delta_new = _clip(delta - batch.eta[:, None] * released, batch.D[:, None], torch)
        live = alive[:, None]
        acc = acc + (live & ((t - 1) // batch.M == pick)[:, None]).to(f64) * z
        x = torch.where(live, x_new, x)
        delta = torch.where(live, delta_new, delta)  # line 8
        z_prev = torch.where(live, z, z_prev)
        if t % 2000 == 0 and time.time() - start > budget_s:
            break
    if dev.startswith("cuda"):
        torch.cuda.synchronize()
    return acc / batch.M[:, None], t, time.time() - start


def stationarity(gold: Any, problem: Any, x: np.ndarray, samples: int = 256) -> float:
    """Upper bound on ||dbar_{2 alpha} F(x)|| with the population sample, as the rate checks'
    goldstein metric (dpverify.checks.rates.goldstein) computes it, for the amplitude loss."""
    pop = problem.info["population"]
    pts = np.concatenate([x[None], gold.sample_ball(np.random.default_rng(0), x, 2 * ALPHA,
                                                    samples)])
    u = pts @ pop.X.T
    grads = (np.sign(np.abs(u) - pop.y[None]) * np.sign(u)) @ pop.X / pop.n
    return float(np.linalg.norm(gold.min_norm_in_hull(grads)))


def make_plan(ns: list[int], ds: list[int], seeds: int) -> dict[str, Any]:
    """Every row's schedule and noise, by the harness's rules (run where dp-accounting is).

    Phi = x0_norm + 2 = 3 and L = 1 for the amplitude problem (make_problem's public
    constants, the same for every seed)."""
    rows = []
    for algo in ALGOS:
        for d in ds:
            for n in ns:
                rows.append({"algo": algo, "d": d, "n": n, **schedule(algo, d, n, 1.0, 3.0)})
    return {"n": ns, "d": ds, "seeds": seeds, "alpha": ALPHA, "epsilon": EPS,
            "delta": DELTA, "gamma": GAMMA, "rows": rows}


def slope(ns: list[float], ys: list[float], start: float) -> float | None:
    """log-log slope over the points below half the start's stationarity (the window)."""
    pts = [(n, y) for n, y in zip(ns, ys, strict=True) if 0 < y < 0.5 * start]
    if len(pts) < 2:
        return None
    return float(np.polyfit(np.log([p[0] for p in pts]), np.log([p[1] for p in pts]), 1)[0])


def _setup(plan: dict[str, Any], n_population: int) -> tuple[dict, dict, dict, list[Row]]:
    """Each (d, seed)'s problem (make_problem, n = the largest n) and every run's row."""
    problems_mod = _module("p001_problems", "algorithms/paper001/problems.py")
    seeds = int(plan["seeds"])
    problems, data, x0 = {}, {}, {}
    for d in plan["d"]:
        for sd in range(seeds):
            prob = problems_mod.make_problem(
                {"problem": "amplitude", "n": max(plan["n"]), "d": d,
                 "n_population": n_population}, np.random.default_rng([sd, d]))
            problems[(d, sd)] = prob
            data[(d, sd)] = (prob.data.X, prob.data.y)
            x0[(d, sd)] = prob.public["x0"]
    fields = ("T", "D", "Sigma", "M", "m", "sigma", "R1", "R2", "eta")
    rows = [Row(r["algo"], r["d"], r["n"], sd, **{k: r[k] for k in fields})
            for r in plan["rows"] for sd in range(seeds)]
    return problems, data, x0, rows


def _report(plan: dict[str, Any], rows: list[Row], problems: dict, x0: dict,
            xout: np.ndarray, steps: int, results: dict[str, Any]) -> None:
    """Stationarity per (algorithm, d, n), printed and added to ``results``."""
    gold = _module("p001_goldstein", "dpverify/checks/rates/goldstein.py")
    seeds = int(plan["seeds"])
    for algo in ALGOS:
        for d in plan["d"]:
            start = float(np.mean([stationarity(gold, problems[(d, sd)], x0[(d, sd)])
                                   for sd in range(seeds)]))
            curve = []
            for n in plan["n"]:
                idx = [i for i, r in enumerate(rows) if (r.algo, r.d, r.n) == (algo, d, n)]
                r0 = rows[idx[0]]
                done = r0.T <= steps
                vals = ([stationarity(gold, problems[(d, rows[i].seed)], xout[i, :d])
                         for i in idx] if done else [])
                pt = {"algo": algo, "d": d, "n": n, "T": r0.T, "Sigma": r0.Sigma, "m": r0.m,
                      "sigma": r0.sigma, "completed": done, "start": start,
                      "mean": float(np.mean(vals)) if vals else None,
                      "se": float(np.std(vals, ddof=1) / math.sqrt(len(vals)))
                      if len(vals) > 1 else None}
                results["points"].append(pt)
                curve.append(pt)
                print(f"{algo:9s} d={d:3d} n={n:8d} T={r0.T:7d} Sigma={r0.Sigma:5d} "
                      f"m={r0.m:.3g} sigma={r0.sigma:.3g}: "
                      + (f"beta = {pt['mean']:.4f} +- {pt['se'] or 0:.4f} (start {start:.3f})"
                         if done else "not reached in the budget"), flush=True)
            done_pts = [p for p in curve if p["mean"] is not None]
            sl = slope([p["n"] for p in done_pts], [p["mean"] for p in done_pts], start)
            results["slopes"].append({"algo": algo, "d": d, "slope_n": sl})
            print(f"  {algo} d={d}: n-slope below half the start: {sl}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plan-out", default=None, help="write the plan (schedules) and exit")
    ap.add_argument("--plan", default=str(PLAN), help="the plan to run")
    ap.add_argument("--n", type=float, nargs="+", default=[1e4, 3e4, 1e5, 3e5])
    ap.add_argument("--d", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--budget-s", type=float, default=270.0)
    ap.add_argument("--n-population", type=int, default=20000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.plan_out:
        plan = make_plan(sorted(int(v) for v in args.n), args.d, args.seeds)
        Path(args.plan_out).write_text(json.dumps(plan, indent=1) + "\n")
        return 0
    import torch

    plan = json.loads(Path(args.plan).read_text())
    device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.time()
    problems, data, x0, rows = _setup(plan, args.n_population)
    setup_s = time.time() - t0
    xout, steps, loop_s = run(Batch(rows, data, x0, torch, device), args.budget_s, seed=0)
    results: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if device == "cuda"
                               else "cpu", "steps_run": steps, "loop_seconds": loop_s,
                               "setup_seconds": setup_s, "plan": plan, "points": [],
                               "slopes": []}
    _report(plan, rows, problems, x0, xout.cpu().numpy(), steps, results)
    results["total_seconds"] = time.time() - t0
    print(f"device {results['device']}: {steps} steps in {loop_s:.1f}s, total "
          f"{results['total_seconds']:.1f}s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
