"""PyTorch action CSV export/import (cpsched.torch_io) and the real PyTorch run (examples/).

The first half needs no torch: CSV text round trips over every registered schedule that applies
to a set of small instances (loop and v placements, split backward, latency, overlapped F&B
pairs), the compute_comms ordering rules, and the error messages.  The second half checks our
files with PyTorch's own parser, validator, lowering and dry-run simulator, reads PyTorch's own
generators' orders back, and runs ``examples/run_torch.py`` for real on small instances.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from unittest import mock

import pytest

from cpsched.graph import dependencies, duration, fused_rule_from
from cpsched.instance import Instance
from cpsched.model import Action, Kind, Overlap, Schedule, default_actions
from cpsched.schedules import REGISTRY, run_schedule
from cpsched.simulate import simulate
from cpsched.torch_io import (
    TorchCsvError,
    comms_rows,
    normalize_format,
    parse_torch_csv,
    read_torch_csv,
    stage_to_rank,
    to_torch_csv,
    write_torch_csv,
)
from cpsched.validate import validate

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "run_torch.py"


# --------------------------------------------------------------------------- instances
def make_instance(name: str, p: int, m: int, v: int = 1, placement: str = "loop",
                  split: bool = False, latency: float = 0, overlap: float | None = None,
                  **costs: float) -> Instance:
    c: dict = {"forward": costs.get("forward", 2), "p2p_latency": latency}
    if split:
        c["backward_input"] = costs.get("backward_input", 2)
        c["backward_weight"] = costs.get("backward_weight", 1)
    else:
        c["backward"] = costs.get("backward", 4)
    if overlap is not None:
        c["overlap_forward_backward"] = overlap
    return Instance.from_dict({
        "name": name,
        "pipeline": {"devices": p, "stages_per_device": v, "microbatches": m,
                     "placement": placement, "split_backward": split},
        "costs": c,
    })


INSTANCES = {
    "loop-p2-v1": make_instance("loop-p2-v1", 2, 4),
    "loop-p4-v1-lat": make_instance("loop-p4-v1-lat", 4, 8, latency=0.5),
    "loop-p2-v2": make_instance("loop-p2-v2", 2, 4, v=2),
    "article": make_instance("article", 4, 8, v=2, forward=5, backward=10),
    "loop-p2-v1-split": make_instance("loop-p2-v1-split", 2, 4, split=True),
    "loop-p3-v2-split": make_instance("loop-p3-v2-split", 3, 6, v=2, split=True,
                                      backward_input=1.5),
    "v-p2-split-ov": make_instance("v-p2-split-ov", 2, 4, v=2, placement="v", split=True,
                                   latency=0.5, overlap=3),
    "v-p3-split": make_instance("v-p3-split", 3, 6, v=2, placement="v", split=True),
}

#: PyTorch 2.13's ScheduleDualPipeV order for 2 ranks, 4 microbatches (mixes B with I/W and
#: has overlapped F&B pairs); as data, so that the no-torch tests cover overlap pairs too.
DUALPIPEV_P2_M4 = (
    "0F0,0F1,0F2,3F0,3I0,3W0,3F1,(0F3;3B1)OVERLAP_F_B,(3F2;0B0)OVERLAP_F_B,3B2,"
    "(3F3;0B1)OVERLAP_F_B,3B3,0I2,0W2,0I3,0W3\n"
    "1F0,2F0,1F1,2F1,1F2,2B0,(2F2;1B0)OVERLAP_F_B,(1F3;2B1)OVERLAP_F_B,"
    "(2F3;1B1)OVERLAP_F_B,2B2,1B2,2I3,1I3,2W3,1W3\n"
)


def greedy_orders(inst: Instance) -> list[list[Action]]:
    """A valid order for any loop/v instance: list scheduling by earliest start, backward
    (B/I) before F before W on ties (a zero-bubble-like order with split backward)."""
    acts = default_actions(inst)
    rule = fused_rule_from(acts)
    end: dict[Action, int] = {}
    free = [0] * inst.p
    remaining = set(acts)
    orders: list[list[Action]] = [[] for _ in range(inst.p)]
    prio = {Kind.I: 0, Kind.B: 0, Kind.F: 1, Kind.W: 2}
    while remaining:
        best = None
        for a in remaining:
            preds = dependencies(inst, a, rule)
            if any(q not in end for q, _ in preds):
                continue
            d = inst.device_of(a.stage, a.microbatch)
            t = max([free[d]] + [end[q] + lag for q, lag in preds])
            key = (t, prio[a.kind], a.microbatch,
                   a.stage if a.kind == Kind.F else -a.stage, d)
            if best is None or key < best[0]:
                best = (key, a, d, t)
        assert best is not None
        _, a, d, t = best
        end[a] = t + duration(inst, a)
        free[d] = end[a]
        orders[d].append(a)
        remaining.remove(a)
    return orders


def _cases() -> list[tuple[str, str]]:
    cases = []
    for iname, inst in INSTANCES.items():
        for sname, spec in REGISTRY.items():
            if spec.reason_not_applicable(inst) is None:
                cases.append((iname, sname))
        cases.append((iname, "greedy"))
    cases.append(("v-p2-split-ov", "pytorch-dualpipev"))
    return cases


CASES = _cases()


def make_schedule(iname: str, sname: str) -> Schedule:
    inst = INSTANCES[iname]
    if sname == "greedy":
        sched = simulate(inst, greedy_orders(inst), method="greedy")
    elif sname == "pytorch-dualpipev":
        sched = read_torch_csv(DUALPIPEV_P2_M4, inst)
    else:
        try:
            sched = run_schedule(sname, inst)
        except Exception as exc:  # another module's generator; not what this file tests
            pytest.skip(f"{sname} on {iname} did not generate: {exc}")
    problems = validate(sched)
    if problems:
        pytest.skip(f"{sname} on {iname} is not a valid schedule: {problems[:2]}")
    return sched


@pytest.fixture(params=CASES, ids=[f"{i}-{s}" for i, s in CASES])
def case(request) -> Schedule:  # noqa: ANN001
    return make_schedule(*request.param)


def csv_cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


# --------------------------------------------------------------------------- no torch
def test_module_does_not_import_torch() -> None:
    code = "import sys, cpsched.torch_io; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_cases_cover_split_backward_overlap_and_v() -> None:
    kinds = set()
    placements = set()
    overlaps = 0
    for iname, sname in CASES:
        inst = INSTANCES[iname]
        placements.add(inst.placement)
        if sname == "pytorch-dualpipev":
            sched = make_schedule(iname, sname)
            kinds |= {a.kind for a in sched.actions}
            overlaps += sum(a.overlap is not None for a in sched.actions)
        elif inst.split_backward:
            kinds |= {Kind.I, Kind.W}
    assert {"loop", "v"} <= placements
    assert {Kind.I, Kind.W} <= kinds and overlaps > 0


def test_round_trip_text(case: Schedule) -> None:
    inst = case.instance
    text = to_torch_csv(case)
    rows = csv_cells(text)
    assert len(rows) == inst.p
    orders = case.orders()
    assert rows == [[str(s) for s in steps] for steps in orders]
    back = read_torch_csv(text, inst)
    assert back.orders() == orders
    assert validate(back) == []
    assert back.method == "torch-csv"
    # the orders are timed as soon as possible: same times as the heuristic's own simulation
    assert back.makespan <= case.makespan + 1e-9
    if case.method != "cpsat":
        assert [a.to_dict() for a in back.actions] == [a.to_dict() for a in case.actions]


def test_round_trip_compute_comms_text(case: Schedule) -> None:
    text = to_torch_csv(case, "compute_comms")
    back = read_torch_csv(text, case.instance)
    assert back.orders() == case.orders()


def test_round_trip_file(tmp_path: Path, case: Schedule) -> None:
    path = write_torch_csv(case, tmp_path / "s.csv", "torch-csv")
    for src in (path, str(path)):
        assert read_torch_csv(src, case.instance).orders() == case.orders()


def _parse_comm(cell: str) -> tuple[int, str, int | None]:
    mt = re.fullmatch(r"(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|REDUCE_GRAD)(\d*)", cell)
    assert mt, cell
    return int(mt.group(1)), mt.group(2), int(mt.group(3)) if mt.group(3) else None


def check_comms_rows(schedule: Schedule, rows: list[list[str]]) -> None:
    """The properties :func:`comms_rows` promises (see its docstring)."""
    inst = schedule.instance
    ranks = stage_to_rank(inst)
    S = inst.num_stages
    channel_sends: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    channel_recvs: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    reduce_seen: set[int] = set()
    for r, row in enumerate(rows):
        recv_posted: set[tuple[str, int, int]] = set()
        done: list[Action] = []
        bwd_count: dict[int, int] = defaultdict(int)
        for k, cell in enumerate(row):
            if cell.endswith("OVERLAP_F_B") or re.fullmatch(r"\d+[FBIW]\d+", cell):
                if cell.endswith("OVERLAP_F_B"):
                    subs = [Action.parse(x) for x in cell[1:cell.index(")")].split(";")]
                else:
                    subs = [Action.parse(cell)]
                expected_sends = []
                for a in subs:
                    s, i = a.stage, a.microbatch
                    assert ranks[s] == r
                    if a.kind == Kind.F and s > 0 and ranks[s - 1] != r:
                        assert ("F", s, i) in recv_posted, f"rank {r}: {cell} before its RECV_F"
                    if a.kind in (Kind.B, Kind.I) and s < S - 1 and ranks[s + 1] != r:
                        assert ("B", s, i) in recv_posted, f"rank {r}: {cell} before its RECV_B"
                    if a.kind == Kind.F and s < S - 1 and ranks[s + 1] != r:
                        expected_sends.append(f"{s}SEND_F{i}")
                    if a.kind in (Kind.B, Kind.I) and s > 0 and ranks[s - 1] != r:
                        expected_sends.append(f"{s}SEND_B{i}")
                    if a.kind in (Kind.B, Kind.W):
                        bwd_count[s] += 1
                    done.append(a)
                # sends follow their compute step immediately
                assert row[k + 1:k + 1 + len(expected_sends)] == expected_sends
                continue
            s, kind, i = _parse_comm(cell)
            if kind == "REDUCE_GRAD":
                assert bwd_count[s] == inst.m and s not in reduce_seen
                reduce_seen.add(s)
            elif kind == "RECV_F":
                recv_posted.add(("F", s, i))
                channel_recvs[(ranks[s - 1], r)].append((s - 1, i))
            elif kind == "RECV_B":
                recv_posted.add(("B", s, i))
                channel_recvs[(ranks[s + 1], r)].append((s + 1, i + 10**6))
            elif kind == "SEND_F":
                channel_sends[(r, ranks[s + 1])].append((s, i))
            else:
                channel_sends[(r, ranks[s - 1])].append((s, i + 10**6))
    assert reduce_seen == set(range(S))
    # point-to-point messages between two ranks are posted in the same order on both sides
    assert channel_sends == channel_recvs


def test_compute_comms_rules(case: Schedule) -> None:
    rows = csv_cells(to_torch_csv(case, "compute_comms"))
    assert rows == comms_rows(case)
    check_comms_rows(case, rows)
    no_reduce = comms_rows(case, reduce_grad=False)
    assert not any("REDUCE_GRAD" in c for row in no_reduce for c in row)


def test_v_placement_has_no_comms_between_adjacent_local_stages() -> None:
    sched = make_schedule("v-p2-split-ov", "greedy")
    cells = [c for row in comms_rows(sched) for c in row]
    # v placement, p = 2: stages 0, 3 on rank 0 and 1, 2 on rank 1; 1 -> 2 stays on rank 1
    for present in ("0SEND_F0", "1RECV_F0", "2SEND_F0", "3RECV_F0", "3SEND_B0", "2RECV_B0",
                    "1SEND_B0", "0RECV_B0"):
        assert present in cells
    for absent in ("1SEND_F0", "2RECV_F0", "2SEND_B0", "1RECV_B0", "3SEND_F0", "0SEND_B0"):
        assert absent not in cells


def test_blank_none_and_comm_cells_are_ignored() -> None:
    inst = INSTANCES["loop-p2-v1"]
    sched = run_schedule("1f1b", inst)
    rows = csv_cells(to_torch_csv(sched))
    noisy = [[" ", "None", *row[:2], "", "0UNSHARD", *row[2:], "0REDUCE_GRAD", ""] for row in rows]
    noisy[1].insert(1, "1RECV_F0")
    text = "\r\n".join(",".join(r) for r in noisy) + "\r\n\r\n"
    assert read_torch_csv(text, inst).orders() == sched.orders()


def test_read_with_instance_file(tmp_path: Path) -> None:
    inst = INSTANCES["loop-p2-v2"]
    toml = tmp_path / "inst.toml"
    toml.write_text(inst.to_toml(), encoding="utf-8")
    sched = run_schedule("interleaved-1f1b", inst)
    back = read_torch_csv(to_torch_csv(sched), toml)
    assert back.orders() == sched.orders()


def test_format_names() -> None:
    assert normalize_format("torch-csv") == "compute_only"
    assert normalize_format("compute_comms") == "compute_comms"
    with pytest.raises(TorchCsvError, match="compute_only.*compute_comms"):
        normalize_format("xml")


def _err(text: str, inst: Instance) -> str:
    with pytest.raises(TorchCsvError) as info:
        read_torch_csv(text, inst)
    return str(info.value)


def _one_f_one_b_rows() -> tuple[Instance, list[list[str]]]:
    inst = INSTANCES["loop-p2-v1"]
    return inst, csv_cells(to_torch_csv(run_schedule("1f1b", inst)))


def _text(rows: list[list[str]]) -> str:
    return "\n".join(",".join(r) for r in rows) + "\n"


def test_error_bad_cell() -> None:
    inst, rows = _one_f_one_b_rows()
    rows[1][2] = "1X1"
    msg = _err(_text(rows), inst)
    assert "row 2 (rank 1), column 3, cell '1X1'" in msg
    assert "not an action" in msg and "allowed" in msg and "2F0" in msg


def test_error_wrong_rank_count() -> None:
    inst, rows = _one_f_one_b_rows()
    msg = _err(_text(rows[:1]), inst)
    assert "1 row;" in msg and "p = 2 ranks" in msg
    msg = _err(_text([*rows, ["0F0"]]), inst)
    assert "3 rows" in msg


def test_error_action_on_wrong_rank() -> None:
    inst, rows = _one_f_one_b_rows()
    rows[0][0], rows[1][0] = rows[1][0], rows[0][0]
    msg = _err(_text(rows), inst)
    assert "row 1 (rank 0), column 1, cell '1F0'" in msg
    assert "puts stage 1 on rank 1" in msg and "allowed stages on rank 0: 0" in msg


def test_error_ranges_kinds_duplicates_missing() -> None:
    inst, rows = _one_f_one_b_rows()
    bad = [r[:] for r in rows]
    bad[0][0] = "7F0"
    assert "stages 0..1" in _err(_text(bad), inst)
    bad[0][0] = "0F9"
    assert "microbatches 0..3" in _err(_text(bad), inst)
    bad[0][0] = "0I0"
    assert "split_backward" in _err(_text(bad), inst)
    bad[0][0] = "0F1"
    msg = _err(_text(bad), inst)
    assert "appears twice" in msg and "column 2" in msg
    msg = _err(_text([rows[0][:-1], rows[1]]), inst)
    assert "missing" in msg and "0B3" in msg


def test_error_overlap_pairs() -> None:
    inst = INSTANCES["v-p2-split-ov"]
    rows = csv_cells(DUALPIPEV_P2_M4)
    bad = [r[:] for r in rows]
    bad[0][7] = "(0F3;0F4)OVERLAP_F_B"
    assert "exactly one F and one B or I" in _err(_text(bad), inst)
    bad[0][7] = "(0F3;3B1)OVERLAP_X"
    assert "only OVERLAP_F_B pairs are supported" in _err(_text(bad), inst)
    # the last stage's B needs its own F: not a valid pair
    p1 = make_instance("p1", 1, 1, split=False)
    assert "cannot run as one overlapped pair" in _err("(0F0;0B0)OVERLAP_F_B\n", p1)


def test_error_deadlock_names_cells() -> None:
    inst, rows = _one_f_one_b_rows()
    rows[0] = [rows[0][-1], *rows[0][:-1]]  # rank 0 starts with its last backward
    msg = _err(_text(rows), inst)
    assert "deadlock" in msg
    assert "row 1 (rank 0) column 1 '0B3' waits for 1B3 at row 2 (rank 1)" in msg


def test_error_missing_file() -> None:
    with pytest.raises(TorchCsvError, match="no such file"):
        read_torch_csv("/nonexistent/dir/schedule.csv", INSTANCES["loop-p2-v1"])
    with pytest.raises(TorchCsvError, match="no such file"):
        read_torch_csv(Path("nope.csv"), INSTANCES["loop-p2-v1"])


def test_export_rejects_bidirectional_and_broken_orders() -> None:
    bi = Instance.from_dict({"name": "bi", "pipeline": {"devices": 2, "microbatches": 2,
                                                        "placement": "bidirectional"},
                             "costs": {"forward": 1, "backward": 2}})
    orders = [[Action(Kind.F, 0, 0), Action(Kind.F, 1, 1), Action(Kind.B, 1, 1),
               Action(Kind.B, 0, 0)],
              [Action(Kind.F, 0, 1), Action(Kind.F, 1, 0), Action(Kind.B, 1, 0),
               Action(Kind.B, 0, 1)]]
    sched = simulate(bi, orders)
    with pytest.raises(TorchCsvError, match="bidirectional.*no PyTorch equivalent"):
        to_torch_csv(sched)
    # a schedule file whose times put rank orders in a deadlocking sequence
    good = run_schedule("1f1b", INSTANCES["loop-p2-v1"])
    acts = list(good.actions)
    first = next(k for k, a in enumerate(acts) if a.device == 0)
    acts[first] = acts[first]._replace(start=1000, end=1002)
    broken = Schedule(good.instance, acts, method="x")
    with pytest.raises(TorchCsvError, match="deadlock"):
        to_torch_csv(broken)


def test_overlap_pairs_round_trip_exactly() -> None:
    inst = INSTANCES["v-p2-split-ov"]
    sched = read_torch_csv(DUALPIPEV_P2_M4, inst)
    assert to_torch_csv(sched) == DUALPIPEV_P2_M4
    pairs = [s for steps in sched.orders() for s in steps if isinstance(s, Overlap)]
    assert len(pairs) == 6
    assert all(a.end - a.start == 3 for a in sched.actions if a.overlap is not None)


def test_parse_keeps_cell_positions() -> None:
    inst = INSTANCES["v-p2-split-ov"]
    orders, where = parse_torch_csv(DUALPIPEV_P2_M4, inst)
    assert where[Action(Kind.B, 3, 1)].column == 8 and where[Action(Kind.B, 3, 1)].row == 1
    assert sum(len(o) for o in orders) == 16 + 15


# --------------------------------------------------------------------------- with torch
def _torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tsched():
    """torch.distributed.pipelining.schedules (skips without torch)."""
    _torch()
    from torch.distributed.pipelining import schedules

    return schedules


def _torch_actions(tsched, rows: list[list[str]]) -> dict[int, list]:
    return {r: [tsched._Action.from_str(c) for c in row] for r, row in enumerate(rows)}


def _for_dry_run(actions: dict[int, list]) -> dict[int, list]:
    """What PyTorch's ``_simulate_comms_compute`` can take: it raises on ``REDUCE_GRAD``,
    ``UNSHARD``, ``RESHARD`` and ``OVERLAP_F_B`` (all of which the runtime itself runs), so drop
    the first three and expand an overlapped pair into its sub-actions, in the order the runtime
    runs them."""
    out: dict[int, list] = {}
    for r, acts in actions.items():
        row = []
        for a in acts:
            if a is None or a.computation_type.value in ("REDUCE_GRAD", "UNSHARD", "RESHARD"):
                continue
            row.extend(a.sub_actions if a.sub_actions is not None else (a,))
        out[r] = row
    return out


def test_torch_parses_every_cell(tsched, case: Schedule) -> None:
    for fmt in ("compute_only", "compute_comms"):
        rows = csv_cells(to_torch_csv(case, fmt))
        for row in rows:
            for cell in row:
                act = tsched._Action.from_str(cell)
                assert act is not None and str(act) == cell


def test_torch_validate_lower_and_simulate(tsched, case: Schedule) -> None:
    inst = case.instance
    ranks = stage_to_rank(inst)
    S, m, p = inst.num_stages, inst.m, inst.p
    compute = _torch_actions(tsched, csv_cells(to_torch_csv(case)))
    mapping = tsched._validate_schedule(compute, p, S, m)
    assert mapping == {s: ranks[s] for s in range(S)}
    lowered = tsched._add_send_recv({r: list(a) for r, a in compute.items()},
                                    lambda s: ranks[s], S)
    tsched._simulate_comms_compute(_for_dry_run(lowered), lambda s: ranks[s], S)
    ours = _torch_actions(tsched, csv_cells(to_torch_csv(case, "compute_comms")))
    tsched._validate_schedule(ours, p, S, m)
    tsched._simulate_comms_compute(_for_dry_run(ours), lambda s: ranks[s], S)


def _mock_runtime(tsched, inst: Instance):
    from torch.distributed.pipelining.stage import PipelineStage

    stage = mock.create_autospec(PipelineStage, instance=True)
    stage.group_rank = 0
    stage.group_size = inst.p
    stage.submod = None
    stage.num_stages = inst.num_stages
    return tsched._PipelineScheduleRuntime([stage] * inst.v, inst.m)


@pytest.mark.parametrize("iname,sname", [("loop-p2-v2", "greedy"),
                                          ("v-p2-split-ov", "pytorch-dualpipev"),
                                          ("loop-p3-v2-split", "greedy")])
def test_torch_runtime_load_csv_and_dump(tsched, tmp_path: Path, iname: str,
                                         sname: str) -> None:
    """The real ``_PipelineScheduleRuntime._load_csv`` takes both formats; its ``_dump_csv``
    (with PyTorch's own send/recv, UNSHARD, REDUCE_GRAD) reads back to the same orders."""
    sched = make_schedule(iname, sname)
    inst = sched.instance
    ranks = stage_to_rank(inst)
    for fmt in ("compute_only", "compute_comms"):
        path = write_torch_csv(sched, tmp_path / f"{fmt}.csv", fmt)
        rt = _mock_runtime(tsched, inst)
        rt._load_csv(str(path), fmt)
        assert rt.stage_index_to_group_rank == {s: ranks[s] for s in range(inst.num_stages)}
        tsched._simulate_comms_compute(
            _for_dry_run(rt.pipeline_order_with_comms),
            lambda s: ranks[s], inst.num_stages)
        dump = tmp_path / f"dump-{fmt}.csv"
        rt._dump_csv(str(dump), "compute_comms")
        assert read_torch_csv(dump, inst).orders() == sched.orders()
        if fmt == "compute_comms":
            assert rt.pipeline_order_with_comms == _torch_actions(
                tsched, csv_cells(path.read_text()))


TORCH_GENERATORS = [
    # (PyTorch schedule, p, m, stages per rank, placement, split_backward)
    ("GPipe", 2, 4, None, "loop", False),
    ("GPipe", 4, 8, None, "loop", False),
    ("Interleaved1F1B", 2, 4, 2, "loop", False),
    ("Interleaved1F1B", 4, 8, 2, "loop", False),
    ("LoopedBFS", 2, 4, 2, "loop", False),
    ("InterleavedZeroBubble", 2, 4, 2, "loop", True),
    ("InterleavedZeroBubble", 4, 8, 2, "loop", True),
    ("ZBVZeroBubble", 2, 4, 2, "v", True),
    ("ZBVZeroBubble", 4, 8, 2, "v", True),
    ("DualPipeV", 2, 4, 2, "v", True),
    ("DualPipeV", 4, 8, 2, "v", True),
]


def _dump(rows: list[list]) -> str:
    """What PyTorch's ``_dump_csv`` writes (None -> empty cell, actions via str)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    for row in rows:
        writer.writerow(row)
    return buf.getvalue()


@pytest.mark.parametrize("name,p,m,v,placement,split", TORCH_GENERATORS,
                         ids=[f"{g[0]}-p{g[1]}-m{g[2]}" for g in TORCH_GENERATORS])
@pytest.mark.parametrize("with_comms", [False, True], ids=["compute", "comms"])
def test_torch_generators_round_trip(tsched, name: str, p: int, m: int, v: int | None,
                                     placement: str, split: bool, with_comms: bool) -> None:
    from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

    if with_comms and v is None:
        # get_schedule_ops(with_comms=True) hands a single-stage schedule's lone stage object to
        # _PipelineScheduleRuntime, which wants a list (TypeError in PyTorch 2.13)
        pytest.skip("PyTorch's visualizer cannot lower single-stage schedules with comms")

    ops = get_schedule_ops(name, p, m, v, with_comms=with_comms)
    inst = make_instance(f"torch-{name}", p, m, v=v or 1, placement=placement, split=split)
    sched = read_torch_csv(_dump(ops), inst)
    assert validate(sched) == []
    want = [[s for s in row if s is not None and s.is_compute_op] for row in ops]
    assert [[str(s) for s in steps] for steps in sched.orders()] == [[str(a) for a in row]
                                                                      for row in want]
    # and our export of it is what PyTorch generated (compute only)
    if not with_comms:
        assert csv_cells(to_torch_csv(sched)) == [[str(a) for a in row] for row in want]


def test_torch_1f1b_visualizer_order_is_rejected_with_the_cell(tsched) -> None:
    """PyTorch 2.13's Schedule1F1B._get_pipeline_order numbers the last rank's forwards 1..m
    (docs/modelling.md §10): reading it names the out-of-range cell."""
    from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

    ops = get_schedule_ops("1F1B", 2, 4)
    if "1F4" not in {str(a) for a in ops[1] if a is not None}:
        pytest.skip("this PyTorch numbers 1F1B's forwards correctly")
    with pytest.raises(TorchCsvError, match=r"row 2 \(rank 1\), column \d+, cell '1F4'.*"
                                            r"microbatches 0\.\.3"):
        read_torch_csv(_dump(ops), make_instance("t", 2, 4))


# --------------------------------------------------------------------------- real runs
# What they cost: three processes import torch (this test's subprocess, then two spawned gloo
# ranks), ~8 s on an idle 2-core machine and ~30 s beside two busy processes; the jobs
# themselves (m = 4, one step, width 8) take under a second of it, so fewer or smaller jobs
# would lose coverage without saving time.  What they must not do is hang: see _run_example.

#: p = 2 schedules run for real, all in one launch of the example (both CSV formats each).
REAL_RUNS = [
    ("loop-p2-v1", "1f1b"),                   # loop, v = 1, full backward
    ("loop-p2-v2", "interleaved-1f1b"),       # loop, v = 2
    ("loop-p2-v1-split", "greedy"),           # split backward (I/W), zero-bubble-like
    ("v-p2-split-ov", "pytorch-dualpipev"),   # v placement, B mixed with I/W, overlap pairs
]

#: The example's own watchdog per launch (its ``--timeout``, s): it terminates hung ranks and
#: prints ``FAIL ...: timed out after N s (a hang or deadlock)``.
LAUNCH_TIMEOUT = 120.0
#: This test's limit on the whole example (s): the launch plus the parent's torch import and
#: single-process reference; past it the example's process group is killed, ranks included.
EXAMPLE_TIMEOUT = LAUNCH_TIMEOUT + 60.0


def _run_example(args: list[str], cwd: Path,
                 timeout: float = EXAMPLE_TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``python examples/run_torch.py ARGS --timeout LAUNCH_TIMEOUT`` in its own process group;
    fails the test with the output so far if it does not end within ``timeout`` seconds (the
    group is killed first, so no gloo rank is left running)."""
    import os
    import signal

    cmd = [sys.executable, str(EXAMPLE), *args, "--timeout", f"{LAUNCH_TIMEOUT:g}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"examples/run_torch.py {' '.join(args)} did not end within {timeout:g} s "
                    f"(killed with its ranks): a hang, or a machine far too loaded\n"
                    f"stdout: {out}\nstderr (end): {err[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_run_example_fails_clearly_instead_of_hanging(tmp_path: Path) -> None:
    """The guard itself: a run past the limit is killed and reported, not waited for."""
    script = tmp_path / "hang.py"
    script.write_text("import time\ntime.sleep(60)\n")
    with mock.patch(f"{__name__}.EXAMPLE", script), \
            pytest.raises(pytest.fail.Exception, match=r"did not end within 0\.5 s"):
        _run_example([], tmp_path, timeout=0.5)


def test_real_run(tmp_path: Path) -> None:
    _torch()
    paths = []
    for k, (iname, sname) in enumerate(REAL_RUNS):
        paths.append(tmp_path / f"{k}-{iname}-{sname}.json")
        make_schedule(iname, sname).to_json(paths[-1])
    proc = _run_example([*map(str, paths), "--format", "both"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    ok_lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("OK")]
    assert len(ok_lines) == 2 * len(REAL_RUNS), proc.stdout
    for ln in ok_lines:
        grad = float(re.search(r"max\|dgrad\|=(\S+)", ln).group(1))
        assert grad <= 1e-9
    assert "kinds F,I,W" in proc.stdout and "6 overlap pairs" in proc.stdout


def test_real_run_detects_a_wrong_schedule(tmp_path: Path) -> None:
    """Negative control: compute_comms without REDUCE_GRAD leaves gradients m times too big."""
    _torch()
    sched = make_schedule("loop-p2-v1-split", "greedy")
    path = tmp_path / "schedule.json"
    sched.to_json(path)
    proc = _run_example([str(path), "--format", "compute_comms", "--no-reduce-grad"], tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.startswith("FAIL")


def test_real_run_bad_input(tmp_path: Path) -> None:
    _torch()
    path = tmp_path / "missing.json"
    proc = _run_example([str(path)], tmp_path, timeout=60)
    assert proc.returncode == 2 and "no such file" in proc.stderr
