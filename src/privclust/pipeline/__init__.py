"""Pipelines under one budget: :class:`PrivatePipeline` and :func:`make_private_pipeline`."""

from ._pipeline import PrivatePipeline, make_private_pipeline

__all__ = ["PrivatePipeline", "make_private_pipeline"]
