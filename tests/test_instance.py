"""Instance loading and validation (docs/spec.md §2)."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import pytest
import tomli_w
from conftest import INSTANCES, make

from cpsched.instance import (
    Instance,
    InstanceError,
    TickRoundingWarning,
    dumps_toml,
    load_instance,
    parse_override,
)


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
    # the message says what the smallest limit is made of, per placement
    with pytest.raises(InstanceError, match=r"at least 12 \(.*the sum of that device's"):
        make(4, 2, 4, activation=[1, 2, 3, 4, 5, 6, 7, 8], limit=11)
    with pytest.raises(InstanceError, match=r"at least 4 \(.*the larger of that device's two"):
        make(4, 1, 4, placement="bidirectional", activation=[1, 2, 3, 4], limit=3)


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


# ---------------------------------------------------------------- package and new helpers
def test_package_reexports() -> None:
    import cpsched.instance as pkg

    for name in ("Instance", "InstanceError", "Costs", "Memory", "Pipeline", "PerStage",
                 "Number", "load_instance", "read_toml", "parse_override", "MAX_ACTIONS"):
        assert name in pkg.__all__ and hasattr(pkg, name), name


@pytest.mark.parametrize(("section", "key", "value", "needle"), [
    ("pipeline", "devices", True, "must be an integer >= 1"),
    ("pipeline", "microbatches", 4.0, "must be an integer >= 1"),
    ("pipeline", "stages_per_device", -2, "must be an integer >= 1"),
    ("pipeline", "split_backward", "yes", "must be true or false"),
    ("pipeline", "split_backward", 1, "must be true or false"),
    ("costs", "forward", True, "must be a finite number >= 0"),
    ("costs", "forward", [], "non-empty list"),
    ("costs", "forward", [1, 2, 3, 4, 5, 6, 7, float("nan")], "element 7 (nan)"),
    ("costs", "backward", float("inf"), "must be a finite number >= 0"),
    ("costs", "p2p_latency", "1", "must be a finite number >= 0"),
    ("costs", "p2p_latency", float("nan"), "must be a finite number >= 0"),
    ("memory", "limit", -1, "must be a finite number >= 0"),
    ("memory", "limit", False, "must be a finite number >= 0"),
    ("memory", "released_by_input", "half", "must be a fraction in [0, 1]"),
    ("memory", "activation", None, "must be a number >= 0 or a list of numbers >= 0"),
    (None, "description", 3, "must be a string"),
    (None, "name", "a/b", "file name"),
    (None, "name", " ", "non-empty string"),
])
def test_constrained_fields(section: str | None, key: str, value: object, needle: str) -> None:
    with pytest.raises(InstanceError) as ei:
        Instance.from_dict(_with(section, **{key: value}))
    field = key if section is None else f"{section}.{key}"
    assert ei.value.field == field and repr(ei.value.value) == repr(value)
    assert needle in ei.value.allowed
    assert str(ei.value).startswith(f"{field}: " if value is None else f"{field} = {value!r}: ")


def test_unknown_key_lists_allowed() -> None:
    with pytest.raises(InstanceError) as ei:
        Instance.from_dict(_with("memory", limt=4))
    assert ei.value.allowed == "unknown key; allowed here: activation, released_by_input, limit"
    with pytest.raises(InstanceError) as ei:
        Instance.from_dict(_with(None, colour="red"))
    assert ei.value.allowed.endswith("name, description, pipeline, costs, memory")


def test_types_kept_as_written() -> None:
    d = Instance.from_dict(_with("costs", forward=[1, 2.5, 1, 1, 1, 1, 1, 1])).to_dict()
    assert d["costs"]["forward"] == [1, 2.5, 1, 1, 1, 1, 1, 1]
    assert [type(x) for x in d["costs"]["forward"][:2]] == [int, float]
    assert type(d["costs"]["backward"]) is int and type(d["pipeline"]["devices"]) is int


def test_stages_per_device_is_v() -> None:
    inst = make(4, 2, 8)
    assert inst.stages_per_device == inst.v == inst.pipeline.stages_per_device == 2
    with pytest.raises((AttributeError, ValueError)):  # read-only (pydantic: frozen)
        inst.stages_per_device = 3  # type: ignore[misc]


def test_with_memory_limit(article: Instance) -> None:
    limited = article.with_memory_limit(6)
    assert limited.memory_limit == 6 and article.memory_limit is None
    assert limited.with_memory_limit(None) == article
    assert limited == article.replace(**{"memory.limit": 6})
    with pytest.raises(InstanceError) as ei:
        article.with_memory_limit(1)
    assert ei.value.field == "memory.limit" and "at least 2" in ei.value.allowed
    with pytest.raises(InstanceError, match=r"memory.limit = -3: must be a finite number >= 0"):
        article.with_memory_limit(-3)


def test_replace(article: Instance) -> None:
    other = article.replace(name="other", **{"pipeline.microbatches": 4, "costs.forward": 2.5})
    assert (other.name, other.m, other.forward[0]) == ("other", 4, 2.5)
    assert (article.name, article.m) == ("article", 8)
    with pytest.raises(InstanceError, match="unknown key"):
        article.replace(**{"pipeline.chunks": 2})
    with pytest.raises(InstanceError) as ei:
        article.replace(**{"pipeline.devices": 0})
    assert ei.value.field == "pipeline.devices"


@pytest.mark.parametrize("path", sorted(INSTANCES.glob("*.toml")), ids=lambda p: p.stem)
def test_shipped_instances_toml_round_trip(path: Path, tmp_path: Path) -> None:
    inst = load_instance(path)
    out = tmp_path / path.name
    out.write_text(inst.to_toml())
    assert load_instance(out) == inst


@pytest.mark.parametrize("path", sorted((INSTANCES / "scale").glob("*.toml")),
                         ids=lambda p: p.stem)
def test_scale_instances_round_trip_with_one_line_lists(path: Path, tmp_path: Path) -> None:
    """Issue 9: tomli_w wrote one line per list element (32-stage lists: 34 lines each);
    the shipped files and what to_toml writes keep each per-stage list on one line."""
    inst = load_instance(path)
    text = inst.to_toml()
    out = tmp_path / path.name
    out.write_text(text)
    assert load_instance(out) == inst
    for t in (text, path.read_text(encoding="utf-8")):
        assert len(t.splitlines()) <= 24  # every section and field: 21 lines at most
        assert not [line for line in t.splitlines() if line.rstrip().endswith("[")]
    if isinstance(inst.costs.forward, list):  # the profiled ones: S floats on one line
        line = next(x for x in text.splitlines() if x.startswith("forward = "))
        assert line == "forward = [" + ", ".join(map(str, inst.forward)) + "]"


def test_to_toml_one_line_lists(every_feature: Instance) -> None:
    text = every_feature.to_toml()
    assert "forward = [1.5, 1.0, 1.25, 2.0]\n" in text
    assert "backward_weight = [1.0, 0.5, 0.75, 1.0]\n" in text
    assert "activation = [1.0, 2.0, 1.0, 1.0]\n" in text
    assert len(text.splitlines()) == 19  # tomli_w alone: 39 (one line per list element)
    assert Instance.from_dict(tomllib.loads(text)) == every_feature


def test_dumps_toml_any_document() -> None:
    """dumps_toml parses back to what tomli_w wrote: nested arrays, tables in arrays,
    strings holding brackets and commas, empty arrays."""
    doc = {"a": [1, 2.5, True], "s": ["x],", "[", "a\nb"], "n": [[1, 2], [3, [4, []]]],
           "e": [], "t": {"x": [1]}, "aot": [{"k": [1, 2], "long": "y" * 120}, {"k": []}],
           "inline": [{"a": 1}, {"b": "]"}]}
    text = dumps_toml(doc)
    assert tomllib.loads(text) == tomllib.loads(tomli_w.dumps(doc)) == doc
    assert 'a = [1, 2.5, true]\n' in text and "n = [[1, 2], [3, [4, []]]]\n" in text
    assert 's = ["x],", "[", "a\\nb"]\n' in text


def test_dumps_toml_falls_back_to_tomli_w(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rewriting that would change the data is never written: tomli_w's text instead."""
    import cpsched.instance.toml_writer as tw

    doc = {"a": [1, 2]}
    monkeypatch.setattr(tw, "compact_arrays", lambda text: "a = [1]\n")
    assert tw.dumps_toml(doc) == tomli_w.dumps(doc) == "a = [\n    1,\n    2,\n]\n"


