"""Seeded fuzz cases of the workflow layer, shared by ``tests/test_fuzz_workflow.py`` (a few
hundred cases in CI) and ``benchmarks/fuzz_workflow.py`` (ten thousand, with counts).

A case is a few lines of Python built from one integer seed (:func:`case`): a
``PrivatePipeline`` (``PrivateClipper`` and/or ``PrivateScaler`` before a registry estimator),
``select_n_clusters`` over an estimator that takes k, ``CoresetKMeans`` with or without k, or a
direct fit of any registry estimator (``MorseMerging`` over each base included). The lines are
the reproducer: :func:`outcome` runs exactly them. A case ends well in one of two ways:

* a fit whose model is finite and inside its bounds, whose ledger spends no more than its plan,
  which labels far points without a NumPy warning, and whose saved file loads and predicts the
  same labels (on the data and on far points);
* a refusal: ``ValueError`` or ``BudgetExceededError`` raised by privclust itself (not from
  inside NumPy, SciPy or scikit-learn), with a message in the user's terms.

Anything else (another exception type, a RuntimeWarning, a model that does not round-trip) is
a failure; :data:`KNOWN` names failures of open bugs, which the CI test marks ``xfail`` (not
strict) instead of failing.
"""

from __future__ import annotations

import json
import re
import traceback
import warnings
from dataclasses import dataclass

import numpy as np

KINDS = ("pipeline", "select", "coreset", "roundtrip")

#: words that betray an internal error escaping to the user
JARGON = ("exponential_mechanism:", "private_quantile", "scores contain", "must not be negative",
          "Range exceeds", "invalid value encountered", "overflow encountered", "division by zero",
          "not positive definite", "index out of", "cannot convert float NaN", "ZcdpBlock",
          "PlanPart", "line item")

#: failures of known, open bugs: (test on the case's code and the failure, the reason); empty
#: when every bug the suite has found is fixed
KNOWN: tuple = ()


# ------------------------------------------------------------------------------------ data
def data(seed: int, n: int, d: int, exponent: int, kind: str, dtype: str,
         offset: float = 0.0) -> np.ndarray:
    """``n`` records in ``d`` features: ``kind`` (uniform, blobs, integers, rounded, constant)
    in [-1, 1] times ``10**exponent``, plus ``offset`` (data far from zero), as ``dtype``."""
    rng = np.random.default_rng(seed)
    if kind == "constant":
        X = np.full((n, d), 0.3)
    elif kind == "blobs":
        X = rng.normal(0, 0.1, (n, d)) + rng.choice([-0.5, 0.5], (n, 1))
    else:
        X = rng.uniform(-1, 1, (n, d))
    if kind == "rounded":
        X = np.round(X, 1)
    elif kind == "integers":
        X = np.round(X * 5)
    X = X * 10.0 ** exponent + offset
    return X.astype(dtype) if dtype != "int64" or np.abs(X).max(initial=0) < 1e15 else X


# ------------------------------------------------------------------------------------ cases
@dataclass(frozen=True)
class Case:
    """One fuzz case: its seed, kind and the lines that run it (ending in ``model = ...``)."""

    seed: int
    kind: str
    code: str


def _pick(rng, options):
    return options[int(rng.integers(len(options)))]


def _data_line(rng, big: bool = False) -> tuple[str, float, float, int]:
    """``X = data(...)`` and the public bounds that hold the data, as (lo, hi); ``big``: mostly
    enough records for private bounds."""
    n = _pick(rng, [300, 1500, 2500, 4000, 8000] if big else [1, 7, 60, 300, 800, 1500, 2500,
                                                              4000])
    d = _pick(rng, [1, 2, 2, 3, 5])
    exponent = _pick(rng, [0, 0, 0, 2, -2, 8, -8, 29, -29])
    kind = _pick(rng, ["uniform", "blobs", "integers", "rounded", "constant"])
    dtype = _pick(rng, ["float64", "float64", "float32", "int64"])
    offset = 0.0
    if rng.random() < 0.1 and exponent in (0, 2) and dtype == "float64":  # far from zero
        offset, exponent = 1.7e9, 3
    seed = int(rng.integers(2**16))
    w = 10.0 ** exponent
    # round bounds, then off-centre ones with digits to the last bit (a centre at a bound
    # rounds past it only there)
    if rng.random() < 0.5:
        lo, hi = offset - 2 * w, offset + 2 * w
    else:
        lo, hi = offset - w * rng.uniform(1.0, 3.0), offset + w * rng.uniform(1.0, 3.0)
    return f"X = data({seed}, {n}, {d}, {exponent}, {kind!r}, {dtype!r}, {offset!r})", lo, hi, d


