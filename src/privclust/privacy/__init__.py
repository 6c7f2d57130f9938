"""privclust.privacy: budgets, the ledger and every noise mechanism (the only place noise is drawn).

This package imports nothing from privclust's engines or algorithms: noise knows no data source.
"""

from .budget import (
    Accountant,
    Budget,
    BudgetExceededError,
    PrivacyLeakWarning,
    PrivacyReport,
    Release,
    zcdp_to_approx_dp,
)
from .histogram import (
    dense_geometric_histogram,
    dense_histogram,
    dense_laplace_histogram,
    gamma_geometric,
    gamma_laplace,
    neighbourhood_noise_bounds,
    release_dense_histogram,
    release_sparse_histogram,
    sparse_histogram,
    sparse_threshold,
)
from .mechanisms import (
    Mechanisms,
    classic_gaussian_sigma,
    count_offset,
    exponential_mechanism,
    exponential_mechanism_probabilities,
    gaussian_sigma,
    laplace_noise,
    private_quantile,
    two_sided_geometric,
    zcdp_gaussian_sigma,
)
from .rng import RandomSource, public_unit_directions, resolve_random_state

__all__ = [
    "Accountant",
    "Budget",
    "BudgetExceededError",
    "Mechanisms",
    "PrivacyLeakWarning",
    "PrivacyReport",
    "RandomSource",
    "Release",
    "classic_gaussian_sigma",
    "count_offset",
    "dense_geometric_histogram",
    "dense_histogram",
    "dense_laplace_histogram",
    "gamma_geometric",
    "gamma_laplace",
    "neighbourhood_noise_bounds",
    "release_dense_histogram",
    "release_sparse_histogram",
    "sparse_histogram",
    "sparse_threshold",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "gaussian_sigma",
    "laplace_noise",
    "private_quantile",
    "public_unit_directions",
    "resolve_random_state",
    "two_sided_geometric",
    "zcdp_gaussian_sigma",
    "zcdp_to_approx_dp",
]
