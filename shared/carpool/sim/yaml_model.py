"""The conventions of the scenario file's models: camelCase in YAML (like Kubernetes), snake_case in Python,
and an unknown field an error, so a typo is reported with its path instead of being ignored.

Neutral ground: the scenario (`carpool.sim.run.scenario`) is assembled from sections declared where they are
played, the simulated cluster's among them (`carpool.sim.cluster.specs`), and the cluster may not import the
run; both import this instead.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class YamlModel(BaseModel):
    """A section of a scenario file."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")