def _bounds_text(rng, lo: float, hi: float, d: int = 1) -> str:
    """Mostly bounds that hold the data (one pair, or one row per feature); then narrow ones
    and private ones."""
    r = rng.random()
    if r < 0.5:
        return f"({lo!r}, {hi!r})"
    if r < 0.7:
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        rows = [[float(mid - half * f), float(mid + half * g)]  # mostly off-centre
                for f, g in rng.choice([1.0, 1.5, 3.0, 1.37, 2.71, 1.0 + 1 / 3], (d, 2))]
        return f"np.array({rows!r})"
    if r < 0.85:
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        return f"({mid - half / 8!r}, {mid + half / 8!r})"
    return "'private'"


EPSILONS = [1.0, 1.0, 0.5, 2.0, 0.25, 0.1, 5.0, 1e-3]


def _k(rng) -> int:
    return _pick(rng, [1, 2, 3, 4, 6, 8])


def estimator_text(rng, name: str, bounds: str | None, lo: float, hi: float) -> str:
    """A registry estimator ``name`` with random parameters (``bounds``: its bounds text, or
    None to leave them to the step before it)."""
    e = _pick(rng, EPSILONS)
    b = "" if bounds is None else f", bounds={bounds}"
    k = _k(rng)
    width = hi - lo
    texts = {
        "DPM": lambda: f"DPM(epsilon={e}, max_depth={int(rng.integers(1, 7))}{b})",
        "DPDBSCAN": lambda: (f"DPDBSCAN({e}, eps={width * _pick(rng, [0.05, 0.1, 0.3]):.6g}, "
                             f"min_samples={int(rng.integers(2, 20))}{b})"),
        "DPLloyd": lambda: f"DPLloyd({k}, epsilon={e}{b})",
        "KMeansGuarantee": lambda: f"KMeansGuarantee({k}, epsilon={e}, max_iter=3{b})",
        "SubClustering": lambda: f"SubClustering({k}, epsilon={e}, max_iter=3{b})",
        "DPGaussianMixture": lambda: (f"DPGaussianMixture({k}, epsilon={e}, n_iter=3, "
                                      f"delta={_pick(rng, [None, 1e-6])}{b})"),
        "HSTKMeans": lambda: f"HSTKMeans({k}, epsilon={e}{b})",
        "LSHSplits": lambda: f"LSHSplits({k}, epsilon={e}{b})",
        "EMMC": lambda: f"EMMC({k}, epsilon={e}{b})",
        "DPCube": lambda: f"DPCube({k}, epsilon={e}{b})",
        "CoresetKMeans": lambda: f"CoresetKMeans({_pick(rng, [None, k])}, epsilon={e}{b})",
        "DPHDBSCAN": lambda: (f"DPHDBSCAN(epsilon={e}, min_cluster_size="
                              f"{_pick(rng, [None, 5, 50, 500])}, max_depth="
                              f"{_pick(rng, [None, 2, 4])}{b})"),
    }
    return texts[name]()


#: registry estimators a pipeline or a direct fit may end in (MorseMerging: direct fits only)
ESTIMATORS = ("DPM", "DPDBSCAN", "DPLloyd", "KMeansGuarantee", "SubClustering",
              "DPGaussianMixture", "HSTKMeans", "LSHSplits", "EMMC", "DPCube", "CoresetKMeans",
              "DPHDBSCAN")
#: those that take a number of clusters (select_n_clusters)
WITH_K = ("DPLloyd", "KMeansGuarantee", "SubClustering", "DPGaussianMixture", "HSTKMeans",
          "LSHSplits", "EMMC", "DPCube", "CoresetKMeans")
MORSE_BASES = ("DPM", "DPLloyd", "KMeansGuarantee", "SubClustering", "DPGaussianMixture",
               "HSTKMeans", "LSHSplits", "EMMC", "DPCube", "CoresetKMeans")


