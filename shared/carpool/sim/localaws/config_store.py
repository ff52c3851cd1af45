"""The deployed config written into local AWS the way the stack writes it (`carpool.config_parts`): for the
simulation and tests. The functions only read it (`carpool.adapters.aws.config`); the stack writes the same
parameters through CloudFormation, so this writer is no part of the library's AWS surface."""

from __future__ import annotations

from typing import Any

from carpool import config_parts
from carpool.adapters.aws.config import GET_PARAMETERS_MAX


def write_config_text(client: Any, parameter_name: str, text: str) -> None:
    """Store `text` as the stack does (`carpool.config_parts`): the parts first, then the index, then the
    parts a previous, larger config left behind. For the simulation and tests; the stack writes the same
    parameters through CloudFormation."""
    index, parts = config_parts.encode(text)
    before = _stored_parts(client, parameter_name)
    for number, part in enumerate(parts):
        client.put_parameter(Name=config_parts.part_name(parameter_name, number), Value=part, Type="String",
                             Overwrite=True, Tier="Standard")
    # ADVANCED as the stack's index: SSM never moves a parameter back to STANDARD, so one tier for good
    client.put_parameter(Name=parameter_name, Value=index, Type="String", Overwrite=True, Tier="Advanced")
    stale = [config_parts.part_name(parameter_name, n) for n in range(len(parts), before)]
    for start in range(0, len(stale), GET_PARAMETERS_MAX):
        client.delete_parameters(Names=stale[start : start + GET_PARAMETERS_MAX])


def _stored_parts(client: Any, parameter_name: str) -> int:
    """How many parts the config stored now has (0: none, or no config yet)."""
    try:
        value = str(client.get_parameter(Name=parameter_name)["Parameter"]["Value"])
    except client.exceptions.ParameterNotFound:
        return 0
    try:
        pointer = config_parts.pointer_of(value)
    except config_parts.ConfigPartsError:
        return config_parts.MAX_PARTS  # unreadable: clear every part name there could be
    return pointer.parts if pointer is not None else 0
