"""What any test could reach on SVT1, SVT2 and RNM1 from a given number of runs: the exact ceiling.

Both output one of a few outcomes whose law on a given input is an integral. Lyu, Su and
Li's SVT1 (PVLDB 10(6) 2017, Algorithm 1; ``algorithms.catalogue.svt1`` with
c = 1, 10 queries, epsilon = 0.1) outputs the index of its first answer above the noisy
threshold, or none: 11 outcomes. Their probabilities on each of StatDP's input patterns
follow by integrating over the threshold's noise rho ~ Lap(1/eps1): given rho, the
queries are independent, P(first above = i | rho) = p_i prod_{j<i} (1 - p_j) with
p_j = P(a_j + nu >= T + rho), nu ~ Lap(2c/eps2) (the grid noise of the catalogue is
Laplace to within 2^-10 of the scale, far below what 10^7 runs resolve). Report noisy
max (Dwork and Roth 2014, Claim 3.9; ``algorithms.catalogue.rnm1``, 5 queries, Laplace
noise of scale 2/epsilon) outputs the index of the largest noisy answer:
P(i) = integral of f(x - a_i) prod_{j != i} F(x - a_j) dx.

For each pattern and orientation, every event (a union of outcomes, taken in order of
their likelihood ratio) is bounded as dpverify's conditional statistic would bound it
(``epsilon_lower_bound_conditional``, at its best share of alpha) from its expected counts,
with the event known in advance and all the runs spent on the test: no selection cost, no
sampling luck. The best over events and patterns is the ceiling a test of that many runs
reaches on the median draw. It says whether a figure measured elsewhere with more runs
(DP-Sniper's 0.0858 on SVT1 from 2 x 10^8 runs per dataset) is within reach at 10^7.

Run: ``python benchmarks/ceiling.py --runs 10000000 --confidence 0.9``; ``--family`` looks
beyond the named patterns (answers at a base b, m of them moved up, the rest down); with ``--reach
0.08593 --rows svt2`` it draws the counts of each pattern's best outcome, known in advance,
and says how often its bound reaches that figure (DP-Sniper's, for SVT2).

The same laws stand in for the mechanisms where an audit's choices are studied over many
seeds: ``--search-seeds 1,2,3`` audits ``svt1_law``, ``svt2_law`` (the index of the first
answer above, drawn from the exact law) and ``rnm1_law`` (the index of the noisy maximum) with
the defaults and the ``histogram`` distinguisher at ``--runs`` runs per dataset, and prints
the witness each seed's pair search found and its bound, in a fraction of the mechanisms'
time.
"""

from __future__ import annotations

import argparse
import functools
import sys

import numpy as np
from scipy import stats

from algorithms.catalogue import EPSILON, RNM_QUERIES, SVT_C, SVT_QUERIES
from dpverify.checks.audit import BlackBoxOptions, audit_blackbox, declare_mechanism
from dpverify.core.data import QUERY_PATTERNS, far_distance, query_pair
from dpverify.stats.audit_bounds import RATE_SHARES, epsilon_lower_bound_conditional


def svt_law(answers: np.ndarray, threshold: float, eps1_share: float = 0.5,
            query_scale: float | None = None, grid: int = 200_001) -> np.ndarray:
    """P(first answer above = i), i < k, and P(none above) last, for SVT1 on ``answers``.

    With c = 1, Dwork and Roth's SVT2 has the same law at its own threshold: it redraws
    the threshold only after an answer above, and then stops. Lee and Clifton's SVT4
    (Lyu et al., Algorithm 4) is the same pass with eps1 = epsilon / 4 and answer noise of
    scale 1 / eps2 (``eps1_share``, ``query_scale``)."""
    eps1 = eps1_share * EPSILON
    b_rho = 1.0 / eps1
    b_nu = 2 * SVT_C / ((1.0 - eps1_share) * EPSILON) if query_scale is None else query_scale
    rho = np.linspace(-40 * b_rho, 40 * b_rho, grid)
    weight = stats.laplace.pdf(rho, scale=b_rho)
    weight /= weight.sum()
    out, alive = np.zeros(len(answers) + 1), np.ones_like(rho)
    for i, a in enumerate(answers):
        p = stats.laplace.sf(threshold + rho - a, scale=b_nu)
        out[i] = np.sum(weight * alive * p)
        alive = alive * (1.0 - p)
    out[-1] = np.sum(weight * alive)
    return out


