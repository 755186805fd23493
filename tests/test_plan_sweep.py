"""The autotune sweep a generated wrapper runs when the configs come from the cuTile reference
(bot/plan/sweep.py): at most SWEEP_LIMIT, spread over the grid, said in the plan and the file."""

from __future__ import annotations

import itertools

import pytest

from bot.plan import sweep
from bot.targets.types import Source

REFERENCE = Source("reference", "src/tilegym/ops/cutile/bmm.py: _bmm_autotune_configs()")


def bmm_sm90_grid() -> list[dict[str, int]]:
    """The 18 configs TileGym's cuTile bmm lists for sm_90, in its order."""
    return [
        {"BM": m, "BN": n, "BK": 64, "GROUP_SIZE_M": 8, "OCCUPANCY": occ, "NUM_CTAS": 2}
        for m, n, occ in itertools.product((64, 128, 256), (64, 128, 256), (1, 2))
    ]


def test_a_long_reference_list_is_cut_to_the_limit_spread_over_every_value():
    grid = bmm_sm90_grid()
    (group,), source = sweep.fit(({"when": "always", "configs": grid},), REFERENCE)
    kept = group["configs"]
    assert len(kept) == sweep.SWEEP_LIMIT
    assert kept[0] == grid[0]  # the config an untuned call launches stays first
    assert [grid.index(c) for c in kept] == sorted(grid.index(c) for c in kept)  # the reference's order
    for field in ("BM", "BN", "OCCUPANCY"):
        assert {c[field] for c in kept} == {c[field] for c in grid}
    # spread: no tile size takes more than 3 of the 8 (the list's start alone is BM=64 six times)
    assert max(sum(c["BM"] == m for c in kept) for m in (64, 128, 256)) <= 3
    assert "8 of the reference's 18 configs" in group[sweep.NOTE_KEY]
    assert source.kind == "reference"
    assert source.detail.startswith(REFERENCE.detail)
    assert "when always: 8 of the reference's 18" in source.detail
    assert "python.configs in host_contract.yaml" in source.detail


def test_the_same_list_gives_the_same_sweep():
    groups = ({"when": "always", "configs": bmm_sm90_grid()},)
    assert sweep.fit(groups, REFERENCE) == sweep.fit(groups, REFERENCE)


def test_the_porters_list_and_a_short_reference_list_are_swept_whole():
    long = ({"when": "always", "configs": bmm_sm90_grid()},)
    contract = Source("contract", "host_contract.yaml python.configs")
    assert sweep.fit(long, contract) == (long, contract)
    short = ({"when": "x > 1", "configs": bmm_sm90_grid()[:4]},)
    assert sweep.fit(short, REFERENCE) == (short, REFERENCE)


def test_repeats_are_swept_once_and_said():
    grid = bmm_sm90_grid()[:3]
    (group,), source = sweep.fit(({"when": "always", "configs": grid * 3},), REFERENCE)
    assert group["configs"] == grid
    assert "3 distinct configs (9 listed), each once" in group[sweep.NOTE_KEY]
    assert "3 distinct configs (9 listed)" in source.detail


def test_values_beyond_the_limit_are_named():
    many = [{"TILE": t} for t in range(1, 12)]
    (group,), _ = sweep.fit(({"when": "always", "configs": many},), REFERENCE)
    assert [c["TILE"] for c in group["configs"]] == list(range(1, 9))
    assert group[sweep.NOTE_KEY].endswith("values left out: TILE=9, TILE=10, TILE=11")


def test_only_the_long_group_of_several_changes():
    groups = (
        {"when": "_device_capability()[0] < 9", "configs": bmm_sm90_grid()[:2]},
        {"when": "always", "configs": bmm_sm90_grid()},
    )
    fitted, source = sweep.fit(groups, REFERENCE)
    assert fitted[0] is groups[0]
    assert len(fitted[1]["configs"]) == sweep.SWEEP_LIMIT
    assert "when _device_capability()" not in source.detail


def test_the_cut_groups_make_the_perf_stages_host_line_and_the_others_none():
    grid = bmm_sm90_grid()
    groups, _ = sweep.fit(
        (
            {"when": "_device_capability() == (9, 0)", "configs": grid},
            {"when": "always", "configs": grid[:3] * 2},  # repeats dropped, nothing cut
        ),
        REFERENCE,
    )
    line = sweep.cut_line(list(groups))
    assert "8 of 18 when _device_capability() == (9, 0)" in line
    assert "always" not in line and "python.configs" in line
    assert sweep.cut_line(list(groups[1:])) == ""


def test_on_a_known_gpu_only_the_groups_its_device_test_passes_are_named():
    grid = bmm_sm90_grid()
    groups, _ = sweep.fit(
        (
            {"when": "(static_persistent) and (_device_capability() in [(12, 0), (12, 1)])", "configs": grid},
            {"when": "(static_persistent) and (_device_capability()[0] < 9)", "configs": grid},
            {"when": "(static_persistent) and (_device_capability() == (9, 0))", "configs": grid},
            {"when": "(static_persistent) and (not (_device_capability()[0] < 9))", "configs": grid},
        ),
        REFERENCE,
    )
    h200 = sweep.cut_line(list(groups), sweep.capability_of("NVIDIA H200 (sm_90)"))
    assert "(9, 0)" in h200 and "not (_device_capability()[0] < 9)" in h200
    assert "(12, 0)" not in h200 and "when (static_persistent) and (_device_capability()[0] < 9)" not in h200
    a100 = sweep.cut_line(list(groups), sweep.capability_of("NVIDIA A100-SXM4-80GB (sm_80)"))
    assert a100.count(" of 18 when ") == 1 and "(_device_capability()[0] < 9); sweep" in a100
    # no device known, or a test it cannot read: every cut group is named
    assert sweep.cut_line(list(groups)).count(" of 18 when ") == 4
    odd = ({**groups[2], "when": "_device_capability() == SOME_NAME"},)
    assert sweep.cut_line(list(odd), (8, 0)) != ""


@pytest.mark.parametrize(
    "device, capability",
    [("NVIDIA H200 (sm_90)", (9, 0)), ("NVIDIA B200 (sm_100)", (10, 0)), ("x (sm_121)", (12, 1)), ("", None)],
)
def test_the_capability_is_read_from_the_probes_device_name(device, capability):
    assert sweep.capability_of(device) == capability