def test_to_toml_quotes_strings(tmp_path: Path) -> None:
    inst = make(2, 1, 2).replace(description='say "hi" \\ back')
    p = tmp_path / "t.toml"
    p.write_text(inst.to_toml())
    assert load_instance(p).description == 'say "hi" \\ back'
    assert "description" not in make(2, 1, 2).to_toml()


# ------------------------------------------------- issue 12: loopholes in instance validation
@pytest.mark.parametrize(("overlap", "needle"), [
    (0, "between 10 and 15"),          # shorter than its longer half (B = 10)
    (9.5, "between 10 and 15"),
    (15.5, "between 10 and 15"),       # longer than F + B back to back
])
def test_overlap_cost_outside_its_physical_range(overlap: float, needle: str) -> None:
    d = _with("costs", overlap_forward_backward=overlap)
    with pytest.raises(InstanceError) as ei:
        Instance.from_dict(d)
    assert ei.value.field == "costs.overlap_forward_backward" and needle in str(ei.value)
    assert "longer half" in ei.value.allowed and "back to back" in ei.value.allowed


def test_overlap_range_uses_fused_backward_and_same_device_stages() -> None:
    assert make(2, 1, 4, F=2, I=2, W=1, overlap=3).overlap_forward_backward == (3.0, 3.0)
    with pytest.raises(InstanceError, match="between 3 and 5"):
        make(2, 1, 4, F=2, I=2, W=1, overlap=2.5)  # a pair runs I and W fused: B = 3
    # stage 0 and 2 share device 0: B of stage 2 (8) is the longer partner
    costs = {"forward": [1, 1, 1, 1], "backward": [2, 2, 8, 2],
             "overlap_forward_backward": [8, 3, 8, 3]}
    d = {"name": "x", "pipeline": {"devices": 2, "stages_per_device": 2, "microbatches": 4},
         "costs": costs}
    assert Instance.from_dict(d).overlap_forward_backward == (8.0, 3.0, 8.0, 3.0)
    costs["overlap_forward_backward"] = [7, 3, 8, 3]
    with pytest.raises(InstanceError, match="7 at stage 0 must be between 8 and 9"):
        Instance.from_dict(d)


