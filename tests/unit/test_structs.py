"""Structured context (behaviour §3.5) and procedure applicability matching (behaviour §12.4)."""

from __future__ import annotations

import math

import pytest

from slowave.domain.errors import Violation
from slowave.domain.structs import (
    MAX_CANONICAL_BYTES,
    MAX_DEPTH,
    NULL,
    canonical_json,
    contexts_match,
    depth,
    merge_task_context,
    normalize_procedure_context,
    normalize_task_context,
)


def task(value: dict) -> tuple[dict, list[Violation]]:
    v: list[Violation] = []
    out = normalize_task_context(v, "task_context", value)
    return out, v


def proc(value: dict) -> tuple[dict, list[Violation]]:
    v: list[Violation] = []
    out = normalize_procedure_context(v, "procedure.context", value)
    return out, v


def nested_objects(levels: int) -> dict:
    """An object `levels` deep: {"a": {"a": … {"a": 1}}} (the top level counts as 1)."""
    value: object = 1
    for _ in range(levels):
        value = {"a": value}
    return value  # type: ignore[return-value]


# --------------------------------------------------------------------------- constants


def test_limits():
    assert MAX_DEPTH == 8
    assert MAX_CANONICAL_BYTES == 16384


# --------------------------------------------------------------------------- canonical JSON


def test_canonical_json_sorted_compact_unescaped():
    assert (
        canonical_json({"b": 1, "a": [True, False, "x"], "c": {"z": "é", "y": "日本"}})
        == '{"a":[true,false,"x"],"b":1,"c":{"y":"日本","z":"é"}}'
    )


def test_canonical_json_keys_sorted_by_code_point():
    # U+FF5E sorts before U+1F600 by code point (UTF-16 order would put the emoji first);
    # upper case before lower case; ASCII before non-ASCII.
    value = {"\U0001f600": 1, "\uff5e": 2, "a": 3, "B": 4, "é": 5}
    assert canonical_json(value) == '{"B":4,"a":3,"é":5,"～":2,"😀":1}'


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (3.0, "3"),
        (3, "3"),
        (-2.0, "-2"),
        (1e20, "100000000000000000000"),
        (0.5, "0.5"),
        (0.1, "0.1"),
        (1.25, "1.25"),
        (123456.789, "123456.789"),
    ],
)
def test_canonical_json_numbers(number, text):
    assert canonical_json({"n": number}) == f'{{"n":{text}}}'


def test_canonical_json_nested_list_numbers():
    assert canonical_json({"l": [1.0, 2.5, {"x": 4.0}]}) == '{"l":[1,2.5,{"x":4}]}'


# --------------------------------------------------------------------------- depth


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({}, 1),
        ({"a": 1, "b": "x"}, 1),
        ({"a": [1, 2, 3]}, 1),  # a list of scalars adds nothing
        ({"a": {"b": 1}}, 2),
        ({"a": [{"b": 1}]}, 3),  # list holding an object +1, the object +1
        ({"a": [[1]]}, 2),  # list holding a list +1
        ({"a": [[[1]]]}, 3),
        ({"a": [1, {"b": {"c": 1}}]}, 4),
        ({"x": 1, "a": {"b": {"c": {}}}}, 4),
        (nested_objects(8), 8),
        (nested_objects(9), 9),
    ],
)
def test_depth(value, expected):
    assert depth(value) == expected


# --------------------------------------------------------------------------- task_context


def test_task_context_keys_trimmed_and_lowercased():
    out, v = task({" Env ": "staging", "Python.Version": "3.12", "a-b:c_d": 1})
    assert v == []
    assert out == {"env": "staging", "python.version": "3.12", "a-b:c_d": 1}


@pytest.mark.parametrize("key", ["9x", "_x", "-x", "x y", "x/y", "é", "", "   ", "a" * 65, "x!"])
def test_task_context_bad_keys(key):
    _, v = task({key: "v"})
    assert [x.path for x in v] == [f"task_context.{key}"]


def test_task_context_key_length_limit_is_64():
    out, v = task({"a" * 64: 1})
    assert v == [] and out == {"a" * 64: 1}


def test_task_context_keys_normalising_alike_are_a_violation():
    _, v = task({"Env": "a", "env": "b"})
    assert len(v) == 1 and v[0].path.startswith("task_context.")
    _, v = task({"nested": {" x": 1, "X ": 2}})
    assert len(v) == 1 and v[0].path.startswith("task_context.nested.")


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"x": NULL}, "task_context.x"),
        ({"x": math.inf}, "task_context.x"),
        ({"x": -math.inf}, "task_context.x"),
        ({"x": math.nan}, "task_context.x"),
        ({"env": {"deep": NULL}}, "task_context.env.deep"),
        ({"tools": [{"name": "helm"}]}, "task_context.tools[0]"),
        ({"tools": ["a", ["b"]]}, "task_context.tools[1]"),
        ({"tools": ["a", NULL]}, "task_context.tools[1]"),
        ({"tools": [1, math.nan]}, "task_context.tools[1]"),
    ],
)
def test_task_context_value_violations(value, path):
    _, v = task(value)
    assert [x.path for x in v] == [path]


