"""lab/faults/server.py: a replica's faults are one value, its options derived from it."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from lab.faults.server import Faults


def parse(argv: list[str]) -> Faults:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replica", default="r")
    Faults.add_options(parser)
    return Faults.from_options(parser.parse_args(argv))


@pytest.mark.parametrize(
    "faults",
    [
        Faults("r"),
        Faults("r", buffer_size=4, buffer_ttl=0.5, retry_ms=300),
        Faults("r", pause_after=2, ignore_delete=True, no_event_ids=True),
        Faults("r", **{s.name: True for s in Faults.switches() if s.metadata["kind"] is bool}),
    ],
)
def test_options_give_the_server_the_same_faults(faults: Faults) -> None:
    assert parse(faults.options()) == faults


def test_no_switch_set_is_no_option() -> None:
    assert Faults("r").options() == []
    assert parse([]) == Faults("r")


def test_every_field_but_the_replica_is_a_switch_with_help() -> None:
    names = [f.name for f in dataclasses.fields(Faults)]
    assert [s.name for s in Faults.switches()] == names[1:]
    assert all(s.metadata["help"] for s in Faults.switches())


def test_an_unknown_switch_is_refused() -> None:
    with pytest.raises(TypeError):
        Faults("r", buffer_sise=4)  # type: ignore[call-arg]