@pytest.mark.parametrize(("section", "key", "value", "field"), [
    ("costs", "forward", 1e300, "costs"),
    ("costs", "p2p_latency", 1e18, "costs"),
    ("costs", "forward", 1e15, "costs"),
])
def test_magnitudes_beyond_cp_sat_integers(section: str, key: str, value: float,
                                           field: str) -> None:
    with pytest.raises(InstanceError) as ei:
        Instance.from_dict(_with(section, **{key: value}))
    assert ei.value.field == field and "64-bit integers" in ei.value.allowed


def test_memory_magnitudes_beyond_cp_sat_integers() -> None:
    d = _with("memory", activation=1e300, limit=1e301)
    with pytest.raises(InstanceError, match="64-bit integers"):
        Instance.from_dict(d)
    assert Instance.from_dict(_with("memory", activation=1e300)).activation[0] == 1e300
    big = Instance.from_dict(_with("memory", activation=2.5e9, limit=8e10))  # bytes: fine
    assert big.memory_limit == 8e10


def test_large_but_representable_times_keep_scale_one() -> None:
    inst = Instance.from_dict(_with("costs", forward=10**9, backward=2 * 10**9))
    assert inst.time_scale == 1 and inst.tick_grid.exact


@pytest.mark.parametrize("name", ["a\x00b", "a\x1bb", "a\nb", "a\rb", "a/b", ".", "..",
                                  "x" * 101, "é" * 101, "a\u2028b", "a\ud800b"])
def test_unsafe_names_rejected(name: str) -> None:
    with pytest.raises(InstanceError) as ei:
        Instance.from_dict(_with(None, name=name))
    assert ei.value.field == "name"


@pytest.mark.parametrize("name", ["article-1", "x" * 100, "é" * 100, "run 3 (v2)", ".hidden"])
def test_safe_names_accepted(name: str) -> None:
    assert Instance.from_dict(_with(None, name=name)).name == name


def test_more_than_three_decimals_are_exact_up_to_six() -> None:
    inst = Instance.from_dict(_with("costs", forward=1.2345, p2p_latency=0.0001))
    assert inst.time_scale == 10**4 and inst.tick_grid.exact
    assert inst.forward[0] == 1.2345 and inst.ticks(inst.p2p_latency) == 1
    six = Instance.from_dict(_with("costs", forward=0.123456))
    assert six.time_scale == 10**6 and six.forward[0] == 0.123456


def test_more_than_six_decimals_rounded_with_a_warning() -> None:
    with pytest.warns(TickRoundingWarning) as rec:
        inst = Instance.from_dict(_with("costs", forward=1.23456789, backward=2))
    assert inst.time_scale == 10**6 and not inst.tick_grid.exact
    assert inst.forward[0] == pytest.approx(1.234568, abs=1e-12)
    msg = str(rec[0].message)
    n = inst.n_actions
    assert "may differ by at most" in msg and f"N = {n} actions" in msg
    err = abs(1.234568 - 1.23456789)
    assert inst.tick_grid.max_error == pytest.approx(err, rel=1e-6)
    assert inst.tick_grid.makespan_error == pytest.approx((2 * n - 1) * err, rel=1e-6)


def test_rounded_and_fine_instances_simulate_validly() -> None:
    from cpsched.schedules import run_all
    from cpsched.validate import validate

    for costs in ({"forward": 1.2345, "backward": 2, "p2p_latency": 0.0001},
                  {"forward": 1.23456789, "backward": 2.1, "p2p_latency": 0.000123456}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TickRoundingWarning)
            inst = Instance.from_dict({**base(), "costs": costs})
        for name, sch in run_all(inst).items():
            assert validate(sch) == [], name