def test_task_context_reports_every_violation():
    _, v = task({"9x": 1, "a": NULL, "b": [{"c": 1}]})
    assert sorted(x.path for x in v) == ["task_context.9x", "task_context.a", "task_context.b[0]"]


def test_task_context_allowed_values_and_list_dedup():
    out, v = task({"s": "x", "n": 3.5, "i": 2.0, "t": True, "o": {"p": [1, 1.0, "1", True, "a", "a", False, True]}})
    assert v == []
    assert out == {"s": "x", "n": 3.5, "i": 2.0, "t": True, "o": {"p": [1, "1", True, "a", False]}}


def test_task_context_depth_8_accepted_9_rejected():
    _, v = task(nested_objects(8))
    assert v == []
    _, v = task(nested_objects(9))
    assert len(v) == 1 and v[0].path.startswith("task_context")


def test_task_context_canonical_size_exactly_16384_accepted():
    value = {"k": "x" * (16384 - len('{"k":""}'))}
    assert len(canonical_json(value).encode()) == 16384
    _, v = task(value)
    assert v == []


def test_task_context_canonical_size_16385_rejected():
    value = {"k": "x" * (16385 - len('{"k":""}'))}
    _, v = task(value)
    assert [x.path for x in v] == ["task_context"]


def test_task_context_size_counts_utf8_bytes_of_the_normalised_object():
    # 8189 two-byte characters: 8197 characters but 16386 bytes
    _, v = task({"k": "é" * 8189})
    assert [x.path for x in v] == ["task_context"]
    _, v = task({"k": "é" * 8188})  # exactly 16384 bytes
    assert v == []
    # duplicates are removed before measuring: the normalised object is small
    _, v = task({"k": ["y" * 9000, "y" * 9000]})
    assert v == []
    # integral numbers are measured without fraction; keys after lowercasing/trimming
    value = {"  K  ": "x" * (16384 - len('{"k":"",') - len('"n":1}')), "n": 1.0}
    assert len(canonical_json({"k": value["  K  "], "n": 1}).encode()) == 16384
    _, v = task(value)
    assert v == []


def test_task_context_17_kib_rejected():
    _, v = task({"blob": "z" * 17 * 1024})
    assert [x.path for x in v] == ["task_context"]


# --------------------------------------------------------------------------- procedure.context


def test_procedure_context_checklist_63():
    out, v = proc({"Python Version": "3.12", "tools": [{"name": "helm"}], "x": NULL})
    assert v == []
    assert out == {"python_version": "3.12", "tools": [{"name": "helm"}]}


def test_procedure_context_key_normalisation():
    out, v = proc({"  CI / CD  ": 1, "a!!b??c": 2, "ok.key:v-1_x": 3, "é": 4, "Ünïcode Key": 5})
    assert v == []
    assert out == {"ci_cd": 1, "a_b_c": 2, "ok.key:v-1_x": 3, "_": 4, "_n_code_key": 5}


def test_procedure_context_key_cut_to_64():
    out, _ = proc({"K" * 100: 1})
    assert out == {"k" * 64: 1}


def test_procedure_context_blank_key_dropped_with_value():
    out, v = proc({"": {"deep": 1}, "   ": 2, "kept": 3})
    assert v == []
    assert out == {"kept": 3}


def test_procedure_context_collisions_keep_smallest_original_key():
    # "ENV" < "Env" < "env" < "env " in code-point order
    out, v = proc({"env ": "d", "env": "c", "Env": "b", "ENV": "a"})
    assert v == []
    assert out == {"env": "a"}
    out, _ = proc({"a b": 2, "a-b": 1, "a_b": 3})  # "a b" < "a-b" < "a_b"
    assert out == {"a_b": 2, "a-b": 1}


def test_procedure_context_nulls_and_non_finite_dropped_everywhere():
    out, v = proc({"a": NULL, "b": math.inf, "c": [1, NULL, math.nan, 2], "d": {"e": NULL, "f": -math.inf, "g": 1}})
    assert v == []
    assert out == {"c": [1, 2], "d": {"g": 1}}


def test_procedure_context_lists_may_hold_objects_and_lists_and_are_deduplicated():
    out, v = proc({"l": [{"Name": "helm"}, {"name": "helm"}, [1, 2], [1.0, 2.0], 3, 3.0]})
    assert v == []
    assert out == {"l": [{"name": "helm"}, [1, 2], 3]}


def test_procedure_context_depth_8_accepted_9_rejected():
    _, v = proc(nested_objects(8))
    assert v == []
    _, v = proc(nested_objects(9))
    assert len(v) == 1 and v[0].path.startswith("procedure.context")


def test_procedure_context_list_depth():
    # 8 nested lists: 7 hold a list → depth 1 + 7 = 8
    value: object = [1]
    for _ in range(7):
        value = [value]
    _, v = proc({"l": value})
    assert v == []
    _, v = proc({"l": [value]})  # depth 9
    assert len(v) == 1 and v[0].path.startswith("procedure.context")


