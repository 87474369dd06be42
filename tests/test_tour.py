"""The reading tour (docs/TOUR.md, issue 35): every stop names code that exists, in the
file the stop names, and the tour stays a sitting's reading (under 3,000 lines).

A stop names functions, classes, methods or a module (its docstring), not line numbers;
this test is what keeps those names true as the code changes.
"""

import importlib
import inspect
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOUR = ROOT / "docs" / "TOUR.md"
NAME = re.compile(r"`(agentflow(?:\.\w+)+)`")
QUESTIONS = ("the state machine", "the gate", "resume", "`ToolCall`", "the store")


def rows(text: str) -> list:
    """``(first cell, file cell, read cell)`` of every table row naming a file."""
    found = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1].startswith("`agentflow/"):
            found.append((cells[0], cells[1].strip("`"), cells[2]))
    return found


def resolve(dotted: str):
    """The module, class or function ``dotted`` names; fails the test when none."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            assert hasattr(obj, attr), f"docs/TOUR.md names {dotted}: no {attr} in {obj}"
            obj = getattr(obj, attr)
        return inspect.unwrap(obj)  # a @contextmanager's own function
    raise AssertionError(f"docs/TOUR.md names {dotted}: no such module")


def reading(obj) -> int:
    """Lines a reader reads for a name: a module's docstring, else the source."""
    if inspect.ismodule(obj):
        return len((obj.__doc__ or "").splitlines())
    return len(inspect.getsourcelines(obj)[0])


def source_file(obj) -> str:
    path = obj.__file__ if inspect.ismodule(obj) else inspect.getsourcefile(obj)
    return pathlib.Path(path).resolve().relative_to(ROOT).as_posix()


def test_every_stop_names_code_that_exists_in_its_file():
    table = rows(TOUR.read_text(encoding="utf-8"))
    assert len(table) >= 20
    for first, path, read in table:
        names = NAME.findall(read)
        assert names, f"the row {first!r} names nothing to read"
        assert (ROOT / path).is_file(), path
        first_file = [n for n in names if source_file(resolve(n)) == path]
        assert first_file, f"the row {first!r} names nothing in {path}"
        for name in names:
            obj = resolve(name)
            assert inspect.ismodule(obj) or inspect.isclass(obj) or callable(obj), name


def test_the_stops_of_the_run_are_in_the_file_each_names():
    """In the two runs' tables (numbered stops) every name lives in the stop's file."""
    for first, path, read in rows(TOUR.read_text(encoding="utf-8")):
        if first.isdigit():
            for name in NAME.findall(read):
                assert source_file(resolve(name)) == path, (first, name, path)


def test_the_tour_has_a_row_for_each_of_the_five_questions():
    questions = [first for first, _, _ in rows(TOUR.read_text(encoding="utf-8"))
                 if not first.isdigit()]
    for topic in QUESTIONS:
        assert sum(topic in q for q in questions) >= 1, topic
    assert len(questions) == 5


def test_the_tour_reads_under_three_thousand_lines():
    names = set(NAME.findall(TOUR.read_text(encoding="utf-8")))
    total = sum(reading(resolve(name)) for name in names)
    assert 500 < total < 3000, total
