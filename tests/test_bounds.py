"""Private bounds: the design's public numbers, the post-processing, runs and clipping at the
target sizes, refusal, the ledger, the replay harness and a gross-leak audit."""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
import pytest
from scipy.stats import binom

from _audit import assert_private, audit, threshold_events
from _draws import DrawRecorder
from _replay import ReplayMismatch, Session, hooks
from privclust import Accountant, Budget, BudgetExceededError, private_bounds
from privclust.cluster import bounds as cluster_bounds
from privclust.cluster._base import check_bounds
from privclust.cluster.bounds import BOUNDS_ITEMS, feature_bin_counts
from privclust.privacy import Mechanisms, PrivacyPlan, PrivacyReport, resolve_random_state
from privclust.privacy import bounds as design


def _outside(X, b) -> float:
    return float(((X < b[:, 0]) | (X > b[:, 1])).any(axis=1).mean())


# ----------------------------------------------------------------------------- the design
def test_log_grid_is_symmetric_geometric_and_covers_the_scales():
    edges = design.log_grid((1e-3, 1e3), per_octave=4)
    assert np.all(np.diff(edges) > 0)
    np.testing.assert_allclose(edges, -edges[::-1])
    pos = edges[edges > 0]
    np.testing.assert_allclose(pos[1:] / pos[:-1], 2 ** 0.25)
    assert pos[0] <= 1e-3 and pos[-1] >= 1e3
    with pytest.raises(ValueError, match="scales"):
        design.log_grid((0, 1))
    with pytest.raises(ValueError, match="per_octave"):
        design.log_grid((1, 2), per_octave=0)


def test_bin_counts_are_exact_and_fold_by_magnitude():
    edges = np.array([-1.0, 0.0, 1.0])
    X = np.array([[-5.0, 0.5], [-1.0, 0.0], [0.2, 3.0], [1.0, -0.1]])
    np.testing.assert_array_equal(feature_bin_counts(X, edges), [[1, 1, 1, 1], [0, 1, 2, 1]])
    edges = design.log_grid((1.0, 4.0), 1)  # [-4, -2, -1, 1, 2, 4]
    counts = feature_bin_counts(np.array([[-3.0], [0.5], [1.5], [2.5], [9.0]]), edges)
    central, pos, neg, mags = design.fold_counts(counts, edges)
    assert central[0] == 1 and list(pos[0]) == [1, 1, 1] and list(neg[0]) == [0, 1, 0]
    np.testing.assert_array_equal(mags, [1, 2, 4, 8])


def test_the_smallest_data_set_and_the_split_come_from_public_values_only():
    assert design.min_records(0.1, 40) == 8000 and design.min_records(0.1, 4) == 1520
    assert design.min_records(1.0, 40) == 800  # n x epsilon is what counts
    for eps, d in [(0.1, 1), (0.1, 40), (2.0, 7)]:
        split = design.budget_split(eps, d)
        assert split.total == pytest.approx(eps, rel=1e-12)
        assert min(split.count, split.scales, split.zoom, split.radius) > 0


