"""Stage E's cap on the measured configs (bot/perf/cover.py): every parameter value at least once,
the rest in the run's order, the same choice each time."""

from __future__ import annotations

import itertools

import pytest

from bot.cli_args import add_perf
from bot.perf import cover, run
from bot.perf.records import split_backend
from bot.testresults.cases import split_nodeid

FILE = "tests/ops/test_op.py::Test_Op::test_perf"


def ids_of(*axes: tuple, backends=("cutile_rs", "cutile", "pytorch")) -> list[str]:
    return [
        f"{FILE}[{backend}-{'-'.join(map(str, values))}]"
        for values in itertools.product(*axes)
        for backend in backends
    ]


def configs(chosen: cover.Chosen) -> list[str]:
    return list(dict.fromkeys(split_backend(split_nodeid(i)[2])[1] for i in chosen.ids))


def test_a_selection_within_the_cap_runs_whole_and_in_the_runs_order():
    ids = ids_of((1024, 4096), ("torch.float16", "torch.bfloat16"))
    chosen = cover.choose(ids, 8)
    assert chosen.ids == run.by_config(ids)
    assert not chosen.capped and chosen.configs == chosen.collected == 4


def test_a_cap_of_zero_measures_every_config():
    ids = ids_of(range(20), ("torch.float16",))
    assert cover.choose(ids, 0).configs == 20


def test_the_capped_choice_names_every_value_of_every_axis():
    m, n, k = (256, 1024, 4096, 8192), (128, 512, 2048), (64, 4096)
    dtypes = ("torch.float16", "torch.bfloat16")
    ids = ids_of(m, n, k, (True, False), dtypes)
    chosen = cover.choose(ids, 8)
    assert chosen.capped and chosen.configs == 8 and chosen.collected == 4 * 3 * 2 * 2 * 2
    fields = [c.split("-") for c in configs(chosen)]
    for position, axis in enumerate((m, n, k, (True, False), dtypes)):
        assert {f[position] for f in fields} == {str(v) for v in axis}, position
    assert chosen.left_out == ()


def test_each_chosen_config_keeps_its_three_backends_cutile_rs_first():
    ids = ids_of((1, 2, 3, 4, 5, 6, 7, 8, 9, 10), ("torch.float16",))
    chosen = cover.choose(ids, 4)
    triples = [chosen.ids[i : i + 3] for i in range(0, len(chosen.ids), 3)]
    assert len(triples) == 4
    for triple in triples:
        assert [split_backend(split_nodeid(t)[2])[0] for t in triple] == ["cutile-rs", "cutile", "pytorch"]


def test_the_choice_is_the_same_for_the_same_collection_in_any_order():
    ids = ids_of((1, 2, 3, 4, 5), ("a", "b", "c"), ("torch.float16", "torch.float32"))
    first = cover.choose(ids, 6)
    again = cover.choose(list(ids), 6)
    assert first == again
    assert configs(first) == [c for c in configs(cover.choose(ids, 0)) if c in configs(first)]


def test_a_cap_below_the_cover_names_the_values_left_out():
    ids = ids_of(range(6), ("torch.float16",))
    chosen = cover.choose(ids, 4)
    assert chosen.configs == 4
    assert len(chosen.left_out) == 2
    assert all("test_perf field 1" in v for v in chosen.left_out)
    assert "values beyond the cap" in chosen.note(4)


def test_values_holding_a_dash_are_covered_as_words_wherever_they_stand():
    ids = [f"{FILE}[cutile_rs-{v}-torch.float16]" for v in ("-1", "0", "1", "2", "3")]
    ids += [f"{FILE}[cutile-{v}-torch.float16]" for v in ("-1", "0", "1", "2", "3")]
    chosen = cover.choose(ids, 2)
    assert chosen.configs == 2 and chosen.collected == 5
    assert chosen.left_out  # five values, two configs: said, not hidden


def test_two_perf_functions_share_a_cap_below_their_cover():
    ids = ids_of((1, 2, 3, 4, 5, 6)) + [
        i.replace("::test_perf[", "::test_perf_other[") for i in ids_of(("x", "y"))
    ]
    chosen = cover.choose(ids, 4)
    tests = [split_nodeid(i)[1].rsplit("::", 1)[-1] for i in chosen.ids[::3]]
    assert sorted(tests) == ["test_perf", "test_perf", "test_perf_other", "test_perf_other"]


def test_the_note_says_what_was_measured():
    ids = ids_of(range(10), ("torch.float16",))
    assert cover.choose(ids, 0).note(0) == "all 10 config(s) of the selection measured (cap off)"
    assert (
        cover.choose(ids, 3).note(3).startswith("3 of 10 configs measured (stage E's cap, --perf-configs 3)")
    )


def test_the_cli_takes_a_count_and_refuses_a_negative_one():
    import argparse

    p = argparse.ArgumentParser()
    add_perf(p)
    assert p.parse_args([]).perf_configs == 8
    assert p.parse_args(["--perf-configs", "0"]).perf_configs == 0
    with pytest.raises(SystemExit):
        p.parse_args(["--perf-configs", "-1"])
