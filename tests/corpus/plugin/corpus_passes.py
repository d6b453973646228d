"""Passes the corpus needs that the built-ins cannot give: a cycle, a missing requirement."""

import fxpasses


class _Base(fxpasses.GraphPass):
    def run(self, gm, ctx):
        return False


class CycleA(_Base):
    """Must run before corpus_cycle_b."""

    name = "corpus_cycle_a"
    before = ("corpus_cycle_b",)


class CycleB(_Base):
    """Must run before corpus_cycle_a."""

    name = "corpus_cycle_b"
    before = ("corpus_cycle_a",)


class NeedsMissing(_Base):
    """Requires a pass that is not installed."""

    name = "corpus_needs_missing"
    requires = ("corpus_not_installed",)


@fxpasses.hookimpl
def fxpasses_register_passes(register):
    for cls in (CycleA, CycleB, NeedsMissing):
        register(cls)
