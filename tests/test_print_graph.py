"""print_graph: every node and its shape in the output, three formats, stderr or a file."""

from __future__ import annotations

import pytest
import torch

import fxpasses
from fxpasses import Pipeline
from fxpasses.builtin_passes.print_graph import PrintGraph, format_graph
from fxpasses.capture import capture
from fxpasses.testing import normalized_code

DIALECTS = ("symbolic_trace", "dynamo", "export")


class Mixed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, idx, mask):
        z = torch.relu(self.lin(x))[idx]  # float32 [3, 3]
        return torch.where(mask, z, 0.0).sum(-1), idx * 2, mask | True


def _inputs():
    return (torch.randn(5, 4), torch.tensor([0, 2, 4]), torch.tensor([[True, False, True]] * 3))


@pytest.fixture(scope="module")
def captured():
    torch.manual_seed(0)
    return {d: capture(Mixed().eval(), _inputs(), d) for d in DIALECTS}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_table_lists_every_node_with_shapes(captured, dialect, capsys):
    cap = captured[dialect]
    code = normalized_code(cap.gm)
    report = Pipeline.from_string("propagate_shapes,print_graph{title='after shapes'}").run(cap.gm, cap.inputs)
    assert normalized_code(cap.gm) == code
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0] == "after shapes"
    assert lines[1].split() == ["#", "name", "op", "target", "args", "value"]
    rows = {line.split()[1]: line for line in lines[3:]}
    assert list(rows) == [n.name for n in cap.gm.graph.nodes]
    for node in cap.gm.graph.nodes:
        assert f" {node.op} " in rows[node.name]
    assert rows["output"].rstrip().endswith("(float32[3], int64[3], bool[3, 3])")
    for text in ("float32[5, 4]", "int64[3]", "bool[3, 3]", "float32[5, 3]", "float32[3, 3]"):
        assert text in err
    assert report.passes[1].counters == {"nodes": len(cap.gm.graph.nodes)}
    assert report.passes[1].changed is False


def test_table_without_shapes_and_default_title(capsys):
    gm = torch.fx.symbolic_trace(Mixed())
    Pipeline(["print_graph"]).run(gm)
    err = capsys.readouterr().err
    assert err.splitlines()[0] == f"graph (symbolic_trace, {len(gm.graph.nodes)} nodes)"
    row = next(line for line in err.splitlines() if line.split()[1:2] == ["lin"])
    assert row.split()[2:] == ["call_module", "lin", "%x", "-"]
    assert "torch.relu" in err and "operator.getitem" in err


def test_args_and_kwargs_are_shown_and_cut():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.sum(x, dim=1, keepdim=True) + torch.cat([x] * 20, 0).sum()

    text = format_graph(torch.fx.symbolic_trace(M()).graph)
    row = next(line for line in text.splitlines() if line.split()[1:2] == ["sum_1"])
    assert "%x, dim=1, keepdim=True" in row
    cat = next(line for line in text.splitlines() if line.split()[1:2] == ["cat"])
    assert "..." in cat and len(cat.split("  ")[0]) < 200


@pytest.mark.parametrize("fmt", ["code", "graph"])
def test_code_and_graph_formats(captured, fmt, tmp_path):
    cap = captured["export"]
    out = tmp_path / "sub" / "g.txt"
    Pipeline([("print_graph", {"format": fmt, "file": str(out), "title": "T"})]).run(cap.gm, cap.inputs)
    text = out.read_text()
    assert text.splitlines()[0] == "T"
    if fmt == "code":
        assert "def forward(self" in text
        assert text.strip().endswith(cap.gm.graph.python_code("self").src.strip())
    else:
        assert text == "T\n" + str(cap.gm.graph) + "\n"
    for node in cap.gm.graph.nodes:
        assert node.op == "output" or node.name in text


def test_code_format_shows_the_graph_before_recompile():
    gm = torch.fx.symbolic_trace(Mixed())
    relu = next(n for n in gm.graph.nodes if n.target is torch.relu)
    relu.target = torch.sigmoid  # not recompiled: gm.code still says relu
    assert "torch.sigmoid" in format_graph(gm.graph, "code") and "torch.sigmoid" not in gm.code


def test_file_overwrite_and_append(tmp_path):
    gm = torch.fx.symbolic_trace(Mixed())
    out = tmp_path / "g.txt"
    for _ in range(2):
        Pipeline([("print_graph", {"file": str(out), "title": "once"})]).run(gm)
    assert out.read_text().count("once") == 1
    Pipeline([("print_graph", {"file": str(out), "title": "twice", "append": True})]).run(gm)
    assert out.read_text().count("once") == 1 and out.read_text().count("twice") == 1


def test_file_dash_is_standard_output(tmp_path, monkeypatch, capsys):
    """`file="-"` wrote a file named "-" (found by a new-user check); it is stdout, as for
    most command-line tools."""
    monkeypatch.chdir(tmp_path)
    gm = torch.fx.symbolic_trace(Mixed())
    Pipeline([("print_graph", {"file": "-", "title": "to stdout"})]).run(gm)
    out, err = capsys.readouterr()
    assert out.startswith("to stdout\n") and "to stdout" not in err
    assert not (tmp_path / "-").exists()


def test_a_file_that_cannot_be_written_is_the_users_mistake_named_so(tmp_path):
    """print_graph{file=FOLDER} passed `fxpasses check` and then failed as a crash of the pass
    (IsADirectoryError, exit 1, a crash reproducer); under a file it said "FileExistsError:
    File exists: 'm.py'" (a new-user check). The options are refused when read, naming the
    path; a path that turns unwritable by the time the pass runs is a UserError naming it."""
    folder = tmp_path / "adir"
    folder.mkdir()
    (tmp_path / "m.py").write_text("")
    for file, said in [
        (folder, f"'{folder}' is a folder; give the path of a file in it (e.g. '{folder / 'graph.txt'}')"),
        (tmp_path / "m.py" / "g.txt", f"'{tmp_path / 'm.py'}' is a file, not a folder, so '{tmp_path / 'm.py' / 'g.txt'}' cannot be made under it"),
        ("", 'an empty path names no file (leave file out to print to stderr, or give "-" for stdout)'),
    ]:
        with pytest.raises(fxpasses.OptionsError) as info:
            Pipeline([("print_graph", {"file": str(file)})])
        assert said in str(info.value) and "print_graph.file" in str(info.value)
    later = tmp_path / "later.txt"
    pipeline = Pipeline([("print_graph", {"file": str(later)})])  # fine when read
    later.mkdir()  # a folder by the time it runs
    gm = torch.fx.symbolic_trace(Mixed())
    code = gm.code
    with pytest.raises(fxpasses.UserError) as info:
        pipeline.run(gm)
    assert not isinstance(info.value, fxpasses.PassFailedError)
    assert str(info.value) == f"print_graph cannot write file='{later}': '{later}' is a folder; give the path of a file in it (e.g. '{later / 'graph.txt'}')"
    assert gm.code == code


def test_registered_and_options_validated(registry):
    assert registry.get("print_graph") is PrintGraph and PrintGraph.kind == "analysis"
    with pytest.raises(fxpasses.OptionsError, match="print_graph.format"):
        Pipeline.from_string("print_graph{format=svg}")
