"""The core's run input: the shared settings, the tools' declarations and the run's ports."""

from __future__ import annotations

from typing import final

from attrs import field, frozen

from mule._fields_repr import fields_repr
from mule.effects._outcome import OutputT
from mule.effects._ports import Ports
from mule.effects._settings import MuleRunSettings
from mule.effects._tools import MuleToolDeclaration


@final
@frozen(kw_only=True)
class MulePortsInput(MuleRunSettings[OutputT]):
    """Everything one run of the core needs: settings, tool declarations and `Ports`.

    Attributes:
        tools: The tool declarations (their prepare door is `ports.prepare_tool`).
        ports: The run's Result-returning callbacks (`Ports`).

    """

    tools: tuple[MuleToolDeclaration, ...] = ()
    ports: Ports = field(factory=Ports)

    __repr__ = fields_repr


__all__ = ["MulePortsInput"]
