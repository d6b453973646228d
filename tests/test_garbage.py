"""A pipeline run leaves no reference cycles of fxpasses' own objects behind.

The pipeline pauses the cyclic garbage collector while it runs (fxpasses.pipeline._gc_paused).
An object of a run caught in a reference cycle is then freed only by the first collection
after it, which walks every object the run allocated that is still tracked: a journal whose
hooks (bound methods, held by the journal itself) made a cycle kept each pass's records alive
to the end of the run, and the collection that then freed them took 0.9 s of the built-in
pipeline on the 100k-node benchmark graph (benchmarks/OPTIMIZATIONS.md, item 50). Reference
counting frees an object outside any cycle as soon as its last reference goes.
"""

from __future__ import annotations

import ast
import gc
import os
import pathlib
import types
import weakref

import pytest
import torch
from test_journal import Block
from torch import nn

import fxpasses
from fxpasses import Pipeline
from fxpasses.capture import capture

#: every pass installed with the package or the example plugin, and options it needs
PASSES = {
    "propagate_shapes": None,
    "print_graph": {"file": os.devnull},
    "remove_dropout": None,
    "fuse_conv_bn": None,
    "simplify_algebra": None,
    "fold_constants": {"fold_parameters": True},
    "eliminate_common_subexpressions": None,
    "eliminate_dead_code": None,
    "rename_nodes": {"pattern": "add", "replacement": "plus"},
    "remove_identity": None,
    "count_ops": None,
}


def _owned(obj: object) -> bool:
    """Whether ``obj`` is an object of fxpasses' own (or its example plugin's) code: an
    instance of one of its classes, or one of its functions or bound methods."""
    if isinstance(obj, types.FunctionType):
        return (obj.__module__ or "").startswith("fxpasses")
    if isinstance(obj, types.MethodType):
        return (obj.__func__.__module__ or "").startswith("fxpasses")
    return type(obj).__module__.startswith("fxpasses")


def _cycles_left_by(fn) -> dict[str, int]:
    """The objects of fxpasses' own code that ``fn()`` left in reference cycles (found by a
    collection after it, kept by ``gc.DEBUG_SAVEALL``): qualified name -> count."""
    gc.collect()
    debug = gc.get_debug()
    gc.set_debug(debug | gc.DEBUG_SAVEALL)
    try:
        fn()
        gc.collect()
        found = [o for o in gc.garbage if _owned(o)]
    finally:
        gc.garbage.clear()
        gc.set_debug(debug)
    counts: dict[str, int] = {}
    for o in found:
        name = getattr(o, "__qualname__", None) or type(o).__qualname__
        counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.mark.parametrize("checked", ["0", "1"], ids=["journal", "checked-journal"])
def test_no_pass_run_leaves_a_reference_cycle_of_fxpasses_objects(dialect, checked, monkeypatch):
    """Every installed pass alone, the inference preset, and the preset with numeric
    verification, in the three dialects, on the users' path (journal) and the suite's
    (journal checked against a snapshot)."""
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", checked)
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block()).eval()
    x = torch.randn(2, 4, 4, 4)
    runs = {name: (lambda name=name, opts=opts: Pipeline([(name, opts) if opts else name])) for name, opts in PASSES.items()}
    runs["inference preset"] = lambda: Pipeline.from_preset("inference")
    runs["inference preset, verify=numeric"] = lambda: Pipeline.from_preset("inference", verify="numeric")
    left = {}
    for label, make in runs.items():
        torch._dynamo.reset()
        cap = capture(model, [x], dialect)
        pipe = make()
        report = {}

        def run(pipe=pipe, cap=cap, report=report):
            report["r"] = pipe.run(cap.gm, cap.inputs)

        cycles = _cycles_left_by(run)
        assert report["r"].passes, label  # it ran
        if cycles:
            left[label] = cycles
    assert left == {}


def test_a_run_keeps_no_erased_node_alive(dialect):
    """The nodes a run erases are freed with the run: the effect analyses' table shared on
    the graph held an entry (and with it the node, its meta and its old arguments) for
    every node it had answered about, erased or not, for as long as the graph lived."""
    torch.manual_seed(0)
    model = nn.Sequential(Block(), Block()).eval()
    x = torch.randn(2, 4, 4, 4)
    cap = capture(model, [x], dialect)
    before = [weakref.ref(n) for n in cap.gm.graph.nodes]
    Pipeline.from_preset("inference").run(cap.gm, cap.inputs)
    gc.collect()
    kept = [n for n in (r() for r in before) if n is not None and n._erased]
    assert len(kept) >= 10  # dropout, batch norms, dead code
    # torch's name space of the graph holds every node it ever named (and an erased node its
    # old neighbours): nothing else may
    names = cap.gm.graph._graph_namespace._obj_to_name
    assert all(n in names for n in kept)
    holders = [
        r for r in gc.get_referrers(*kept)
        if r is not names and r is not kept and not (isinstance(r, torch.fx.Node) and r._erased)
    ]
    assert [type(h).__name__ for h in holders] == []
    del kept


class _Fails(fxpasses.GraphPass):
    """Renames a node (so there is something to roll back), then raises."""

    name = "fails_after_an_edit"
    journal_edits = True
    writes_tensors = False

    def run(self, gm, ctx):
        node = next(n for n in gm.graph.nodes if n.op in ("call_module", "call_function"))
        ctx.rename(node, "renamed_before_failing")
        raise RuntimeError("the pass fails")