def test_the_noisy_count_runs_the_target_sizes_with_probability_0_99():
    """The only refusal before the radius is ``noisy count < min_records``: its probability at
    a given n is exact (two-sided geometric noise at the count's epsilon)."""
    def p_refuse(n, eps, d):
        e0 = design.budget_split(eps, d).count
        gap = n - design.min_records(eps, d)  # refused when the noise is below -gap
        a = math.exp(-e0)
        return a ** (gap + 1) / (1 + a) if gap >= 0 else 1.0
    assert p_refuse(10_000, 0.1, 40) < 0.01
    assert p_refuse(2_000, 0.1, 4) < 0.01
    assert p_refuse(design.min_records(0.1, 40) // 2, 0.1, 40) > 0.99


@pytest.mark.parametrize("eps, d", [(0.1, 4), (0.1, 40), (1e-3, 784), (5.0, 1)])
def test_the_refusal_is_one_sentence_with_the_smallest_data_set(eps, d):
    msg = design.refusal_message(eps, d)
    assert f"{design.min_records(eps, d):,}" in msg and len(msg) < 300
    assert "epsilon" in msg and "bounds" in msg and msg.count(". ") == 0
    assert "per_octave" not in msg and "(" + "X" not in msg and "private_bounds" not in msg


def test_sum_threshold_bounds_the_noise_it_claims_to():
    rng = np.random.default_rng(0)
    eps, terms, tail = 0.3, 4, 0.01
    p = -math.expm1(-eps)
    noise = (rng.geometric(p, (200_000, terms)) - rng.geometric(p, (200_000, terms))).sum(axis=1)
    level = design.sum_threshold(eps, terms, tail)
    assert (noise >= level).mean() <= tail
    assert (noise >= 0.5 * level).mean() > tail / 20  # and not absurdly loose


def test_a_feature_s_bulk_follows_its_mode_its_sign_and_a_second_cluster():
    edges = design.log_grid(design.DEFAULT_SCALES, 2)
    rng = np.random.default_rng(1)
    X = np.column_stack([
        rng.normal(size=40_000),                              # two-sided around 0
        1000 + rng.normal(size=40_000),                       # far from 0: one-sided, narrow
        np.where(rng.random(40_000) < 0.5, 0.0, rng.uniform(1, 2, 40_000) * 64),  # 0 or ~100
        -rng.uniform(5, 6, 40_000),                           # negative
        np.full(40_000, 0.0),                                 # constant 0
    ])
    counts = feature_bin_counts(X, edges)
    ext, one_sided = design.feature_extents(counts, edges, 2, 1e3)  # (nearly) no noise
    assert ext[0, 0] < -1 and ext[0, 1] > 1 and not one_sided[0]
    assert 500 < ext[1, 0] < 1000 < ext[1, 1] < 2000 and one_sided[1]
    assert ext[2, 0] == 0.0 and ext[2, 1] >= 100  # a floor at 0, the cluster near 100 reached
    assert ext[3, 1] < 0 and ext[3, 0] <= -6 and one_sided[3]
    assert ext[4, 0] < 0 < ext[4, 1] and ext[4, 1] <= 1e-5
    assert list(design.narrow_features(ext, one_sided)) == [1]  # 3 spans 3.8 .. 8


def test_the_zoom_narrows_from_both_ends_and_keeps_an_end_with_mass_beyond():
    lo, width = np.array([0.0, 0.0]), np.array([1.0, 1.0])
    rows = np.zeros((2, design.ZOOM_BINS + 2))
    rows[0, 5:8] = 1000  # bins 5..7: [4, 7)
    rows[1, 5:8], rows[1, -1] = 1000, 500  # and mass above the grid
    ext = design.zoom_extents(rows, lo, width, 1.0, np.array([[0.0, 16.0], [0.0, 16.0]]))
    np.testing.assert_allclose(ext, [[4.0, 7.0], [4.0, 16.0]])


def test_the_radius_leaves_the_target_outside_when_the_counts_show_it():
    edges = design.radius_edges()
    counts = np.zeros(edges.size + 1)
    k1 = int(np.searchsorted(edges, 1.0, side="right"))
    counts[k1 - 2:k1 + 1] = [30_000, 40_000, 20_000]  # t up to 1.41
    counts[k1 + 1:k1 + 4] = [5_000, 3_000, 500]  # a tail to 4 (bins from 1.41 to 4)
    r = design.radius_from_counts(counts, edges, 5.0, counts.sum())
    assert r == pytest.approx(4.0)
    # noisy counts too coarse to show a tail of 1%: a margin past the populated range
    r_noisy = design.radius_from_counts(counts, edges, 0.002, counts.sum())
    assert r_noisy > 4.0
    # nothing clears the noise: the margin starts at the bulks' edges
    assert design.radius_from_counts(np.zeros(edges.size + 1), edges, 0.01, 1e4) > 1


def test_bounds_are_valid_for_any_bulk_and_radius():
    ext = np.array([[-1e-6, 1e-6], [0.0, 5.0], [1e29, 2e29], [3.7, 3.7000001], [-8.0, 0.0]])
    for radius in (1e-3, 1.0, 7.5, 1e6):
        b = design.scaled_bounds(ext, radius, 1e30, 1e-30, 1e-9)
        check_bounds(b, ext.shape[0])
    b = design.scaled_bounds(ext, 9.0, 1e30, 1e-30, 1e-9)
    assert b[1, 0] == pytest.approx(-1.0 * 2.5)  # (9 - 1) / 8 half-widths below the floor
    assert b[4, 1] == pytest.approx(4.0)


# ----------------------------------------------------------------------------- target sizes
def _mixed(n, d, seed):
    """Features on scales 0.01 .. 1000, far from 0, heavy-tailed, constant, negative, codes."""
    rng = np.random.default_rng(seed)
    kinds = [
        lambda s: rng.normal(size=n) * s,
        lambda s: 1000 + rng.normal(size=n),
        lambda s: rng.standard_t(3, size=n) * s,
        lambda s: np.full(n, 3.7),
        lambda s: -s * (5 + rng.exponential(size=n)),
        lambda s: rng.integers(0, 7, size=n).astype(float),
        lambda s: rng.uniform(0, 1, size=n) * s,
        lambda s: np.zeros(n),
    ]
    return np.column_stack([kinds[j % len(kinds)](10 ** rng.uniform(-2, 3)) for j in range(d)])


@pytest.mark.parametrize("n, d", [(10_000, 40), (2_000, 4)])
def test_runs_and_clips_at_most_2_percent_at_the_target_sizes(n, d):
    X = _mixed(n, d, seed=d)
    outside = []
    for seed in range(20):
        found = private_bounds(X, 0.1, random_state=seed)
        check_bounds(found.bounds, d)
        outside.append(_outside(X, found.bounds))
    assert max(outside) <= 0.02, outside
    assert np.median(outside) <= 0.01


@pytest.mark.parametrize("name", ["normal", "t3", "scales", "offset"])
def test_clipping_and_width_on_larger_data(name):
    rng = np.random.default_rng(3)
    n, d = 40_000, 8
    scales = 10 ** np.linspace(-2, 3, d)
    X = {"normal": lambda: rng.normal(size=(n, d)),
         "t3": lambda: rng.standard_t(3, size=(n, d)),
         "scales": lambda: rng.normal(size=(n, d)) * scales,
         "offset": lambda: 1000 + rng.normal(size=(n, d))}[name]()
    rng_true = X.max(axis=0) - X.min(axis=0)
    widths = []
    for seed in range(5):
        b = private_bounds(X, 0.1, random_state=seed).bounds
        assert _outside(X, b) <= 0.02
        widths.append(np.median((b[:, 1] - b[:, 0]) / rng_true))
    # measured medians: 1.1, 0.5 (t3: its extreme tail is left outside), 1.1, 3.6
    limit = {"normal": 1.6, "t3": 1.0, "scales": 1.6, "offset": 6.0}[name]
    assert np.median(widths) <= limit, widths


def test_a_constant_feature_gets_a_valid_interval_around_its_value():
    X = np.column_stack([np.full(20_000, 3.7), np.zeros(20_000),
                         np.random.default_rng(4).normal(size=20_000)])
    b = private_bounds(X, 0.1, random_state=0).bounds
    check_bounds(b, 3)
    assert b[0, 0] <= 3.7 <= b[0, 1] and b[1, 0] <= 0 <= b[1, 1]
    assert b[0, 1] - b[0, 0] < 1 and b[1, 1] - b[1, 0] < 1e-4 and _outside(X, b) <= 0.02


# ----------------------------------------------------------------------------- refusal
def test_small_data_is_refused_in_one_sentence_from_the_released_count():
    from sklearn.datasets import load_breast_cancer, load_iris

    for X in (load_iris().data, load_breast_cancer().data):
        with pytest.raises(ValueError) as err:
            private_bounds(X, 0.1, random_state=0)
        assert str(err.value) == design.refusal_message(0.1, X.shape[1])
    X = np.random.default_rng(5).normal(size=(design.min_records(0.1, 4) // 3, 4))
    refused = 0
    for seed in range(20):
        try:
            private_bounds(X, 0.1, random_state=seed)
        except ValueError:
            refused += 1
    assert refused == 20


def test_bad_parameters_get_clear_errors():
    with pytest.raises(ValueError, match="epsilon"):
        private_bounds(np.ones((30, 2)), epsilon=0)
    with pytest.raises(ValueError, match="NaN|finite"):
        private_bounds(np.array([[np.nan, 1.0]]), epsilon=1.0)
    with pytest.raises(ValueError, match="scales"):
        private_bounds(np.ones((30, 2)), epsilon=1.0, scales=(1.0, 0.5))


# ----------------------------------------------------------------------------- the ledger
@pytest.mark.parametrize("n, d", [(3_000, 2), (60_000, 3), (9_000, 40)])
def test_every_release_is_recorded_and_the_spend_equals_epsilon(n, d):
    rng = np.random.default_rng(6)
    X = np.column_stack([rng.normal(size=n) * 10, 1000 + rng.normal(size=n),
                         *rng.uniform(0, 5, size=(d - 2, n))])
    found = private_bounds(X, 0.3, random_state=0)
    report = found.privacy_report_
    assert report.total() == Budget(0.3, 0.0) and report.private
    assert {r.item for r in report.releases} <= set(BOUNDS_ITEMS.values())
    assert [r.target.split()[0] for r in report.releases][0] == "number"
    assert found.threshold is None and found.description.startswith("epsilon 0.3")
    assert np.asarray(found).shape == (d, 2)


def test_every_draw_is_at_the_epsilon_its_release_records(monkeypatch):
    rec = DrawRecorder(monkeypatch)
    X = np.random.default_rng(7).normal(size=(60_000, 3)) + [0, 1000, 50]
    report = private_bounds(X, 0.2, random_state=0).privacy_report_
    assert len(rec.draws) == len(report.releases)
    for (kind, per_unit), release in zip(rec.draws, report.releases, strict=True):
        assert kind == "geometric" and release.sensitivity == 1.0
        assert per_unit == pytest.approx(1.0 / release.scale, rel=1e-12)
        rows = release.n_released if "of the same records" in release.note else 1
        assert per_unit == pytest.approx(release.epsilon / rows, rel=1e-12)


def test_a_caller_s_plan_with_one_item_is_spent_exactly():
    """The form model selection uses: a plan part holding one "feature bounds" item."""
    plan = PrivacyPlan("caller", 1.0, 0.0)
    part = plan.part("private bounds", 0.25, 0.0)
    part.add("feature bounds", "private bounds", "pure", 0.25)
    source = resolve_random_state(0)
    report = PrivacyReport("caller", plan.reserved(), source.description)
    X = np.random.default_rng(8).normal(size=(20_000, 3))
    found = private_bounds(X, 0.25, plan=part, mech=Mechanisms(source, report, part))
    assert report.total().epsilon == pytest.approx(0.25, rel=1e-12)
    assert part.item("feature bounds").spent_epsilon == pytest.approx(0.25, rel=1e-12)
    check_bounds(found.bounds, 3)


def test_the_budget_is_checked_before_the_data():
    acc = Accountant(Budget(0.2, 0.0))

    class Untouchable:
        def __array__(self, *a, **k):
            raise AssertionError("the data was read before the budget was checked")

    with pytest.raises(BudgetExceededError):
        private_bounds(Untouchable(), epsilon=0.3, accountant=acc)


# ----------------------------------------------------------------------------- replay, audit
def _replay_bounds(X, X_neighbour, epsilon=0.3):
    """Record private_bounds on X, replay it on the neighbour with every noisy output frozen
    (the harness raises at a different release, public argument or sensitivity). Returns both
    outcomes (bounds, or the refusal's message) and the number of releases replayed."""
    def run(data):
        try:
            return private_bounds(data, epsilon, random_state=0).bounds
        except ValueError as exc:
            return str(exc)

    session = Session()
    with hooks(session):
        first = run(X)
    session.mode, session.position = "replay", 0
    with hooks(session):
        second = run(X_neighbour)
    session.finish()
    return first, second, len(session.calls)


def _assert_same_outcome(first, second):
    if isinstance(first, str) or isinstance(second, str):
        assert first == second, (first, second)
    else:
        np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("n", [2_000, 60_000])
def test_private_bounds_decide_from_releases_only(n):
    rng = np.random.default_rng(9)
    X = np.column_stack([rng.normal(size=n), 1000 + rng.normal(size=n), rng.uniform(0, 9, n)])
    for Xn in (X[:-1], np.vstack([X, [[1e6, -1e6, 1e6]]]), np.vstack([X, X[:1]])):
        first, second, releases = _replay_bounds(X, Xn)
        assert releases >= 1 and not isinstance(first, str)
        _assert_same_outcome(first, second)  # the same bounds on the neighbour


def test_the_refusal_decides_from_the_released_count_only():
    X = np.random.default_rng(10).normal(size=(200, 3))
    first, second, releases = _replay_bounds(X, X[:-1])
    assert releases >= 1
    assert isinstance(first, str) and first == second  # refused on both, in the same words
    assert "records" in first


def test_the_replay_catches_a_refusal_on_the_exact_record_count(monkeypatch):
    original = cluster_bounds._release

    def planted(counts, eps, scales, steps):
        if counts.n % 2:
            raise ValueError("odd")
        return original(counts, eps, scales, steps)

    monkeypatch.setattr(cluster_bounds, "_release", planted)
    X = np.random.default_rng(11).normal(size=(20_000, 2))
    with pytest.raises((ReplayMismatch, AssertionError)):
        _assert_same_outcome(*_replay_bounds(X, X[:-1])[:2])


_D0 = np.random.default_rng(12).normal(size=(2_000, 1))
_D1 = np.vstack([_D0, [[1e4]]])  # one record far beyond the data


def _upper(data, leak=False):
    @contextmanager
    def planted():
        if not leak:
            yield
            return
        original = cluster_bounds.radius_from_counts
        t_max = float(np.max(np.abs(data)))  # the planted leak: the exact largest value

        def leaking(noisy, edges, eps, n_hat):
            return max(original(noisy, edges, eps, n_hat), t_max)

        cluster_bounds.radius_from_counts = leaking
        try:
            yield
        finally:
            cluster_bounds.radius_from_counts = original

    def sample(rng, n_trials):
        with planted():
            return np.array([private_bounds(data, 1.0, random_state=rng).bounds[0, 1]
                             for _ in range(n_trials)])
    return sample


def test_no_bound_reaches_a_lone_outlier_and_the_audit_catches_one_that_does():
    """A gross-leak audit of the whole release: a record at 1e4 next to 2,000 records of
    N(0, 1) moves no output event by more than e^epsilon; bounds planted to reach the
    largest value are caught."""
    events = threshold_events([100.0])
    res = assert_private(1.0, 0.0, _upper(_D0), _upper(_D1), events, n_trials=300, seed=0)
    broken = audit(_upper(_D0, leak=True), _upper(_D1, leak=True), events, n_trials=300, seed=0)
    assert broken.epsilon_lower > 1.0, str(broken)
    assert res.epsilon_lower <= 1.0


def test_outside_share_stays_under_2_percent_with_confidence():
    """400 runs on one generated set at the smallest target size: the runs that clip more than
    2% of the records, and those refused, are within the binomial 1e-6 bound of 1% each."""
    X = _mixed(10_000, 40, seed=13)
    over = refused = 0
    for seed in range(400):
        try:
            over += _outside(X, private_bounds(X, 0.1, random_state=seed).bounds) > 0.02
        except ValueError:  # the noisy count below 8,000: probability 0.34% (exact, above)
            refused += 1
    assert over <= binom.ppf(1 - 1e-6, 400, 0.01)
    assert refused <= binom.ppf(1 - 1e-6, 400, 0.01)


# ----------------------------------------------------------------------------- bounds="private"
from privclust import io, registry  # noqa: E402

_PRIVATE = [n for n in registry.ENTRIES if n != "morse"]


@pytest.mark.parametrize("name", _PRIVATE)
def test_every_estimator_takes_private_bounds_within_its_budget(name):
    """bounds="private" spends PRIVATE_BOUNDS_SHARE of epsilon on the bounds, first, and the
    whole fit still spends exactly epsilon; the released bounds are saved with the model."""
    from sklearn.datasets import make_blobs

    from privclust.cluster._base import PRIVATE_BOUNDS_SHARE

    X, _ = make_blobs(6000, 2, centers=[[-20, -20], [20, 20], [-20, 20]], random_state=0)
    entry = registry.ENTRIES[name]
    values = {dest: None for dest in registry.OPTIONS} | dict(entry.example)
    values |= {"radius": 3.0} if name == "dbscan" else {}
    model = entry.build(values, epsilon=1.0, delta=None, bounds="private", random_state=0)
    model.fit(X)
    report = model.privacy_report_
    assert math.isclose(report.total().epsilon, 1.0, rel_tol=1e-9)
    ours = [r for r in report.releases if r.item in BOUNDS_ITEMS.values()]
    assert report.releases[:len(ours)] == ours and report.releases[0].target == "number of records"
    assert math.isclose(sum(r.epsilon for r in ours), PRIVATE_BOUNDS_SHARE, rel_tol=1e-12)
    assert model.bounds_.shape == (2, 2) and (model.bounds_[:, 0] < -20).all()
    assert (model.bounds_[:, 1] > 20).all()
    loaded = io.model_from_dict(io.model_to_dict(model))
    np.testing.assert_array_equal(loaded.bounds_, model.bounds_)
    np.testing.assert_array_equal(loaded.predict(X[:300]), model.predict(X[:300]))


def test_private_bounds_are_booked_with_the_fit_s_accountant():
    from privclust import DPLloyd

    X = np.random.default_rng(3).uniform(-5, 5, size=(4000, 2))
    acc = Accountant(Budget(1.0, 0.0))
    DPLloyd(3, epsilon=1.0, bounds="private", accountant=acc, random_state=0).fit(X)
    with pytest.raises(BudgetExceededError):
        DPLloyd(3, epsilon=0.05, bounds="private", accountant=acc).fit(X)


def test_private_bounds_inside_morse_merging_is_refused_clearly():
    from privclust import DPLloyd, MorseMerging

    X = np.random.default_rng(4).uniform(-5, 5, size=(2000, 2))
    with pytest.raises(ValueError, match="composite fit"):
        MorseMerging(DPLloyd(6, bounds="private"), 2, epsilon=1.0, random_state=0).fit(X)


def test_a_fit_on_too_little_data_says_how_much_it_needs():
    from privclust import DPLloyd

    X = np.random.default_rng(14).normal(size=(300, 5))
    with pytest.raises(ValueError) as err:
        DPLloyd(3, epsilon=1.0, bounds="private", random_state=0).fit(X)
    assert f"{design.min_records(0.1, 5):,}" in str(err.value) and len(str(err.value)) < 300


def test_command_line_takes_private_bounds(tmp_path, capsys):
    from privclust import cli

    X = np.random.default_rng(5).normal(size=(5000, 2)) * 10
    np.save(tmp_path / "X.npy", X)
    out = tmp_path / "m.json"
    argv = ["cluster", str(tmp_path / "X.npy"), "--algorithm", "lloyd", "--n-clusters", "3",
            "--epsilon", "1", "--bounds", "private", "--seed", "1", "--out", str(out)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "records per bin of a log-scale grid" in text and "privacy spent: epsilon=1 of 1" in text
    assert io.load_model(out).bounds_.shape == (2, 2)