def rnm_law(answers: np.ndarray, grid: int = 200_001) -> np.ndarray:
    """P(the largest noisy answer is answer i), for report noisy max on ``answers``."""
    scale = 2.0 / EPSILON
    x = np.linspace(answers.min() - 40 * scale, answers.max() + 40 * scale, grid)
    cdf = stats.laplace.cdf(x[:, None] - answers[None, :], scale=scale)
    pdf = stats.laplace.pdf(x[:, None] - answers[None, :], scale=scale)
    others = np.prod(cdf, axis=1, keepdims=True) / np.maximum(cdf, 1e-300)
    out = np.sum(pdf * others, axis=0) * (x[1] - x[0])
    return out / out.sum()


# svt1's threshold is 0.5, svt2's and svt4's 1.0 (algorithms.catalogue).
LAWS = {"svt1": (lambda a: svt_law(a, 0.5), SVT_QUERIES),
        "svt2": (lambda a: svt_law(a, 1.0), SVT_QUERIES), "rnm1": (rnm_law, RNM_QUERIES),
        "svt4": (lambda a: svt_law(a, 1.0, 0.25, 1.0 / (0.75 * EPSILON)), SVT_QUERIES)}


@functools.lru_cache(maxsize=64)
def _law_of(row: str, answers: bytes) -> np.ndarray:
    return LAWS[row][0](np.frombuffer(answers))


