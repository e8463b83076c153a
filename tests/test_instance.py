"""Instance loading and validation (SPEC §2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import INSTANCES, make

from cpsched.instance import Instance, InstanceError, load_instance, parse_override


def base() -> dict:
    return {"name": "x", "pipeline": {"devices": 4, "stages_per_device": 2, "microbatches": 8},
            "costs": {"forward": 5, "backward": 10}}


def test_defaults_filled() -> None:
    inst = Instance.from_dict(base())
    d = inst.to_dict()
    assert d["pipeline"]["placement"] == "loop"
    assert d["pipeline"]["split_backward"] is False
    assert d["memory"] == {"activation": 1, "released_by_input": 0.0}
    assert d["costs"]["p2p_latency"] == 0
    assert inst.forward == (5.0,) * 8 and inst.backward == (10.0,) * 8
    assert inst.num_stages == 8


@pytest.mark.parametrize("path", sorted(INSTANCES.glob("*.toml")), ids=lambda p: p.stem)
def test_shipped_instances_load(path: Path) -> None:
    inst = load_instance(path)
    assert inst.name == path.stem
    again = Instance.from_dict(inst.to_dict())
    assert again == inst


def _with(section: str | None, **kw) -> dict:
    d = base()
    if section is None:
        d.update(kw)
    else:
        d[section] = {**d.get(section, {}), **kw}
    return d


@pytest.mark.parametrize(("data", "field", "needle"), [
    (_with(None, colour="red"), "colour", "unknown key"),
    (_with("pipeline", bogus=1), "pipeline.bogus", "unknown key"),
    (_with("pipeline", devices=0), "pipeline.devices", ">= 1"),
    (_with("pipeline", devices=2.5), "pipeline.devices", "integer"),
    (_with("pipeline", devices="4"), "pipeline.devices", "integer"),
    (_with("pipeline", placement="zigzag"), "pipeline.placement", "'loop'"),
    (_with("pipeline", placement="v", stages_per_device=3), "pipeline.stages_per_device",
     "stages_per_device = 2"),
    (_with("pipeline", placement="bidirectional", stages_per_device=1, devices=3),
     "pipeline.devices", "even"),
    (_with("costs", forward=-1), "costs.forward", ">= 0"),
    (_with("costs", forward=[1, 2, 3]), "costs.forward", "S = p * v = 8"),
    (_with("costs", forward=[1, 2, 3, "a", 5, 6, 7, 8]), "costs.forward", "element 3"),
    (_with("costs", forward="fast"), "costs.forward", "number"),
    (_with("costs", p2p_latency=-0.5), "costs.p2p_latency", ">= 0"),
    ({"name": "x", "pipeline": {"devices": 2, "microbatches": 2}, "costs": {"forward": 1}},
     "costs.backward", "required"),
    (_with("pipeline", split_backward=True), "costs.backward_input", "required"),
    (_with("memory", limit=1), "memory.limit", "at least 2"),
    (_with("memory", released_by_input=1.5), "memory.released_by_input", "[0, 1]"),
    (_with("memory", activation=[1, 1]), "memory.activation", "S = p * v = 8"),
    ({"pipeline": {"devices": 2, "microbatches": 2}, "costs": {"forward": 1, "backward": 1}},
     "name", "missing"),
    (_with(None, pipeline="four"), "pipeline", "table"),
])
def test_bad_fields_named(data: dict, field: str, needle: str) -> None:
    with pytest.raises(InstanceError) as ei:
        Instance.from_dict(data)
    assert ei.value.field == field
    assert needle in str(ei.value)


def test_split_backward_fused_duration() -> None:
    inst = make(2, 1, 2, F=1, I=2, W=3)
    assert inst.backward == (5.0, 5.0)
    with pytest.raises(InstanceError, match="costs.backward"):
        Instance.from_dict({**inst.to_dict(), "costs": {"forward": 1, "backward": 4,
                                                        "backward_input": 2,
                                                        "backward_weight": 3}})


def test_time_scale_and_ticks() -> None:
    inst = make(2, 1, 2, F=1.25, B=2.5, latency=0.125)
    assert inst.time_scale == 1000
    assert inst.ticks(1.25) == 1250 and inst.from_ticks(1250) == 1.25


def test_placements() -> None:
    v = make(4, 2, 4, placement="v")
    assert [v.device_of(s) for s in range(8)] == [0, 1, 2, 3, 3, 2, 1, 0]
    loop = make(4, 2, 4)
    assert [loop.device_of(s) for s in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
    bi = make(4, 1, 4, placement="bidirectional")
    assert [bi.device_of(s, 0) for s in range(4)] == [0, 1, 2, 3]
    assert [bi.device_of(s, 3) for s in range(4)] == [3, 2, 1, 0]


def test_min_memory_limit() -> None:
    assert make(4, 2, 4, activation=[1, 2, 3, 4, 5, 6, 7, 8]).min_memory_limit() == 4 + 8
    assert make(4, 1, 4, placement="bidirectional",
                activation=[1, 2, 3, 4]).min_memory_limit() == 4


def test_overrides_and_flags(tmp_path: Path) -> None:
    inst = load_instance(INSTANCES / "article-interleaved.toml",
                         ["pipeline.microbatches=16", "memory.limit=9"])
    assert inst.m == 16 and inst.memory_limit == 9
    assert parse_override('pipeline.placement="v"') == ("pipeline.placement", "v")
    assert parse_override("pipeline.placement=v") == ("pipeline.placement", "v")
    with pytest.raises(InstanceError, match="--set"):
        parse_override("novalue")
    with pytest.raises(InstanceError, match="unknown key"):
        load_instance(INSTANCES / "article-interleaved.toml", ["bogus.x=1"])
    flags = load_instance(None, {"pipeline.devices": 2, "pipeline.microbatches": 3,
                                 "costs.forward": 1, "costs.backward": 2})
    assert flags.p == 2 and flags.name == "instance"
    p = tmp_path / "bad.toml"
    p.write_text("name = [")
    with pytest.raises(InstanceError, match="valid TOML"):
        load_instance(p)
    with pytest.raises(InstanceError, match="existing TOML file"):
        load_instance(tmp_path / "missing.toml")


def test_toml_round_trip(tmp_path: Path, every_feature: Instance) -> None:
    p = tmp_path / "x.toml"
    p.write_text(every_feature.to_toml())
    assert load_instance(p) == every_feature


def test_too_large_rejected() -> None:
    with pytest.raises(InstanceError, match="at most 200000 actions"):
        make(1000, 1, 1000)
    with pytest.raises(InstanceError) as ei:
        Instance.from_dict({"name": "x", "pipeline": {"devices": 2},
                            "costs": {"forward": 1, "backward": 1}})
    assert str(ei.value) == "pipeline.microbatches: required field is missing"
