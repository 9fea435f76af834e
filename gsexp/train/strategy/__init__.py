"""Densification strategies: how the set of Gaussians changes during training."""
from __future__ import annotations

import dataclasses

from gsexp.train.strategy.base import NoStrategy, Strategy
from gsexp.train.strategy.budget import BudgetStrategy
from gsexp.train.strategy.default import DefaultStrategy
from gsexp.train.strategy.fastgs import FastGSStrategy
from gsexp.train.strategy.mcmc import MCMCStrategy

STRATEGIES = {"default": DefaultStrategy, "budget": BudgetStrategy, "fastgs": FastGSStrategy, "mcmc": MCMCStrategy,
              "none": NoStrategy}


def make_strategy(name: str, **kwargs) -> Strategy:
    """A strategy by name ("default" | "budget" | "fastgs" | "mcmc" | "none") with its fields set from kwargs."""
    cls = STRATEGIES.get(name)
    if cls is None:
        raise ValueError(f"make_strategy: unknown strategy {name!r}; options: {', '.join(STRATEGIES)}")
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(kwargs) - fields)
    if unknown:
        raise ValueError(f"make_strategy: {name!r} has no field(s) {unknown}; fields: {sorted(fields)}")
    return cls(**kwargs)


__all__ = ["BudgetStrategy", "DefaultStrategy", "FastGSStrategy", "MCMCStrategy", "NoStrategy", "Strategy",
           "make_strategy", "STRATEGIES"]
