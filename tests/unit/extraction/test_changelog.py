"""Facts from one changelog release: every bullet a dated change naming its release; Python
support and dependency constraints about the project, ending what they replace."""

from __future__ import annotations

from dataclasses import dataclass

from lcg.extraction.changelog import changelog_graph, release_of
from lcg.extraction.heuristic import heuristic_entities, heuristic_graph

RELEASE = """Document: flask 3.1.0
Release: flask 3.1.0 (2024-11-13)
Section: Changed

### Changed

-   Drop support for Python 3.8.
-   Require Werkzeug >= 3.1.
-   Add support for Python 3.13.

### Fixed

* Fix the `Request.json` cache when the body is read twice. (#5001)
* Fix a crash when the app has no name. (#5002)

### Removed

- Remove the deprecated `app.json_encoder` attribute.

**Deprecations**:

- The `FLASK_ENV` variable is now deprecated.

### Security

- Escape the debugger's frames (CVE-2024-1234).

Prose about the release is not a change.
"""


@dataclass
class Existing:
    source: str
    predicate: str
    target: str


def _facts(text: str, existing: list[Existing] | None = None) -> list[tuple[str, str, str]]:
    graph = changelog_graph(text, existing or [])
    assert graph is not None
    return [(f["source"], f["predicate"], f["target"]) for f in graph["facts"]]


def test_a_text_without_a_release_context_line_is_not_read_as_a_release() -> None:
    assert release_of("Document: notes\n\n- Add a thing.") is None
    assert changelog_graph("- Add support for Python 3.13.") is None


def test_every_bullet_becomes_one_fact_of_its_release_dated_by_it() -> None:
    graph = changelog_graph(RELEASE)
    assert graph is not None
    facts = graph["facts"]
    assert {f["valid_at"] for f in facts} == {"2024-11-13T00:00:00Z"}
    assert all(f["fact"].startswith("flask 3.1.0") for f in facts)
    assert [(f["source"], f["predicate"], f["target"]) for f in facts] == [
        ("flask", "DROPPED_SUPPORT_FOR", "Python 3.8"),
        ("flask", "REQUIRES", "Werkzeug"),
        ("flask", "SUPPORTS", "Python 3.13"),
        ("flask 3.1.0", "FIXED", "Request.json"),
        ("flask 3.1.0", "FIXED", "flask #5002"),
        ("flask 3.1.0", "REMOVED", "app.json_encoder"),
        ("flask 3.1.0", "DEPRECATED", "FLASK_ENV"),
        ("flask 3.1.0", "SECURITY_FIX", "flask 3.1.0 change 8"),
    ]
    requires = next(f for f in facts if f["predicate"] == "REQUIRES")
    assert requires["fact"] == "flask 3.1.0 requires Werkzeug>=3.1: Require Werkzeug >= 3.1."


def test_a_new_minimum_and_a_dropped_python_end_the_facts_they_replace() -> None:
    existing = [
        Existing("flask", "REQUIRES", "werkzeug"),
        Existing("flask", "REQUIRES", "Jinja2"),
        Existing("flask", "SUPPORTS", "Python 3.8"),
        Existing("flask", "SUPPORTS", "Python 3.9"),
        Existing("flask 2.0.0", "ADDED", "app.json_encoder"),
        Existing("quart 1.0.0", "ADDED", "app.json_encoder"),
    ]
    graph = changelog_graph(RELEASE, existing)
    assert graph is not None
    ends = {f["predicate"]: f["supersedes"] for f in graph["facts"] if f["supersedes"]}
    assert ends == {"REQUIRES": [0], "DROPPED_SUPPORT_FOR": [2], "REMOVED": [4]}


