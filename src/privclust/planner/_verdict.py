"""The plan's verdict: one plain line per ``n`` saying whether the fit is noise-dominated,
marginal or usable, computed from the plan's own figures (a count's noise against the
records, a centre's error against a feature's range, a core window against the clusters)."""

from __future__ import annotations

#: a centre off by more than this share of a feature's range: noise-dominated; above the
#: second share: marginal
_NOISY_SHARE, _MARGINAL_SHARE = 0.25, 0.05
#: a count whose noise is at least this share of n: noise-dominated; the second: marginal
_NOISY_COUNT, _MARGINAL_COUNT = 0.5, 0.1


def records(x: float) -> str:
    """``x`` records, with the plural right ("1 record", "2.5 records", "1,200 records")."""
    shown = f"{x:,.0f}" if abs(x - round(x)) < 0.05 or abs(x) >= 100 else f"{x:,.1f}"
    return f"{shown} record" + ("" if shown == "1" else "s")


def _head(n: float, epsilon: float) -> str:
    return f"Verdict: at n = {n:,.0f} and epsilon = {epsilon:g},"


def _fix(epsilon_helps: bool = True) -> str:
    return "use more records or a larger epsilon" if epsilon_helps else "use more records"


def _centres(share, size: float, n: float, epsilon: float, what: str) -> str:
    """A centre fit's verdict from the centre error as a share of a feature's range."""
    head = _head(n, epsilon)
    if share is None:
        return (f"{head} the plan states no noise figure for this fit; judge it by the "
                "measured accuracy on the estimator's documentation page")
    pct = f"{100 * share:.2g}%"
    if share >= _NOISY_SHARE:
        return (f"{head} this fit is noise-dominated: {what} of about {records(size)} are off "
                f"by about {pct} of a feature's range; {_fix()}")
    if share >= _MARGINAL_SHARE:
        return (f"{head} this fit is marginal: {what} of about {records(size)} are off by "
                f"about {pct} of a feature's range; more records or epsilon sharpen them")
    return (f"{head} the noise is small next to the data: {what} of about {records(size)} are "
            f"off by about {pct} of a feature's range")


def verdict_centres(f: dict, n: float, epsilon: float, expected_clusters) -> str:
    return _centres(f["relative_centre_error"], f["cluster_size"], n, epsilon,
                    "the centres of clusters")


def verdict_mixture(f: dict, n: float, epsilon: float, expected_clusters) -> str:
    if f["cluster_size"] < f["min_count"]:
        return (f"{_head(n, epsilon)} this fit is noise-dominated: components of about "
                f"{records(f['cluster_size'])} fall below min_count = "
                f"{records(f['min_count'])} and count as empty; {_fix()}")
    return _centres(f["relative_centre_error"], f["cluster_size"], n, epsilon,
                    "the means of components")


def verdict_dbscan(f: dict, n: float, epsilon: float, expected_clusters) -> str:
    size = n / expected_clusters if expected_clusters else n
    whose = "a cluster" if expected_clusters else "the whole data set"
    head = _head(n, epsilon)
    if size < f["core_threshold"]:
        return (f"{head} this fit is noise-dominated: no window of fewer than "
                f"{records(f['core_threshold'])} is ever core, and {whose} holds about "
                f"{records(size)}; {_fix()}, or a larger radius")
    if size < f["min_dense_window"]:
        return (f"{head} this fit is marginal: {whose} of about {records(size)} is below "
                f"MinPts' = {records(f['min_dense_window'])}, so its core is found only in "
                "part; more records or epsilon help")
    return (f"{head} the noise is small next to the data: {whose} of about {records(size)} "
            f"clears MinPts' = {records(f['min_dense_window'])}")


def verdict_dpm(f: dict, n: float, epsilon: float, expected_clusters) -> str:
    head = _head(n, epsilon)
    sd = f["count_noise_sd_per_level"][0]
    share = f["relative_centre_error"]
    if sd >= _NOISY_COUNT * n or f["expected_clusters"] < 1.5:
        return (f"{head} this fit is noise-dominated: its counts are off by about "
                f"{records(sd)} against {records(n)}, and it separates about "
                f"{f['expected_clusters']:.1f} cluster(s); {_fix()}")
    if sd >= _MARGINAL_COUNT * n or share >= _MARGINAL_SHARE:
        return (f"{head} this fit is marginal: counts off by about {records(sd)}, leaf "
                f"centres off by about {100 * share:.2g}% of a feature's range; more records or "
                "epsilon sharpen them")
    return (f"{head} the noise is small next to the data: counts off by about {records(sd)}, "
            f"leaf centres off by about {100 * share:.2g}% of a feature's range")