def _pipeline(rng, lo, hi, d) -> str:
    est = _pick(rng, ESTIMATORS)
    form = _pick(rng, ["clipper"] * 6 + ["scaler"] * 6 + ["clipper+scaler"] * 4
                 + ["scaler-private"])
    steps = []
    if "clipper" in form:
        steps.append(f"PrivateClipper({_pick(rng, [0.1, 0.1, 0.3, 1.0])})")
    if "scaler" in form:
        sb = "" if form == "clipper+scaler" else (
            ", bounds='private'" if form == "scaler-private" else f", bounds=({lo!r}, {hi!r})")
        steps.append(f"PrivateScaler({_pick(rng, [0.1, 0.1, 0.5])}{sb})")
    steps.append(estimator_text(rng, est, None, -1.0, 1.0) if "scaler" in form
                 else estimator_text(rng, est, None, lo, hi))
    acc = ""
    if rng.random() < 0.15:
        acc = f"accountant=Accountant(Budget({_pick(rng, [0.5, 1.0, 3.0])}, 1e-5)), "
    return (f"model = make_private_pipeline({', '.join(steps)}, {acc}"
            f"random_state={int(rng.integers(1000))}).fit(X)")


def _select(rng, lo, hi, d) -> str:
    est = _pick(rng, WITH_K)
    inner = estimator_text(rng, est, _bounds_text(rng, lo, hi, d), lo, hi)
    if rng.random() < 0.85:  # a list the selection takes; then the edges it refuses
        ks = sorted(int(v) for v in rng.choice([2, 3, 4, 6, 8], _pick(rng, [2, 3]),
                                                replace=False))
    else:
        ks = sorted({_k(rng) for _ in range(_pick(rng, [1, 2, 3]))})
    return (f"model = select_n_clusters({inner}, X, {ks}, epsilon={_pick(rng, EPSILONS)}, "
            f"random_state={int(rng.integers(1000))})")


def _coreset(rng, lo, hi, d) -> str:
    k = _pick(rng, [None, None, 1, 2, 3, 5, 8])
    bounds = _bounds_text(rng, lo, hi, d)
    return (f"model = CoresetKMeans({k}, epsilon={_pick(rng, EPSILONS)}, bounds={bounds}, "
            f"random_state={int(rng.integers(1000))}).fit(X)")


def _roundtrip(rng, lo, hi, d) -> str:
    if rng.random() < 0.3:
        bounds = _bounds_text(rng, lo, hi, d).replace("'private'", f"({lo!r}, {hi!r})")
        base = estimator_text(rng, _pick(rng, MORSE_BASES), bounds, lo, hi)
        return (f"model = MorseMerging({base}, {_pick(rng, [1, 2, 3])}, "
                f"epsilon={_pick(rng, EPSILONS)}, random_state={int(rng.integers(1000))}).fit(X)")
    est = estimator_text(rng, _pick(rng, ESTIMATORS), _bounds_text(rng, lo, hi, d), lo, hi)
    return f"model = {est[:-1]}, random_state={int(rng.integers(1000))}).fit(X)"


def case(seed: int, kind: str | None = None) -> Case:
    """The case of ``seed`` (its kind drawn from the seed unless given)."""
    rng = np.random.default_rng([seed, 31])
    kind = kind or _pick(rng, KINDS)
    data_line, lo, hi, d = _data_line(rng, big=kind == "pipeline")
    make = {"pipeline": _pipeline, "select": _select, "coreset": _coreset,
            "roundtrip": _roundtrip}[kind]
    return Case(seed, kind, f"{data_line}\n{make(rng, lo, hi, d)}")


HEADER = """import numpy as np
from privclust import *
from privclust.model_selection import select_n_clusters
from privclust.pipeline import make_private_pipeline
from privclust.preprocessing import PrivateClipper, PrivateScaler
from _workflow_cases import data  # tests/_workflow_cases.py
"""


def reproducer(c: Case) -> str:
    """The lines that rerun case ``c`` (with ``tests`` on the path)."""
    return HEADER + c.code


# ------------------------------------------------------------------------------------ running
def _namespace() -> dict:
    import privclust
    from privclust.model_selection import select_n_clusters
    from privclust.pipeline import make_private_pipeline
    from privclust.preprocessing import PrivateClipper, PrivateScaler

    ns = {name: getattr(privclust, name) for name in privclust.__all__}
    ns.update(np=np, data=data, select_n_clusters=select_n_clusters,
              make_private_pipeline=make_private_pipeline, PrivateClipper=PrivateClipper,
              PrivateScaler=PrivateScaler)
    return ns


def _raised_by_privclust(exc: BaseException) -> bool:
    """Whether the innermost frame that raised ``exc`` is privclust's own code."""
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and "privclust" in frames[-1].filename.replace("\\", "/").split(
        "site-packages")[-1]