def _draw(row: str, answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    p = _law_of(row, np.asarray(answers, dtype=float).ravel().tobytes())
    return rng.choice(len(p), size=trials, p=p).astype(float)[:, None]


@declare_mechanism(epsilon=EPSILON, delta=0.0, queries=SVT_QUERIES, relation="componentwise")
def svt1_law(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """SVT1's outcome (the index of the first answer above, k for none) from its exact law."""
    return _draw("svt1", answers, rng, trials)


@declare_mechanism(epsilon=EPSILON, delta=0.0, queries=SVT_QUERIES, relation="componentwise")
def svt2_law(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """SVT2's outcome from its exact law."""
    return _draw("svt2", answers, rng, trials)


@declare_mechanism(epsilon=EPSILON, delta=0.0, queries=RNM_QUERIES, relation="componentwise")
def rnm1_law(answers: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
    """RNM1's outcome (the index of the largest noisy answer) from its exact law."""
    return _draw("rnm1", answers, rng, trials)


def print_search(seeds: list[int], runs: int, confidence: float) -> None:
    """Each seed's witness and bound for the law stand-ins (see the module's docstring)."""
    print(f"seed  row   witness                   bound  ({runs:.3g} runs per dataset, "
          f"confidence {confidence})")
    for seed in seeds:
        for row in ("svt1", "svt2", "rnm1"):
            r = audit_blackbox(f"benchmarks/ceiling.py:{row}_law", BlackBoxOptions(
                trials=runs, seed=seed, confidence=confidence, distinguisher="histogram"))
            print(f"{seed:4d}  {row}  {r.details['pair']:24s}  {r.epsilon_lower:.4f}",
                  flush=True)


def ceiling(p: np.ndarray, q: np.ndarray, runs: int, alpha: float) -> tuple[float, float, int]:
    """The best bound over events ordered by likelihood ratio: (epsilon, P(event), size)."""
    order = np.argsort(-np.log(p / q))
    best = (0.0, 0.0, 0)
    for size in range(1, len(p) + 1):
        p1, p0 = p[order[:size]].sum(), q[order[:size]].sum()
        eps = max(epsilon_lower_bound_conditional(round(p1 * runs), runs, round(p0 * runs),
                                                  runs, 0.0, alpha, share)
                  for share in RATE_SHARES)
        best = max(best, (eps, float(p1), size))
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10**7, help="runs per dataset")
    ap.add_argument("--confidence", type=float, default=0.9)
    ap.add_argument("--rows", default=",".join(LAWS), help="mechanisms")
    ap.add_argument("--search-seeds", default=None,
                    help="comma-separated seeds: audit the law stand-ins instead")
    ap.add_argument("--reach", type=float, default=None,
                    help="a figure: how often each pattern's best event, known in advance "
                         "and counted on all the runs, reaches it (--draws draws)")
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--family", action="store_true",
                    help="the best ceilings over answers at a base b with m moved up and "
                         "the rest down (sparse vector rows)")
    args = ap.parse_args(argv)
    if args.family:
        for row in args.rows.split(","):
            print_family(row.strip(), args.runs, args.confidence)
        return 0
    if args.reach is not None:
        for row in args.rows.split(","):
            print_reach(row.strip(), args.runs, args.confidence, args.reach, args.draws)
        return 0
    if args.search_seeds:
        print_search([int(x) for x in args.search_seeds.split(",")], args.runs,
                     args.confidence)
        return 0
    for row in args.rows.split(","):
        print_ceilings(row.strip(), args.runs, args.confidence)
    return 0


def print_ceilings(row: str, runs: int, confidence: float) -> None:
    law, k = LAWS[row]
    print(f"{row} (epsilon {EPSILON}, {k} queries): the best test's bound at confidence "
          f"{confidence} from {runs:.3g} runs per dataset")
    for name in QUERY_PATTERNS:
        a, b = query_pair(name, k, far=far_distance(EPSILON))
        p, q = law(a), law(b)
        true = float(np.max(np.abs(np.log(p / q))))
        eps, prob, size = max(ceiling(p, q, runs, 1 - confidence),
                              ceiling(q, p, runs, 1 - confidence))
        print(f"  {name:24s} true epsilon of the pair {true:.4f}   ceiling {eps:.4f} "
              f"(an event of {size} outcome(s), probability {prob:.4f})")



def print_family(row: str, runs: int, confidence: float, top: int = 5) -> None:
    """Beyond the named patterns: every vector at a base b with its first m answers moved
    up by one and the rest down, for b in -10..10 and m in 1..k-1, best ceilings first
    (most_above_rest_below is b = 1, m = k - k // 4)."""
    law, k = LAWS[row]
    found = []
    for base in (-10.0, -5.0, -2.0, 0.0, 1.0, 2.0, 5.0, 10.0):
        for m in range(1, k):
            a = np.full(k, base)
            b = np.concatenate([np.full(m, base + 1.0), np.full(k - m, base - 1.0)])
            p, q = law(a), law(b)
            found.append((*max(ceiling(p, q, runs, 1 - confidence),
                               ceiling(q, p, runs, 1 - confidence)), base, m))
    print(f"{row}: the best ceilings of the family at {runs:.3g} runs per dataset")
    for eps, prob, _, base, m in sorted(found, reverse=True)[:top]:
        print(f"  b = {base:5.1f}, m = {m}: ceiling {eps:.4f} (an event of probability "
              f"{prob:.4f})")


def reach(p: np.ndarray, q: np.ndarray, runs: int, alpha: float, figure: float,
          draws: int, rng: np.random.Generator) -> tuple[float, float, float]:
    """The bound of the single outcome of largest log-ratio p/q, counted on binomial draws
    of ``runs`` per dataset at its best share of alpha: (share of draws at or above
    ``figure``, mean bound, standard deviation). An oracle: no search, no selection."""
    j = int(np.argmax(np.log(p / q)))
    share = max(RATE_SHARES, key=lambda s: epsilon_lower_bound_conditional(
        round(p[j] * runs), runs, round(q[j] * runs), runs, 0.0, alpha, s))
    bounds = np.array([epsilon_lower_bound_conditional(int(k1), runs, int(k0), runs, 0.0,
                                                       alpha, share)
                       for k1, k0 in zip(rng.binomial(runs, p[j], draws),
                                         rng.binomial(runs, q[j], draws), strict=True)])
    return float(np.mean(bounds >= figure)), float(bounds.mean()), float(bounds.std())


def print_reach(row: str, runs: int, confidence: float, figure: float, draws: int) -> None:
    law, k = LAWS[row]
    rng = np.random.default_rng(0)
    print(f"{row}: how often the best single outcome of each pattern, known in advance and "
          f"counted on {runs:.3g} runs per dataset, reaches {figure} at confidence "
          f"{confidence} ({draws} draws)")
    for name in QUERY_PATTERNS:
        a, b = query_pair(name, k, far=far_distance(EPSILON))
        p, q = law(a), law(b)
        if np.max(np.log(q / p)) > np.max(np.log(p / q)):
            p, q = q, p
        share, mean, sd = reach(p, q, runs, 1 - confidence, figure, draws, rng)
        print(f"  {name:24s} reaches it on {share:.2f} of draws (mean {mean:.4f}, "
              f"sd {sd:.4f})")


if __name__ == "__main__":
    sys.exit(main())
