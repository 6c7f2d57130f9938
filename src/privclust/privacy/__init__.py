"""privclust.privacy: budgets, the ledger and every noise mechanism (the only place noise is drawn).

This package imports nothing from privclust's engines or algorithms: noise knows no data source.
What it exports draws noise only through the ledger (:class:`Mechanisms` and the
``release_*`` functions that take one): the raw samplers stay in
:mod:`privclust.privacy.mechanisms` and :mod:`privclust.privacy.histogram` for audits.
"""

from .budget import (
    Accountant,
    Budget,
    BudgetExceededError,
    PrivacyLeakWarning,
    PrivacyReport,
    Release,
    compose,
    zcdp_to_approx_dp,
)
from .histogram import (
    gamma_geometric,
    gamma_laplace,
    neighbourhood_noise_bounds,
    release_dense_histogram,
    release_sparse_histogram,
    sparse_threshold,
)
from .mechanisms import (
    Mechanisms,
    classic_gaussian_sigma,
    count_offset,
    exponential_mechanism_probabilities,
    gaussian_sigma,
    zcdp_gaussian_sigma,
)
from .plan import (
    DELTA_CAP,
    NOISY_N_SHARE,
    LineItem,
    PlanExceededError,
    PrivacyPlan,
    ZcdpBlockTakenError,
    rule_delta,
    zcdp_rho_for,
)
from .rng import RandomSource, public_offsets, public_unit_directions, resolve_random_state

__all__ = [
    "DELTA_CAP",
    "NOISY_N_SHARE",
    "LineItem",
    "PlanExceededError",
    "PrivacyPlan",
    "ZcdpBlockTakenError",
    "rule_delta",
    "zcdp_rho_for",
    "Accountant",
    "Budget",
    "BudgetExceededError",
    "Mechanisms",
    "PrivacyLeakWarning",
    "PrivacyReport",
    "RandomSource",
    "Release",
    "compose",
    "classic_gaussian_sigma",
    "count_offset",
    "gamma_geometric",
    "gamma_laplace",
    "neighbourhood_noise_bounds",
    "release_dense_histogram",
    "release_sparse_histogram",
    "sparse_threshold",
    "exponential_mechanism_probabilities",
    "gaussian_sigma",
    "public_offsets",
    "public_unit_directions",
    "resolve_random_state",
    "zcdp_gaussian_sigma",
    "zcdp_to_approx_dp",
]