def _refusal(exc: BaseException) -> str | None:
    """None for a clean refusal, else what is wrong with it."""
    from privclust import BudgetExceededError
    from privclust.privacy import ZcdpBlockTakenError

    msg = str(exc)
    if isinstance(exc, ZcdpBlockTakenError) or not isinstance(
            exc, (ValueError, BudgetExceededError)):
        where = "".join(traceback.format_tb(exc.__traceback__)[-3:])
        return f"{type(exc).__name__}: {msg[:300]}\n{where}"
    if not msg or len(msg) > 400 or any(j in msg for j in JARGON):
        return f"unclear message: {msg[:400]!r}"
    if not _raised_by_privclust(exc):
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return f"{type(exc).__name__} from {frame.filename}:{frame.lineno}: {msg[:300]}"
    return None


def _fitted(model):
    """The saved-and-loaded model of a case: a pipeline's last step, a selection's choice."""
    if hasattr(model, "best_estimator_"):
        return model.best_estimator_
    if hasattr(model, "steps"):
        return model.steps[-1][1]
    return model


def _model_inputs(model, X):
    """What the saved model sees: X through a pipeline's transformers."""
    if hasattr(model, "steps"):
        for _, step in model.steps[:-1]:
            X = step.transform(X)
    return np.asarray(X, dtype=float)


def _check_fit(model, X) -> str | None:
    """None for a sound fitted model, else what is wrong with it."""
    from privclust import io

    est = _fitted(model)
    Xm = _model_inputs(model, X)
    report = model.privacy_report_
    if report.total().epsilon > report.planned.epsilon * (1 + 1e-9) + 1e-12:
        return f"spent {report.total()} over the plan {report.planned}"
    bounds = getattr(est, "bounds_", None)
    for attr in ("cluster_centers_", "means_"):
        values = getattr(est, attr, None)
        if values is None or not np.size(values):
            continue
        v = np.asarray(values, dtype=float)
        if not np.isfinite(v).all():
            return f"{attr} not finite"
        if bounds is not None:
            b = np.asarray(bounds, dtype=float)
            slack = 1e-9 * (b[:, 1] - b[:, 0])
            if (v < b[:, 0] - slack).any() or (v > b[:, 1] + slack).any():
                return f"{attr} outside bounds_"
    d = Xm.shape[1]
    far = np.vstack([np.full(d, 1e308), np.full(d, -1e308), Xm[:200]])
    labels = est.predict(far)
    text = json.dumps(io.model_to_dict(est))
    back = io.model_from_dict(json.loads(text))
    if not np.array_equal(back.predict(far), labels):
        return "the loaded model predicts other labels than the fitted one"
    return None


def _refusal_label(exc: BaseException) -> str:
    """A refusal's kind for the counts: its first words, numbers and names of estimators
    left out (a budget refusal by its type)."""
    from privclust import BudgetExceededError

    if isinstance(exc, BudgetExceededError) or " plans epsilon=" in str(exc):
        return "refused: over the accountant's budget"
    text = re.sub(r"\([A-Za-z, ]+\)|-?\d[\d.,e+-]*", "#", str(exc))
    return f"refused: {' '.join(text.split()[:5])}"


def outcome(c: Case) -> tuple[str, str | None]:
    """``(label, failure)`` of running case ``c``: label "fit" or "refused: <first words>";
    failure None when the case ended well, else what went wrong."""
    ns = _namespace()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            exec(c.code, ns)  # noqa: S102 - the case's own generated lines
        except Exception as exc:  # noqa: BLE001 - every way a case can end is classified
            failure = _refusal(exc)
            label = _refusal_label(exc) if failure is None else f"failed: {type(exc).__name__}"
        else:
            label = "fit"
            try:  # a fitted model that cannot be checked, saved or loaded is a failure
                failure = _check_fit(ns["model"], ns["X"])
            except Exception as exc:  # noqa: BLE001
                where = "".join(traceback.format_tb(exc.__traceback__)[-2:])
                failure = f"the fitted model fails its checks: {type(exc).__name__}: " \
                          f"{str(exc)[:300]}\n{where}"
    loud = [w for w in caught if not issubclass(w.category, UserWarning)
            or "encountered" in str(w.message)]
    if loud and failure is None:
        failure = f"{loud[0].category.__name__}: {loud[0].message} ({loud[0].filename}:" \
                  f"{loud[0].lineno})"
    if failure is not None and label == "fit":
        label = "failed: check"
    return label, failure


def known(c: Case, failure: str) -> str | None:
    """The reason when ``failure`` is a bug being fixed elsewhere, else None."""
    return next((reason for test, reason in KNOWN if test(c.code, failure)), None)
