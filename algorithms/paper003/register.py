"""The claims register of paper 003: every testable item of the notes, and what decides it.

Items come from the notes' section 7 (C-P privacy, C-A algorithmic, C-U utility) and their
violation lists (P-1 ... P-10 of section 4; A3-x, A2-x of section 2), each with the line of
``003_74f15e792d6d2225.txt`` it rests on. Check ids are battery ids
(``alg.variant.check[.suffix]``), suite ids of ``suites/papers/003.toml``, or unit tests as
``test:tests/test_paper003.py::name``. A privacy finding names two independent check kinds,
or says why only one can see it.
"""

from __future__ import annotations

from dpverify.core.claims import RegisterEntry

_T = "test:tests/test_paper003.py::"
_R = "dp_rgda"

#: Why the account check alone sees the printed noise formulas (P-6, P-7): the white-box
#: audit measures the true privacy loss, i.e. each release's noise against the TRUE
#: difference one record makes, and no record of the test family attains the declared
#: bounds M and L in every release.
_COMPOSITION_ONE_KIND = (
    "one check kind: the defect is the composition of declared sensitivities, which only "
    "the accountant composes. The white-box audit measures each release's loss at the "
    "difference a record really makes, and no record within the family's bounds reaches "
    "the declared M and L in every release; one that does breaks the clip of the mean "
    "first (P-3), which the audit then reports instead. Run with x frozen (eta = 0, "
    "entry = 0, r = 0: no k = 0 release moves) on n = 50, T = 10 and a canary within the "
    "bounds (fresh_direction, clip_boundary), the white-box audit's epsilon_lower is 0.0 "
    "(paper, no warm start) and 0.03 (paper_erm) at 500 runs, while the accountant gives "
    "2.98 and 3.55 against the claimed 1")

