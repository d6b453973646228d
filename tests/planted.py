"""Deliberately wrong passes for reproducer and bisection tests, as plugin source code.

``PLANTED_SOURCE`` is the module of a pass distribution (see ``dists.make_dist``):

- ``planted`` (NodePass): rewrites every ``relu``/``add``/``mul`` call into a fresh copy of
  itself (correct), except the ``wrong_at``-th rewrite, which replaces the node by its first
  argument (wrong); ``raise_at`` makes the hook raise at that visit instead. The node it broke
  is appended to ``Planted.log``.
- ``planted_graph`` (GraphPass): multiplies the graph's output by ``factor`` (wrong unless 1).
"""

from __future__ import annotations

PLANTED_SOURCE = '''
import operator
import fxpasses
from fxpasses import Replace


class Planted(fxpasses.NodePass):
    """Copy relu/add/mul nodes, breaking one of them on purpose."""

    name = "planted"
    log = []

    class Options(fxpasses.PassOptions):
        wrong_at: int = 0
        raise_at: int = 0

    def setup(self, gm, ctx):
        self.n = 0

    @fxpasses.on("relu", "add", "mul", op="call_function")
    def visit(self, node, ctx):
        self.n += 1
        if self.n == self.options.raise_at:
            type(self).log.append(node.name)
            raise RuntimeError(f"planted failure at %{node.name}")
        if self.n == self.options.wrong_at:
            type(self).log.append(node.name)
            return Replace(node.args[0])
        return Replace(ctx.call_function(node.target, node.args, node.kwargs))


class PlantedGraph(fxpasses.GraphPass):
    """Scale the graph's output (wrong unless factor is 1)."""

    name = "planted_graph"

    class Options(fxpasses.PassOptions):
        factor: float = 2.0

    def run(self, gm, ctx):
        out = next(n for n in gm.graph.nodes if n.op == "output")
        value = out.args[0]
        first = value[0] if isinstance(value, (tuple, list)) else value
        with gm.graph.inserting_before(out):
            scaled = gm.graph.call_function(operator.mul, (first, self.options.factor))
        if isinstance(value, (tuple, list)):
            scaled = type(value)([scaled, *value[1:]])
        out.args = (scaled,)
        return True


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    register(Planted)
    register(PlantedGraph)
'''


def load_planted(module_name: str):
    """``PLANTED_SOURCE`` executed as a module named ``module_name`` (in process, no dist)."""
    import types

    mod = types.ModuleType(module_name)
    exec(PLANTED_SOURCE, mod.__dict__)
    return mod


def planted_registry(mod):
    """A registry with the default passes and ``mod``'s two planted passes (log cleared)."""
    from fxpasses import Registry

    r = Registry()
    r.register(mod.Planted)
    r.register(mod.PlantedGraph)
    mod.Planted.log.clear()
    return r