def test_two_bullets_about_one_thing_in_one_release_stay_two_facts() -> None:
    text = (
        "Release: httpx 0.28.0 (2024-11-28)\n\n"
        "* Fix `Client` timeouts. (#10)\n* Fix `Client` proxies. (#11)\n* Fix `Client` again.\n"
    )
    assert _facts(text) == [
        ("httpx 0.28.0", "FIXED", "Client"),
        ("httpx 0.28.0", "FIXED", "httpx #11"),
        ("httpx 0.28.0", "FIXED", "httpx 0.28.0 change 3"),
    ]


def test_dependency_constraints_in_the_forms_changelogs_write_them() -> None:
    text = (
        "Release: poetry 2.4.0 (2026-05-03)\n\n"
        "- Require `installer>=1.0.0` ([#10869](https://github.com/x/y/pull/10869)).\n"
        "- Allow `findpython>=0.8` (#10874).\n"
        "- Re-allow `virtualenv==20.3`.\n"
        "* Bump `pydantic-core` to v2.27.1 by @someone in [#1](https://x/1)\n"
        "- Require test suite to pass with free threading\n"
    )
    graph = changelog_graph(text)
    assert graph is not None
    requires = [f["fact"].split(":")[0] for f in graph["facts"] if f["predicate"] == "REQUIRES"]
    assert requires == [
        "poetry 2.4.0 requires installer>=1.0.0",
        "poetry 2.4.0 requires findpython>=0.8",
        "poetry 2.4.0 requires virtualenv==20.3",
        "poetry 2.4.0 requires pydantic-core==2.27.1",
    ]
    assert "https://" not in " ".join(f["fact"] for f in graph["facts"])


def test_python_versions_only_from_support_statements() -> None:
    text = (
        "Release: pydantic 2.9.0 (2024-09-05)\n\n"
        "* Add initial support for Python 3.14\n"
        "* Python 3.9 support, thanks\n"
        "* Remove Python 3.8 Support\n"
        "* Add support for proxy tunnels for Python 3.6 + asyncio.\n"
        "* Fix a bug in Python 3.10.0-3.10.12\n"
        "* Drop Python 3.7, and PyPy 3.7 and 3.8\n"
    )
    versions = [(p, t) for _, p, t in _facts(text) if t.startswith("Python")]
    assert versions == [
        ("SUPPORTS", "Python 3.14"),
        ("SUPPORTS", "Python 3.9"),
        ("DROPPED_SUPPORT_FOR", "Python 3.8"),
        ("DROPPED_SUPPORT_FOR", "Python 3.7"),
    ]


def test_the_heuristic_extractor_reads_a_release_by_its_structure() -> None:
    names = [e["name"] for e in heuristic_entities(RELEASE)["entities"]]
    assert names[:3] == ["flask", "flask 3.1.0", "Python 3.8"]
    assert heuristic_graph(RELEASE)["facts"][0]["predicate"] == "DROPPED_SUPPORT_FOR"


def test_a_list_of_python_versions_gives_one_fact_each() -> None:
    text = (
        "Release: x 1.0 (2024-01-01)\n\n- Add support for Python 3.12 and 3.13.\n"
        "- Drop support for Python 3.6, 3.7 and 3.8\n- Add support for Python 3.11. Fix 3.10.\n"
    )
    assert [(p, t) for _, p, t in _facts(text)] == [
        ("SUPPORTS", "Python 3.12"),
        ("SUPPORTS", "Python 3.13"),
        ("DROPPED_SUPPORT_FOR", "Python 3.6"),
        ("DROPPED_SUPPORT_FOR", "Python 3.7"),
        ("DROPPED_SUPPORT_FOR", "Python 3.8"),
        ("SUPPORTS", "Python 3.11"),
    ]


def test_a_bullet_naming_the_project_in_code_is_not_a_fact_about_the_project() -> None:
    text = "Release: flask 3.1.0 (2024-11-13)\n\n- Document `flask` and `Flask.run`. (#7)\n"
    assert _facts(text) == [("flask 3.1.0", "CHANGED", "Flask.run")]