REGISTER: tuple[RegisterEntry, ...] = (
    # Privacy claims ---------------------------------------------------------------------
    RegisterEntry(
        "T1.privacy", "Algorithm 2 with Algorithm 3 is (eps, delta)-DP (ERM, replace-one), "
        "corrected: per-sample clipping, joint (v, u) release, accountant-calibrated noise",
        "Theorem 1, line 276; Definition 1, line 51", "privacy",
        (f"{_R}.sound.account", f"{_R}.sound.account.add_remove",
         f"{_R}.sound.account.matrix_sensing", f"{_R}.sound.sensitivity",
         f"{_R}.sound.audit.whitebox", f"{_R}.sound.audit.blackbox")),
    RegisterEntry(
        "T2.privacy", "Algorithm 2 on one pass over fresh samples is (eps, delta)-DP "
        "(population), corrected: each record meets one release (parallel composition)",
        "Theorem 2, line 312; sample budget, line 762", "privacy",
        (f"{_R}.sound_population.account", f"{_R}.sound_population.sensitivity",
         f"{_R}.sound_population.audit.whitebox", f"{_R}.sound_population.audit.blackbox")),
    RegisterEntry(
        "T1.privacy.printed", "Theorem 1 as printed (Algorithm 3's noise, Lemma 5's "
        "sensitivities, clip of the batch mean, K = 1) is (eps, delta)-DP",
        "Theorem 1, line 276; Algorithm 3, lines 199-200; Lemma 5, line 506", "privacy",
        (f"{_R}.paper_erm.account", f"{_R}.paper_erm.sensitivity",
         f"{_R}.paper_erm.audit.whitebox")),
    RegisterEntry(
        "T2.privacy.printed", "Theorem 2 as printed (Lemma 8's noise and warm start, eqs. "
        "30-31's sensitivities) is (eps, delta)-DP, on a pool and on its single pass",
        "Theorem 2, line 312; Lemma 8, lines 625-636", "privacy",
        (f"{_R}.paper.account", f"{_R}.paper.sensitivity", f"{_R}.paper.audit.whitebox",
         f"{_R}.paper_population.account", f"{_R}.paper_population.sensitivity",
         f"{_R}.paper_population.audit.whitebox")),
    RegisterEntry(
        "Table2.privacy", "Table 2's schedule (T = 400, K = 5, b1 = 200, b2 = 50, n = 400) "
        "is (2, 1e-6)-DP under one PLD-calibrated multiplier",
        "Appendix D, lines 889-893", "privacy", (f"{_R}.sound.account.table2",)),
    RegisterEntry(
        "AppD.sgda", "Appendix D's DP-SGDA (advanced composition, Definition 3's sigma, "
        "sensitivity 2C/B) is (eps, delta)-DP as printed",
        "Appendix D, line 889; Figure 1, line 338", "privacy",
        ("dp_sgda.paper.account", "dp_sgda.paper.sensitivity",
         "dp_sgda.paper.audit.whitebox", "dp_sgda.sound.account",
         "dp_sgda.sound.audit.whitebox")),
    RegisterEntry(
        "C-P10", "Everything but the noisy (v, u) is post-processing: branch decisions, "
        "s_t, the perturbation and the early return read no data (the taint test: coupled "
        "replay with identical released answers gives identical downstream state)",
        "notes section 4, P-10; Algorithm 2, lines 160-184", "privacy",
        (f"{_R}.sound.sensitivity", f"{_R}.planted_private_schedule.sensitivity",
         f"{_R}.sound.determinism")),
    RegisterEntry(
        "C-P11", "y0 does not depend on the data unless charged (y0 = 0, Section 5.1 line "
        "350; the sound warm start is a counted release)",
        "notes C-P11; line 350", "invariant",
        (f"{_R}.sound_population.account", f"{_T}test_sound_warm_start_is_counted")),
    # Violations (notes section 4) -------------------------------------------------------
    RegisterEntry(
        "P-1", "Definition 3's sigma = Delta sqrt(log(1.25/delta))/eps lacks sqrt(2): at "
        "(1, 1e-5) the true delta is 3.7e-5",
        "Definition 3, line 63", "violation",
        (f"{_T}test_definition3_sigma_is_not_epsilon_delta_dp",),
        untestable=(
            "one kind (exact accounting of one release): no run's verdict turns on it (the "
            "printed DP RGDA fails for larger defects first; in Appendix D's DP-SGDA "
            "advanced composition's slack absorbs it, dp_sgda.paper.account at 0.11 of "
            "eps = 1), and a sampling audit would need to resolve delta = 3.7e-5 against "
            "1e-5 at eps = 1: about 1/1e-5 x 10 = 1e6 runs a world for ten events")),
    RegisterEntry(
        "P-2", "The k = 0 increment differences gradients across the x-step but is declared "
        "0 and released without noise (eq. 31 scales by ||dy|| = 0)",
        "Algorithm 3, line 201; eq. 31, line 632; line 636", "violation",
        (f"{_R}.paper.sensitivity.no_warm_start", f"{_R}.paper.audit.whitebox.no_warm_start",
         f"{_T}test_zero_noise_k0_release_fails_sensitivity_not_accounting")),
    RegisterEntry(
        "P-2.erm", "Lemma 5's privacy proof bounds each increment by L ||y_t - y_{t-1}|| = 0 "
        "with K = 1: every increment declared free",
        "Lemma 5, line 506", "violation",
        (f"{_R}.paper_erm.sensitivity", f"{_R}.paper_erm.audit.whitebox")),
    RegisterEntry(
        "P-3", "Clip of the batch mean: one record breaking A1/A2 moves a refresh by 2 C_v "
        "against the declared 2M/S1",
        "Algorithm 1, line 95; Algorithm 3, lines 205-206; eq. 30, line 631", "violation",
        (f"{_R}.paper_population.sensitivity", f"{_R}.paper_population.audit.whitebox",
         f"{_T}test_clipped_batch_mean_breaks_the_declared_refresh_sensitivity")),
    RegisterEntry(
        "P-4", "Movement-scaled noise without a per-sample clip: a record of large curvature "
        "moves an increment far beyond 2 sqrt(2) L ||dy||/S2",
        "eq. 31, line 632; line 636", "violation",
        (f"{_R}.paper_population.sensitivity.curvature",
         f"{_R}.paper_population.audit.whitebox.curvature")),
    RegisterEntry(
        "P-5", "Lemma 8's increment noise relies on amplification at q_t = S2/n, which a "
        "single pass over disjoint batches does not have",
        "Lemma 8, line 636; sample budget, line 762", "violation",
        (f"{_R}.paper_population.account",
         f"{_R}.paper_population.audit.whitebox.single_pass")),
    RegisterEntry(
        "P-6", "No composition over T/q refreshes and T K increments; (eps/2, delta) twice "
        "is (eps, 2 delta); Algorithm 3's sqrt(T) for T K increments",
        "Lemma 8, line 636; Algorithm 3, line 200", "violation",
        (f"{_R}.paper.account.no_warm_start", f"{_R}.paper_erm.account"),
        untestable=_COMPOSITION_ONE_KIND),
    RegisterEntry(
        "P-7", "Algorithm 3's noise: log(1/delta) for log(1.25/delta), no factor 2 for "
        "replace-one, C_v = M: the T/q refreshes alone cost more than eps",
        "Algorithm 3, lines 199-200", "violation", (f"{_R}.paper_erm.account",),
        untestable=_COMPOSITION_ONE_KIND),
    RegisterEntry(
        "P-8", "Lemma 8's warm start ||G(x0, y0)|| <= eps_bar^(1/2)/kappa is computed from "
        "the data and never charged",
        "Lemma 8, line 625; line 774", "violation",
        (f"{_R}.paper.account", f"{_R}.paper.sensitivity", f"{_R}.paper.audit.whitebox")),
    RegisterEntry(
        "P-9", "A1 read coordinate-wise would add sqrt(d) to every l2 sensitivity",
        "Assumption 1, line 102", "violation", (),
        untestable=(
            "an ambiguity of the assumption, not a run: the sound variants clip per sample "
            "and rely on no bound of the data; the printed ones are checked at the block-wise "
            "reading (||grad_x F||, ||grad_y F|| <= M), under which they already fail "
            "(P-2, P-3); a coordinate-wise reading only enlarges the gap by sqrt(d)")),
    RegisterEntry(
        "F0.schedule", "F0, which sets the escape schedule (and T, q, S2 with schedule = "
        "auto), computed from the private records instead of a declared bound",
        "Theorem 1, line 276 (F0); dpverify's planted variant", "violation",
        (f"{_R}.planted_private_schedule.setting",
         f"{_R}.planted_private_schedule.sensitivity")),
    # Algorithmic invariants (notes C-A) --------------------------------------------------
    RegisterEntry(
        "C-A1", "SPIDER identity: with no noise, full batches and no clipping, v_t = "
        "grad_x f_S(x_t, y_{t+1}) and u_t = grad_y f_S at every t (corrected updater); the "
        "printed one double-counts the x-move at refreshes (A3-2)",
        "Algorithm 3, lines 4-17; notes A3-2", "invariant",
        (f"{_T}test_sound_spider_tracks_exact_gradients_without_noise",
         f"{_T}test_printed_refresh_double_counts_the_x_move")),
    RegisterEntry(
        "C-A2", "y moves: the printed argmin over k in {0..K-1} freezes y at K = 1 (A3-3); "
        "the corrected selection over {1..K} does not",
        "Algorithm 3, line 216; notes A3-3", "invariant",
        (f"{_T}test_paper_updater_with_one_inner_step_freezes_y",
         f"{_T}test_sound_spider_tracks_exact_gradients_without_noise",
         f"{_R}.paper_erm.rate.n")),
    RegisterEntry(
        "C-A3", "Step geometry: descent steps have length eta; the perturbation is uniform "
        "in the ball of radius r (radial CDF (s/r)^d1)",
        "Algorithm 2, lines 6 and 9; notes A2-4", "invariant",
        (f"{_T}test_descent_steps_have_length_eta",
         f"{_T}test_perturbation_is_uniform_in_the_ball")),
    RegisterEntry(
        "C-A4", "Noise calibration: the injected noise has covariance sigma^2 I, the "
        "increments' scale with ||dw||",
        "notes C-A4", "invariant",
        ("test:tests/test_curator.py::test_gaussian_release_has_the_declared_mean_and_std",
         f"{_R}.sound.sensitivity", f"{_R}.sound.audit.whitebox")),
    RegisterEntry(
        "C-A5", "Lemma 12: (mu/2) ||y - y*(x)|| <= ||G_lambda(x, y)|| for lambda <= 1/L",
        "Lemma 12, line 879", "invariant", (f"{_T}test_lemma12_gradient_mapping",)),
    RegisterEntry(
        "C-A6", "Population sample budget: (T/q) S1 + T K S2 <= n, no record reused",
        "sample budget, line 762", "invariant",
        (f"{_T}test_single_pass_reads_each_record_once_and_accounts_in_parallel",
         f"{_T}test_single_pass_refuses_a_schedule_beyond_n")),
    RegisterEntry(
        "C-A7", "NumPy and PyTorch give identical trajectories on one noise stream",
        "notes C-A7", "invariant",
        (f"{_R}.sound.agree", f"{_R}.sound_population.agree", f"{_R}.paper.agree",
         "dp_sgda.sound.agree")),
    # Utility (notes section 5, C-U) -------------------------------------------------------
    RegisterEntry(
        "T1.n", "alpha = O~(eps_bar^(2/3)): exponent -2/3 in n (sosp_alpha: both conditions "
        "of Definition 4, ||grad Phi_S|| <= alpha and lambda_min >= -sqrt(rho_Phi alpha))",
        "Theorem 1, line 276", "utility", (f"{_R}.sound.rate.n",), variable="n"),
    RegisterEntry(
        "T1.epsilon", "alpha = O~(eps_bar^(2/3)): exponent -2/3 in epsilon",
        "Theorem 1, line 276", "utility", (f"{_R}.sound.rate.epsilon",),
        variable="epsilon"),
    RegisterEntry(
        "T1.d", "alpha = O~(eps_bar^(2/3)): exponent +1/3 in d",
        "Theorem 1, line 276", "utility", (f"{_R}.sound.rate.d",), variable="d"),
    RegisterEntry(
        "T1.delta", "alpha = O~(eps_bar^(2/3)): exponent +1/3 in log(1/delta)",
        "Theorem 1, line 276", "utility", (), variable="delta",
        untestable=(
            "log(1/delta) moves by a factor 3 over delta in [1e-9, 1e-3] (6.9 to 20.7): a "
            "1/3 exponent changes alpha by 44% across the whole range, while the seed-to-"
            "seed spread of sosp_alpha at 80 seeds gives intervals about 0.3 wide in log "
            "units; resolving the exponent to the 0.15 tolerance would need about 16x the "
            "seeds. The factor is divided out as a log factor in every fit")),
    RegisterEntry(
        "T1.printed", "Theorem 1 with its printed parameters (K = 1, eta = 1/(2L)) reaches "
        "alpha = O~(eps_bar^(2/3))",
        "Theorem 1, line 276; Lemma 5, line 501", "utility", (f"{_R}.paper_erm.rate.n",),
        variable="n"),
    RegisterEntry(
        "T2.n", "alpha = O~(n^(-1/3) + eps_bar^(1/2)) on its own schedule: privacy-term "
        "exponent -1/2 in n (from the saddle, and with the steps descent needs)",
        "Theorem 2, line 312", "utility",
        (f"{_R}.sound_population.rate.n", f"{_R}.sound_population.rate.n.descent"),
        variable="n"),
    RegisterEntry(
        "T2.epsilon", "alpha = O~(n^(-1/3) + eps_bar^(1/2)): exponent -1/2 in epsilon",
        "Theorem 2, line 312", "utility", (f"{_R}.sound_population.rate.epsilon.descent",),
        variable="epsilon"),
    RegisterEntry(
        "T2.d", "alpha = O~(n^(-1/3) + eps_bar^(1/2)): exponent +1/4 in d",
        "Theorem 2, line 312", "utility", (f"{_R}.sound_population.rate.d.descent",),
        variable="d"),
    RegisterEntry(
        "L2", "sup_t ||v_t - grad Phi(x_t)|| = O~(n^(-1/3) + eps_bar^(1/2)) (the estimator "
        "error, notes C-U1)",
        "Lemma 2, line 298; Lemma 8, line 623", "utility", (), variable="n",
        untestable=(
            "internal state: v_t is a release inside the run, and the rate machinery fits "
            "metrics of the output; what the error bounds at the output (sosp_alpha, whose "
            "entry test compares ||v_t|| with alpha) is fitted in n, d and epsilon (T2.*)")),
    RegisterEntry(
        "L5", "Lemma 5: ||grad F(w)|| of the joint iterate w = (x, y) is O((sqrt(F0) "
        "eps_bar)^(2/3))",
        "Lemma 5, line 499", "utility", (), variable="n",
        untestable=(
            "the proof analyses a joint descent on w with step (v, -u) and a random iterate "
            "(notes section 5), an algorithm that is neither Algorithm 2 nor 3; its "
            "consequence for Algorithm 2's output is Theorem 1 (T1.*)")),
    RegisterEntry(
        "C-U3", "With probability >= 1 - delta1 - delta2 the output is an alpha-SOSP; a "
        "certified output is false with probability <= delta1 + delta2 (Lemmas 6/9)",
        "Theorem 1, line 276; Lemma 6, line 519; Lemma 9, line 782", "utility",
        (f"{_R}.sound.certificate.private", f"{_R}.sound.certificate.escape_r"),
        variable="n"),
    RegisterEntry(
        "C-U4", "The escape works: with r > 0 Algorithm 2 leaves a strict saddle; with "
        "r = 0 it certifies the saddle (the perturbation is necessary)",
        "Algorithm 2, line 9; Lemma 7, line 549", "invariant",
        (f"{_R}.sound.certificate.escape_r0", f"{_R}.sound.certificate.escape_r",
         f"{_T}test_escape_needs_the_perturbation")),
    RegisterEntry(
        "C-U6", "Certification is reachable at a private setting: the noise in v stays below "
        "the movement threshold sqrt(D_bar)/eta_H (notes section 8, item 13)",
        "Algorithm 2, line 13", "utility", (f"{_R}.sound.certificate.private",),
        variable="epsilon"),
    RegisterEntry(
        "C-U7", "Minimisation as a special case (F = h(x) - (mu/2)||y - c||^2): the ERM rate "
        "is that of DP-SOSP for minimisation",
        "Remark 3, line 322", "utility", (), variable="n",
        untestable=(
            "not built: it needs a third test family (notes TP3, Phi = h + const) and a "
            "minimisation DP-SOSP reference at the same schedule; the rate it would test is "
            "Theorem 1's exponent, fitted on the cosine family (T1.*)")),
    # Experiments ----------------------------------------------------------------------
    RegisterEntry(
        "Table2", "Table 2 (matrix sensing, T = 400): DP-RGDA's Phi and ||grad Phi|| far "
        "below Sto-SPIDER's and Ada-DP-SPIDER's on the explicit Phi, lambda_min closer to "
        "0; PrivateDiff slightly better (the paper's numbers beside ours)",
        "Table 2, lines 327-331; Section 5.2, lines 368-372", "experiment",
        (f"{_R}.sound.protocol.table2",)),
    RegisterEntry(
        "Fig1", "Figure 1: trajectories of DP RGDA and DP-SGDA on matrix sensing (Phi, "
        "||grad Phi||, lambda_min)",
        "Figure 1, line 338", "experiment", (f"{_R}.sound.protocol.table2",),
        untestable=(
            "the final iterate only: the protocol reports DP-SGDA beside the table's methods "
            "at t = T; the figure's curves (every t) are not redrawn")),
)