class _FailsInAHook(fxpasses.NodePass):
    """Renames the first node it visits (so there is something to roll back), then raises
    from its hook on the second."""

    name = "fails_after_an_edit"
    journal_edits = True
    writes_tensors = False

    def setup(self, gm, ctx):
        self.seen = 0

    @fxpasses.on(op="call_function")
    @fxpasses.on(op="call_module")
    def visit(self, node, ctx):
        self.seen += 1
        if self.seen == 1:
            ctx.rename(node, "renamed_before_failing")
            return None
        raise RuntimeError("the pass fails")


@pytest.mark.parametrize("failing", [_Fails, _FailsInAHook], ids=["graph-pass", "node-hook"])
@pytest.mark.parametrize("on_error", ["rollback", "skip"])
@pytest.mark.parametrize("checked", ["0", "1"], ids=["journal", "checked-journal"])
def test_a_failed_pass_leaves_no_reference_cycle_of_fxpasses_objects(dialect, failing, on_error, checked, monkeypatch):
    """A failure, rolled back and raised (once the caller lets go of the error) or skipped,
    frees the failed pass's journal or snapshot, context and error by reference counting."""
    monkeypatch.setenv("FXPASSES_CHECK_JOURNAL", checked)
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = nn.Sequential(Block()).eval()
    x = torch.randn(2, 4, 4, 4)
    cap = capture(model, [x], dialect)
    reg = fxpasses.Registry()
    reg.register(failing)
    pipe = Pipeline(["remove_dropout", "fails_after_an_edit", "eliminate_dead_code"], registry=reg, on_error=on_error)
    seen = {}

    def run():
        try:
            seen["report"] = pipe.run(cap.gm, cap.inputs)
        except fxpasses.PassFailedError as exc:
            seen["error"] = str(exc)

    assert _cycles_left_by(run) == {}
    if on_error == "skip":
        statuses = [p.status for p in seen["report"].passes]
        assert statuses == ["ok" if p.name != "fails_after_an_edit" else "skipped" for p in seen["report"].passes]
        assert "fails_after_an_edit" in [p.name for p in seen["report"].passes]
    else:
        assert "the pass fails" in seen["error"] and "restored" in seen["error"]
    assert "renamed_before_failing" not in cap.gm.code


def test_the_journal_is_freed_by_reference_counting_once_detached():
    """The journal's hooks are bound methods of the journal: held while it is attached, and
    dropped again on detach (they would otherwise make a cycle)."""
    from fxpasses.journal import Journal

    gm = torch.fx.symbolic_trace(nn.Sequential(nn.Linear(2, 2), nn.ReLU()))

    def use() -> None:
        journal = Journal(gm)
        journal.attach()
        assert len(gm._create_node_hooks) == 1
        relu = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        relu.replace_all_uses_with(relu.args[0])
        gm.graph.erase_node(relu)
        journal.detach()
        assert gm._create_node_hooks == []
        assert journal.records  # it recorded the edits

    assert _cycles_left_by(use) == {}


def _recursive_closures(tree: ast.AST) -> list[tuple[ast.FunctionDef, ast.AST]]:
    """(nested function that calls itself by name, the function it is defined in)."""
    out = []

    def visit(node: ast.AST, enclosing: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if enclosing is not None:
                    loads = {n.id for n in ast.walk(child) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
                    if child.name in loads:
                        out.append((child, enclosing))
                visit(child, child)
            elif isinstance(child, ast.ClassDef):
                visit(child, None if enclosing is None else enclosing)
            else:
                visit(child, enclosing)

    visit(tree, None)
    return out


def test_every_recursive_closure_of_the_package_is_deleted_after_use():
    """A nested function that calls itself is a reference cycle (it -> its cell -> it),
    holding everything it closes over until a collection; each in fxpasses is ``del``-ed in
    the function that defines it (or is a module function)."""
    import fxpasses.builtin_passes

    roots = [pathlib.Path(fxpasses.__file__).parent, pathlib.Path(fxpasses.builtin_passes.__file__).parent]
    files = sorted({p for root in roots for p in root.rglob("*.py")})
    assert len(files) > 40
    missing = []
    found = 0
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for fn, enclosing in _recursive_closures(tree):
            found += 1
            deleted = any(
                isinstance(n, ast.Delete) and any(isinstance(t, ast.Name) and t.id == fn.name for t in n.targets)
                for n in ast.walk(enclosing)
            )
            if not deleted:
                missing.append(f"{path}:{fn.lineno} {fn.name}")
    assert missing == []
    assert found >= 3  # the scan finds them (compare_outputs' walk, DCE's visit, conv-BN's walk)


def test_the_scan_finds_a_recursive_closure_left_undeleted():
    src = (
        "def outer(x):\n"
        "    def walk(n):\n"
        "        return 0 if n == 0 else walk(n - 1)\n"
        "    return walk(x)\n"
        "def fine(x):\n"
        "    def inner(n):\n"
        "        return n\n"
        "    return inner(x)\n"
    )
    found = _recursive_closures(ast.parse(src))
    assert [(f.name, e.name) for f, e in found] == [("walk", "outer")]