def test_procedure_context_size_limit():
    _, v = proc({"k": "x" * (16384 - len('{"k":""}'))})
    assert v == []
    _, v = proc({"k": "x" * (16385 - len('{"k":""}'))})
    assert [x.path for x in v] == ["procedure.context"]


def test_procedure_context_only_depth_and_size_are_violations():
    _, v = proc({"9x": 1, "A B": NULL, "l": [[{"x": NULL}]]})
    assert v == []


# --------------------------------------------------------------------------- merge


def test_merge_task_context_top_level_keys_overwrite():
    stored = {"a": 1, "b": {"x": 1}}
    merged = merge_task_context(stored, {"b": {"y": 2}, "c": 3})
    assert merged == {"a": 1, "b": {"y": 2}, "c": 3}
    assert stored == {"a": 1, "b": {"x": 1}}


# --------------------------------------------------------------------------- matching (12.4)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # keys on one side only impose nothing
        ({}, {"env": "prod"}, True),
        ({"a": 1}, {"b": 2}, True),
        # strings: trimmed and case folded
        ({"env": " Staging "}, {"env": "staging"}, True),
        ({"city": "Straße"}, {"city": "STRASSE"}, True),
        ({"env": "staging"}, {"env": "production"}, False),
        # numbers: numerically equal; never a string or boolean
        ({"v": 3}, {"v": 3.0}, True),
        ({"v": 3.5}, {"v": 3.50}, True),
        ({"v": 3}, {"v": 4}, False),
        ({"v": 3}, {"v": "3"}, False),
        ({"v": "3"}, {"v": 3}, False),
        ({"v": 1}, {"v": True}, False),
        ({"v": 0}, {"v": False}, False),
        ({"v": True}, {"v": 1}, False),
        # booleans
        ({"v": True}, {"v": True}, True),
        ({"v": False}, {"v": True}, False),
        ({"v": True}, {"v": "true"}, False),
        # keys ending in _id are ignored, at every depth
        ({"tenant_id": "a"}, {"tenant_id": "b"}, True),
        ({"_id": 1}, {"_id": 2}, True),
        ({"x": {"run_id": 1, "os": "linux"}}, {"x": {"run_id": 2, "os": "LINUX"}}, True),
        ({"id": "a"}, {"id": "b"}, False),
        ({"identity": "a"}, {"identity": "b"}, False),
        ({"idx_id_x": "a"}, {"idx_id_x": "b"}, False),
        # nested objects, at every depth
        ({"env": {"os": "linux"}}, {"env": {"os": "mac"}}, False),
        ({"env": {"os": "linux"}}, {"env": {"arch": "arm"}}, True),
        ({"env": {"os": "linux"}}, {"env": "linux"}, False),
        ({"env": "linux"}, {"env": {"os": "linux"}}, False),
        # lists: matches a non-list value one of its elements matches, or a list sharing an element
        ({"tools": ["helm", "kubectl"]}, {"tools": "HELM"}, True),
        ({"tools": "kubectl "}, {"tools": ["helm", "kubectl"]}, True),
        ({"tools": ["helm", "kubectl"]}, {"tools": "docker"}, False),
        ({"tools": ["a", "b"]}, {"tools": ["c", "B"]}, True),
        ({"tools": ["a"]}, {"tools": ["b"]}, False),
        ({"v": [1, 2]}, {"v": ["1", "2"]}, False),
        ({"v": [1, 2]}, {"v": 2.0}, True),
        ({"tools": [{"name": "helm"}]}, {"tools": {"name": "Helm"}}, True),
        ({"tools": [{"name": "helm"}]}, {"tools": [{"name": "kubectl"}]}, False),
        ({"tools": [{"name": "helm", "tool_id": 1}]}, {"tools": [{"name": "helm", "tool_id": 2}]}, True),
        ({"tools": []}, {"tools": "helm"}, False),
        # the seed's procedure context against task contexts
        ({"environment": "staging", "infra": "Kubernetes", "ci": "GitHub Actions"}, {"environment": "staging"}, True),
        (
            {"environment": "staging", "infra": "Kubernetes", "ci": "GitHub Actions"},
            {"environment": "production"},
            False,
        ),
    ],
)
def test_contexts_match(a, b, expected):
    assert contexts_match(a, b) is expected
    assert contexts_match(b, a) is expected  # symmetric


def test_nul_is_a_violation_at_its_path_in_both_contexts():
    from slowave.domain.structs import normalize_procedure_context, normalize_task_context

    violations: list = []
    assert normalize_task_context(violations, "task_context", {"env": "prod\x00", "zones": ["a", "b\x00"]}) == {}
    assert [v.path for v in violations] == ["task_context.env", "task_context.zones[1]"]
    violations = []
    assert normalize_procedure_context(violations, "procedure.context", {"re\x00gion": "eu", "x": {"y": "\x00"}}) == {}
    assert [v.path for v in violations] == ["procedure.context.re\\u0000gion", "procedure.context.x.y"]
    violations = []
    assert normalize_procedure_context(violations, "procedure.context", {"region": "eu"}) == {"region": "eu"}
    assert violations == []
