"""The library front cannot drift from the declarations: `lcg/library/methods.py` is exactly what
`lcg.library.codegen` renders from the registry now, every registered method but the excluded
ones has a `Graph` method whose parameters are its params model's fields, and Python values
reach the wire as the wire carries them."""

from __future__ import annotations

import inspect
from datetime import UTC, date, datetime

import pytest

from lcg.curation.pointers import Endpoint
from lcg.ingest.caller import GivenEntity, GivenFact
from lcg.library import Graph, codegen, to_wire
from lcg.library.results import RESULTS
from lcg.service.registry import REGISTRY


def test_the_generated_methods_are_current() -> None:
    assert codegen.TARGET.read_text(encoding="utf-8") == codegen.render(), (
        "lcg/library/methods.py is stale: run `python -m lcg.library.codegen`"
    )


def test_every_registered_method_has_a_graph_method_but_the_excluded() -> None:
    assert set(codegen.EXCLUDED) <= set(REGISTRY)
    assert set(RESULTS) <= set(REGISTRY)
    offered = {
        name
        for name, member in vars(Graph.__mro__[1]).items()
        if inspect.iscoroutinefunction(member) and not name.startswith("_")
    }
    expected = {codegen.python_name(m) for m in REGISTRY if m not in codegen.EXCLUDED}
    assert offered == expected
    assert {"add_episode", "add_facts", "find_entities", "get_context", "timeline"} <= offered


@pytest.mark.parametrize("wire", [m for m in REGISTRY if m not in codegen.EXCLUDED])
def test_a_methods_parameters_are_its_params_models_fields(wire: str) -> None:
    method = REGISTRY[wire]
    signature = inspect.signature(getattr(Graph, codegen.python_name(wire)))
    params = [p for p in signature.parameters.values() if p.name != "self"]
    names = [p.name for p in params if p.name != "progress"]
    assert sorted(names) == sorted(method.params.model_fields)
    assert ("progress" in signature.parameters) == method.long_running
    required = {p.name for p in params if p.default is inspect.Parameter.empty}
    model_required = {n for n, f in method.params.model_fields.items() if f.is_required()}
    assert required == model_required | set(method.required or ())
    for p in params:
        if p.default is inspect.Parameter.empty:
            assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, (wire, p.name)
        else:
            assert p.kind is inspect.Parameter.KEYWORD_ONLY, (wire, p.name)
            field = method.params.model_fields.get(p.name)
            if field is not None and field.default_factory is None and field.default is not None:
                assert p.default == field.default, (wire, p.name)


def test_the_codegen_refuses_a_type_it_has_no_rule_for() -> None:
    imports = codegen._Imports(set())
    with pytest.raises(TypeError, match="no library type"):
        codegen._type(complex, "m.f", imports)


def test_python_values_become_wire_values() -> None:
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert to_wire(when) == "2025-01-02T03:04:05+00:00"
    assert to_wire(date(2025, 1, 2)) == "2025-01-02"
    assert to_wire(("a", "b")) == ["a", "b"]
    assert to_wire("abc") == "abc"
    assert to_wire(GivenEntity("Ana", ("Person",))) == {
        "name": "Ana",
        "labels": ["Person"],
        "summary": "",
    }
    assert to_wire(GivenFact("A", "B", "LEADS", "A leads B.", valid_at=when)) == {
        "source": "A",
        "target": "B",
        "relation_type": "LEADS",
        "fact": "A leads B.",
        "valid_at": "2025-01-02T03:04:05+00:00",
        "supersedes": [],
    }
    assert to_wire(Endpoint(source_group_id="g", endpoint_name="X")) == {
        "source_group_id": "g",
        "endpoint_name": "X",
    }
    assert to_wire({"k": [date(2025, 1, 2)]}) == {"k": ["2025-01-02"]}
