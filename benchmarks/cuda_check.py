"""fxpasses on a CUDA GPU: outputs, device placement, half precision, torch.compile, rollback
and latency, in one script that prints a markdown report.

    python benchmarks/cuda_check.py [--device cuda|cpu] [--quick] [--out PATH]
                                    [--sections 1,2,3,4,5,6] [--time-limit SECONDS]

Sections (each check is one row: model, dialect, dtype, pass, result, detail):

1. every built-in pass (those the distribution ``fxpasses`` registers) and the ``inference``
   preset through :func:`fxpasses.testing.assert_preserves_outputs` on the example CNN, a
   small GPT-2 and a small BERT (``examples/models.py``), parameters and inputs on the device,
   in each dialect (``symbolic_trace``, ``dynamo``, ``export``); and GPT-2 and BERT called
   with keyword inputs (``input_ids``, ``attention_mask`` with left padding) through
   ``inference`` with ``example_kwargs``, in the dynamo and export dialects;
2. device placement: after the ``inference`` pipeline every parameter, buffer and tensor
   attribute of the GraphModule is where it was (a new one, e.g. a folded constant or a fused
   conv weight, is on the device), and every output is on the device; the GraphModules of
   section 1 are scanned too (a row only when one is misplaced);
3. the CNN in float16 and bfloat16 through ``inference``, ``fuse_conv_bn`` and
   ``fuse_conv_bn{fold_in_graph=true}``: outputs within a tolerance for the dtype, dtypes of
   outputs and floating tensors unchanged, and the convs actually fused where they can be;
4. ``torch.compile(model, backend="fxpasses")`` (CNN, GPT-2) handing the graph to ``eager``
   and to ``inductor`` (``options={"then": ...}``), without and with ``freeze`` (the CNN's
   three conv + BN pairs fused), against the eager model;
5. rollback: a pass that writes the parameters and buffers on the device in place, then
   raises, leaves them bit for bit as they were (``on_error="rollback"``, the default; also
   with ``snapshot_tensors=True``);
6. latency of the exported module (``export`` dialect) before and after ``inference``: median
   of N calls timed with CUDA events (``time.perf_counter`` on the CPU).

TF32 is switched off (``torch.backends.cuda.matmul.allow_tf32`` and
``torch.backends.cudnn.allow_tf32``) so that float32 comparisons mean float32: atol = rtol =
1e-4 on CUDA (kernels may sum in another order before and after a pass), 1e-5 on the CPU
(fxpasses' default). Sections run in the order 1, 2, 3, 5, 6, 4 (inductor compiles last), and
``--time-limit`` starts no check after that many seconds (the rest are listed as not run). Sizes:
CNN width 32 on 8x3x64x64, GPT-2 and BERT with 2 layers of width 256 on 2x64 tokens
(``--quick``: width 16 on 2x3x32x32, 2 layers of width 64 on 1x16 tokens). A failing check
does not stop the run; progress goes to stderr as each check ends, the report to stdout and
(rewritten after every check, so a run stopped by a time limit keeps what it did) to
``--out``. Exit status 1 if any check failed, else 0; 2 for bad arguments.

Import paths: run with fxpasses installed (its entry points give the built-in passes and the
``fxpasses`` torch.compile backend) and ``benchmarks/`` on ``PYTHONPATH`` or as the script's
folder; ``examples/`` is found next to it.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import os
import platform
import statistics
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "examples"))

import torch  # noqa: E402

DIALECTS = ("symbolic_trace", "dynamo", "export")
HF_MODELS = ("GPT-2", "BERT")
SECTION_TITLES = {
    0: "0. Errors of this script outside a check",
    1: "1. Built-in passes and the inference pipeline preserve outputs (float32)",
    2: "2. Device placement after the pipeline",
    3: "3. Half precision (CNN)",
    4: '4. torch.compile(backend="fxpasses")',
    5: "5. Rollback of in-place writes on the device",
    6: "6. Latency before and after the inference pipeline (export dialect)",
}
# Run order: the cheap and central checks first, torch.compile (inductor compiles) last, so
# that a run stopped by --time-limit has done the most.
RUN_ORDER = (1, 2, 3, 5, 6, 4)


class Skip(Exception):
    """A check that does not apply here (said in the row, not a failure)."""


@dataclass
class Row:
    section: int
    model: str
    dialect: str
    dtype: str
    pass_: str
    result: str  # "ok" | "FAIL" | "skip"
    detail: str
    seconds: float


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message`` (and the cause's, for a wrapped error), shortened."""
    def first(e: BaseException) -> str:
        lines = [s for s in str(e).strip().splitlines() if s.strip()]
        return f"{type(e).__name__}: {lines[0].strip() if lines else ''}".rstrip(": ")

    text = first(exc)
    cause = exc.__cause__
    if cause is not None and not isinstance(exc, AssertionError):
        text += f" (caused by {first(cause)})"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------------------------------------
# the report


class Checker:
    def __init__(self, args: argparse.Namespace, header: list[str]) -> None:
        self.args = args
        self.header = header
        self.rows: list[Row] = []
        self.failures: list[tuple[Row, str]] = []
        self.latency: list[list[str]] = []
        self.notes: dict[int, list[str]] = {}
        self.start = time.perf_counter()
        self.deadline = self.start + args.time_limit if args.time_limit else None
        self.finished = False

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline

    def note(self, section: int, text: str) -> None:
        self.notes.setdefault(section, []).append(text)

    def check(
        self, section: int, model: str, dialect: str, dtype: str, pass_: str, fn: Callable[[], Any]
    ) -> str:
        """Run one check and record its row; returns the result ("ok", "FAIL" or "skip")."""
        if self.out_of_time():
            return self.record(Row(section, model, dialect, dtype, pass_, "skip", "not run: --time-limit reached", 0.0))
        t0 = time.perf_counter()
        full = ""
        try:
            detail = fn()
            result, detail = "ok", str(detail or "")
        except Skip as exc:
            result, detail = "skip", str(exc)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # every failure is a row; the run goes on
            result, detail = "FAIL", one_line(exc)
            full = _failure_text(exc)
        finally:
            if self.args.device.startswith("cuda"):
                with contextlib.suppress(Exception):
                    torch.cuda.synchronize()
        row = Row(section, model, dialect, dtype, pass_, result, detail, time.perf_counter() - t0)
        if full:
            self.failures.append((row, full))
        return self.record(row)

    def record(self, row: Row) -> str:
        self.rows.append(row)
        elapsed = time.perf_counter() - self.start
        print(
            f"[{elapsed:7.1f}s] {row.section} {row.model} {row.dialect} {row.dtype} {row.pass_}: "
            f"{row.result} ({row.seconds:.1f}s) {row.detail}",
            file=sys.stderr,
            flush=True,
        )
        self.write_out()
        return row.result

    def report(self) -> str:
        lines = list(self.header)
        n = {k: sum(r.result == k for r in self.rows) for k in ("ok", "FAIL", "skip")}
        state = "finished" if self.finished else "STILL RUNNING or stopped early (partial report)"
        late = sum(r.detail.startswith("not run: --time-limit") for r in self.rows)
        lines += [
            "",
            f"**{n['ok']} ok, {n['FAIL']} failed, {n['skip']} skipped** in {time.perf_counter() - self.start:.0f} s "
            f"({state})." + (f" **{late} of the skipped were not run: --time-limit reached.**" if late else ""),
        ]
        for section in sorted(SECTION_TITLES):
            rows = [r for r in self.rows if r.section == section]
            if not rows and section not in self.notes:
                continue
            lines += ["", f"## {SECTION_TITLES[section]}", ""]
            for text in self.notes.get(section, []):
                lines += [text, ""]
            if section == 6 and self.latency:
                lines += _table(["model", "eager", "before", "after", "after / before", "calls"], self.latency)
                lines.append("")
            if rows:
                lines += _table(
                    ["model", "dialect", "dtype", "pass", "result", "detail", "s"],
                    [
                        [r.model, r.dialect, r.dtype, r.pass_, r.result, r.detail, f"{r.seconds:.1f}"]
                        for r in rows
                    ],
                )
        if self.failures:
            lines += ["", "## Failures in full", ""]
            for row, text in self.failures:
                lines += [
                    f"### {row.section}: {row.model} / {row.dialect} / {row.dtype} / {row.pass_}",
                    "",
                    "```text",
                    text,
                    "```",
                    "",
                ]
        return "\n".join(lines) + "\n"

    def write_out(self) -> None:
        if not self.args.out:
            return
        tmp = self.args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(self.report())
        os.replace(tmp, self.args.out)

    def exit_code(self) -> int:
        return 1 if any(r.result == "FAIL" for r in self.rows) else 0


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(md_escape(str(c)) for c in row) + " |" for row in rows]
    return out


def _failure_text(exc: BaseException, max_lines: int = 40) -> str:
    """The message (pipeline report tables included) and the last frames of the traceback."""
    msg = [f"{type(exc).__name__}: {line}" if i == 0 else line for i, line in enumerate(str(exc).splitlines() or [""])]
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        msg.append(f"caused by {one_line(cause, 1000)}")
    tb = traceback.format_exception(exc)
    tail = "".join(tb[-7:-1]).rstrip().splitlines() if len(tb) > 1 else []
    lines = msg[:max_lines] + ["", "traceback (last frames):"] + tail[-24:]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# models, devices, tensors


@dataclass
class Model:
    name: str
    factory: Callable[[], torch.nn.Module]
    make_inputs: Callable[[torch.device], list[torch.Tensor]]


def model_specs(quick: bool) -> list[Model]:
    import models  # examples/models.py

    def tokens(n: int, t: int) -> Callable[[torch.device], list[torch.Tensor]]:
        return lambda dev: [torch.randint(0, 1000, (n, t), generator=torch.Generator().manual_seed(1)).to(dev)]

    def image(n: int, hw: int) -> Callable[[torch.device], list[torch.Tensor]]:
        return lambda dev: [torch.randn(n, 3, hw, hw, generator=torch.Generator().manual_seed(1)).to(dev)]

    if quick:
        return [
            Model("CNN w16", lambda: models.convnet(width=16), image(2, 32)),
            Model("GPT-2 2x64", lambda: models.gpt2(n_layer=2, n_embd=64, n_head=2), tokens(1, 16)),
            Model(
                "BERT 2x64",
                lambda: models.bert(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128),
                tokens(1, 16),
            ),
        ]
    return [
        # two layers: capture time grows with depth and repeated blocks add no coverage
        Model("CNN w32", lambda: models.convnet(width=32), image(8, 64)),
        Model("GPT-2 2x256", lambda: models.gpt2(n_layer=2, n_embd=256, n_head=4), tokens(2, 64)),
        Model(
            "BERT 2x256",
            lambda: models.bert(num_hidden_layers=2, hidden_size=256, num_attention_heads=4, intermediate_size=1024),
            tokens(2, 64),
        ),
    ]


def is_hf(model: Model) -> bool:
    return model.name.startswith(HF_MODELS)


def same_device(t: torch.Tensor, dev: torch.device) -> bool:
    return t.device.type == dev.type and (dev.index is None or t.device.index == dev.index)


def module_tensors(gm: torch.nn.Module) -> dict[str, tuple[str, torch.Tensor]]:
    """Every parameter, buffer and tensor attribute of ``gm`` (by qualified name, with its kind),
    and the tensors its ``get_attr`` nodes read."""
    out: dict[str, tuple[str, torch.Tensor]] = {}
    for name, p in gm.named_parameters(remove_duplicate=False):
        out[name] = ("parameter", p)
    for name, b in gm.named_buffers(remove_duplicate=False):
        out[name] = ("buffer", b)
    for mname, mod in gm.named_modules(remove_duplicate=False):
        for attr, value in vars(mod).items():
            if isinstance(value, torch.Tensor):
                out.setdefault(f"{mname}.{attr}" if mname else attr, ("attribute", value))
    graph = getattr(gm, "graph", None)
    if graph is not None:
        for node in graph.nodes:
            if node.op != "get_attr":
                continue
            obj: Any = gm
            try:
                for part in str(node.target).split("."):
                    obj = getattr(obj, part)
            except AttributeError:
                continue
            if isinstance(obj, torch.Tensor):
                out.setdefault(str(node.target), ("get_attr", obj))
    return out


def leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from leaves(v)
    else:
        yield value


def misplaced(
    before: dict[str, torch.device], gm: torch.nn.Module, dev: torch.device
) -> tuple[list[str], int, list[str]]:
    """Tensors of ``gm`` on the wrong device: one that was there before the pass must be where
    it was; a new one must be on ``dev``, except a 0-dim tensor on a device the graph already
    held tensors on (a scalar folded from a CPU scalar constant, say). Returns (problems,
    tensors checked, notes)."""
    devices_before = {(d.type, d.index) for d in before.values()}
    problems, notes = [], []
    tensors = module_tensors(gm)
    for name, (kind, t) in tensors.items():
        if name in before:
            if t.device != before[name]:
                problems.append(f"{kind} {name} moved from {before[name]} to {t.device}")
        elif not same_device(t, dev):
            if t.dim() == 0 and (t.device.type, t.device.index) in devices_before:
                notes.append(f"new 0-dim {kind} {name} on {t.device} (the capture held {t.device} tensors)")
            else:
                problems.append(f"new {kind} {name} {tuple(t.shape)} on {t.device}, not {dev}")
    return problems, len(tensors), notes


def devices_of(gm: torch.nn.Module) -> dict[str, torch.device]:
    return {name: t.device for name, (_, t) in module_tensors(gm).items()}


# ---------------------------------------------------------------------------------------------
# section 1 and 2: passes, pipeline, placement


#: options for built-in passes that need some (or would print)
PASS_OPTIONS: dict[str, dict[str, Any]] = {
    "rename_nodes": {"pattern": r"_(\d+)$", "replacement": r"_n\1"},
    "print_graph": {"file": os.devnull},
}


def builtin_entries(reg: Any) -> tuple[list[tuple[str, Any]], list[str]]:
    """(label, pipeline entries) of every pass the built-in distribution registers, the
    inference preset last; and the names of passes left out (other distributions)."""
    entries: list[tuple[str, Any]] = []
    others = []
    for name in reg.names():
        info = reg.info(name)
        if info.distribution != "fxpasses":
            others.append(f"{name} ({info.source})")
            continue
        opts = PASS_OPTIONS.get(name)
        entries.append((name, [(name, opts)] if opts else [name]))
    entries.append(("inference", reg.preset("inference").pipeline))
    return entries, others


def report_detail(report: Any) -> str:
    parts = [f"nodes {report.nodes_before}->{report.nodes_after}"]
    for p in report.passes:
        if p.counters:
            parts.append(f"{p.name} " + ",".join(f"{k}={v}" for k, v in sorted(p.counters.items())))
    return "; ".join(parts)


def section_1_and_2(ck: Checker, reg: Any, specs: list[Model], dev: torch.device, tol: tuple[float, float], sections: set[int]) -> None:
    from fxpasses.capture import capture
    from fxpasses.testing import assert_preserves_outputs

    import fxpasses

    entries, others = builtin_entries(reg)
    if others:
        ck.note(1, "Passes of other installed distributions, not checked: " + ", ".join(others) + ".")
    atol, rtol = tol
    ck.note(
        1,
        f"`assert_preserves_outputs(..., atol={atol:g}, rtol={rtol:g}, dialects=[d])` per dialect; "
        "GPT-2 and BERT do not capture with `symbolic_trace` (known: transformers models branch on "
        "traced values), shown as skip.",
    )
    if 2 in sections:
        ck.note(
            2,
            "Rows: the `inference` pipeline on a fresh capture, then every tensor of the GraphModule "
            "and every output."
            + (
                " The GraphModules of section 1 (each pass) were scanned too; a row for one appears "
                "only when it holds a misplaced tensor."
                if 1 in sections
                else ""
            ),
        )
    scanned = [0]
    for spec in specs:
        torch._dynamo.reset()
        model = spec.factory().to(dev)
        inputs = spec.make_inputs(dev)
        for dialect in DIALECTS:
            capture_failed: list[str] = []
            if 1 in sections:
                for k, (label, entry) in enumerate(entries):
                    if capture_failed:  # one row for the rest: each would fail to capture alike
                        rest = [lab for lab, _ in entries[k:]]
                        ck.record(Row(1, spec.name, dialect, "float32", ", ".join(rest), "skip", "not run: no capture (above)", 0.0))
                        break

                    def run(entry: Any = entry, label: str = label) -> str:
                        try:
                            res = assert_preserves_outputs(
                                entry, model, inputs, atol=atol, rtol=rtol, dialects=[dialect], registry=reg
                            )
                        except fxpasses.UserError as exc:
                            if "could not" in str(exc) and ("trace" in str(exc) or "capture" in str(exc)):
                                capture_failed.append(one_line(exc, 160))
                                if dialect == "symbolic_trace" and is_hf(spec):
                                    raise Skip(f"known: {one_line(exc, 160)}") from exc
                            raise
                        gm, report = res[dialect]
                        scanned[0] += 1
                        problems, _, _ = misplaced({}, gm, dev)
                        if problems and 2 in sections:
                            ck.record(Row(2, spec.name, dialect, "float32", f"after {label}", "FAIL", "; ".join(problems[:5]), 0.0))
                        return report_detail(report)

                    ck.check(1, spec.name, dialect, "float32", label, run)
            if 2 in sections:

                def placement() -> str:
                    try:
                        cap = capture(copy.deepcopy(model), inputs, dialect)
                    except fxpasses.UserError as exc:
                        if dialect == "symbolic_trace" and is_hf(spec):
                            raise Skip(f"known: {one_line(exc, 160)}") from exc
                        raise
                    before = devices_of(cap.gm)
                    fxpasses.Pipeline.from_string(reg.preset("inference").pipeline, registry=reg).run(cap.gm, cap.inputs)
                    problems, n, notes = misplaced(before, cap.gm, dev)
                    with torch.no_grad():
                        out = cap.gm(*cap.inputs)
                    outs = [t for t in leaves(out) if isinstance(t, torch.Tensor)]
                    problems += [f"output {i} on {t.device}" for i, t in enumerate(outs) if not same_device(t, dev)]
                    if not outs:
                        problems.append("no tensor output")
                    if problems:
                        raise AssertionError("; ".join(problems[:6]) + (f" (+{len(problems) - 6} more)" if len(problems) > 6 else ""))
                    return f"{n} module tensors (before: {len(before)}), {len(outs)} outputs on {dev}" + (
                        "; " + "; ".join(notes[:3]) if notes else ""
                    )

                ck.check(2, spec.name, dialect, "float32", "inference", placement)
    if 1 in sections:
        keyword_inputs(ck, reg, specs, dev, tol)
    if 2 in sections and 1 in sections:
        ck.note(2, f"GraphModules of section 1 scanned: {scanned[0]}.")


def keyword_inputs(ck: Checker, reg: Any, specs: list[Model], dev: torch.device, tol: tuple[float, float]) -> None:
    """GPT-2 and BERT called with keyword inputs (``input_ids`` and an ``attention_mask`` with
    left padding), as Hugging Face models are exported: the ``inference`` pipeline through
    ``assert_preserves_outputs(..., example_kwargs=...)`` in the dynamo and export dialects."""
    from fxpasses.testing import assert_preserves_outputs

    atol, rtol = tol
    ck.note(
        1,
        "Rows `inference (keyword inputs)`: the model called as `model(input_ids=..., "
        "attention_mask=...)` with left padding in the mask, captured with those keywords "
        "(`example_kwargs`).",
    )
    for spec in specs:
        if not is_hf(spec):
            continue
        torch._dynamo.reset()
        model = spec.factory().to(dev)
        (ids,) = spec.make_inputs(dev)
        mask = torch.ones_like(ids)
        mask[:, : ids.shape[1] // 4] = 0  # left padding
        for dialect in ("dynamo", "export"):

            def run(dialect: str = dialect) -> str:
                res = assert_preserves_outputs(
                    reg.preset("inference").pipeline,
                    model,
                    (),
                    example_kwargs={"input_ids": ids, "attention_mask": mask},
                    atol=atol,
                    rtol=rtol,
                    dialects=[dialect],
                    registry=reg,
                )
                return report_detail(res[dialect][1])

            ck.check(1, spec.name, dialect, "float32", "inference (keyword inputs)", run)


# ---------------------------------------------------------------------------------------------
# section 3: half precision


HALF_TOL = {"float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}


def section_3(ck: Checker, reg: Any, specs: list[Model], dev: torch.device) -> None:
    from fxpasses.testing import assert_preserves_outputs

    cnn = specs[0]
    entries = [
        ("inference", reg.preset("inference").pipeline),
        ("fuse_conv_bn", ["fuse_conv_bn"]),
        ("fuse_conv_bn{fold_in_graph=true}", [("fuse_conv_bn", {"fold_in_graph": True})]),
    ]
    ck.note(
        3,
        "Tolerances (atol, rtol): "
        + ", ".join(f"{k} {a:g}, {r:g}" for k, (a, r) in HALF_TOL.items())
        + " (fxpasses also widens them to at least torch.testing's defaults for the dtype). "
        "`fused` must be > 0 where the weights are graph constants (not in `dynamo` without "
        "`fold_in_graph`).",
    )
    for dtype_name, (atol, rtol) in HALF_TOL.items():
        dtype = getattr(torch, dtype_name)
        torch._dynamo.reset()
        model = cnn.factory().to(dev, dtype)
        inputs = [x.to(dtype) for x in cnn.make_inputs(dev)]
        for dialect in DIALECTS:
            for label, entry in entries:

                def run(entry: Any = entry, label: str = label) -> str:
                    res = assert_preserves_outputs(entry, model, inputs, atol=atol, rtol=rtol, dialects=[dialect], registry=reg)
                    gm, report = res[dialect]
                    bad = [
                        f"{name} is {t.dtype}"
                        for name, (_, t) in module_tensors(gm).items()
                        if t.is_floating_point() and t.dtype != dtype
                    ]
                    with torch.no_grad():
                        if dialect == "dynamo":
                            out = None  # its inputs are the parameters: dtype compared by assert_preserves_outputs
                        else:
                            out = gm(*inputs)
                    bad += [f"output {i} is {t.dtype}" for i, t in enumerate(leaves(out)) if isinstance(t, torch.Tensor) and t.dtype != dtype]
                    problems, _, _ = misplaced({}, gm, dev)
                    bad += problems
                    fused = report["fuse_conv_bn"].counters.get("fused", 0)
                    if fused == 0 and (dialect != "dynamo" or "fold_in_graph" in label):
                        bad.append(f"fuse_conv_bn fused nothing ({report['fuse_conv_bn'].counters})")
                    if bad:
                        raise AssertionError("; ".join(bad[:6]))
                    return report_detail(report)

                ck.check(3, cnn.name, dialect, dtype_name, label, run)


# ---------------------------------------------------------------------------------------------
# section 4: torch.compile


def section_4(ck: Checker, specs: list[Model], dev: torch.device, tol: tuple[float, float]) -> None:
    import fxpasses.backend as fb
    from fxpasses.verify import compare_outputs

    backend: Any = "fxpasses"

    def registered() -> str:
        names = torch._dynamo.list_backends(exclude_tags=())
        if "fxpasses" not in names:
            raise AssertionError(
                "'fxpasses' is not among torch._dynamo.list_backends() (is fxpasses installed, with its "
                "torch_dynamo_backends entry point?); the checks below pass the backend function instead"
            )
        return f"{len(names)} backends: {', '.join(names)}"

    if ck.check(4, "-", "dynamo", "-", 'backend="fxpasses" registered', registered) != "ok":
        backend = fb.fxpasses_backend
    ck.note(
        4,
        '`torch.compile(model, backend="fxpasses", options={"preset": "inference", "then": THEN}, '
        "dynamic=False)` under `torch.no_grad()`, outputs against the eager model: float32 "
        f"tolerance for `eager` ({tol[0]:g}), 1e-3 for `inductor` (its kernels reorder arithmetic).",
    )
    for spec in [s for s in specs if not s.name.startswith("BERT")]:
        model = spec.factory().to(dev)
        inputs = spec.make_inputs(dev)
        with torch.no_grad():
            ref = model(*inputs)
        for then, freeze in (("eager", False), ("inductor", False), ("eager", True), ("inductor", True)):

            def run(then: str = then, freeze: bool = freeze) -> str:
                torch._dynamo.reset()
                seen = {id(r) for r in fb.reports}
                options = {"preset": "inference", "then": then, **({"freeze": True} if freeze else {})}
                compiled = torch.compile(model, backend=backend, options=options, dynamic=False)
                with torch.no_grad():
                    out = compiled(*inputs)
                    out2 = compiled(*inputs)
                ran = sum(id(r) not in seen for r in fb.reports)
                if not ran:
                    raise AssertionError("the fxpasses backend did not run (no new report in fxpasses.backend.reports)")
                atol = tol[0] if then == "eager" else max(tol[0], 1e-3)
                rtol = tol[1] if then == "eager" else max(tol[1], 1e-3)
                bad = []
                for label, o in (("first call", out), ("second call", out2)):
                    cmp = compare_outputs(o, ref, atol, rtol)
                    if cmp.message:
                        bad.append(f"{label}: {cmp.message}")
                    bad += [f"{label}: output on {t.device}" for t in leaves(o) if isinstance(t, torch.Tensor) and not same_device(t, dev)]
                if freeze and spec.name.startswith("CNN"):  # the weights are constants: conv + BN fused
                    fused = sum(p.counters.get("fused", 0) for r in fb.reports if id(r) not in seen for p in r.passes)
                    if fused < 3:
                        bad.append(f"freeze: {fused} conv + BN pairs fused, expected 3")
                if bad:
                    raise AssertionError("; ".join(bad))
                err = compare_outputs(out, ref, 0.0, 0.0).max_abs
                return f"{ran} graph(s); max abs error {err:.2e}; " + report_detail(fb.reports[-1])

            ck.check(4, spec.name, "dynamo", "float32", f"then={then}" + (", freeze" if freeze else ""), run)
        torch._dynamo.reset()


# ---------------------------------------------------------------------------------------------
# section 5: rollback


def write_then_fail_class() -> type:
    import fxpasses

    class WriteThenFail(fxpasses.GraphPass):
        """Write every parameter and buffer in place (three ways), then raise."""

        name = "cuda_check_write_then_fail"
        writes_tensors = True
        written = 0

        def run(self, gm: torch.fx.GraphModule, ctx: Any) -> bool:
            n = 0
            with torch.no_grad():
                for i, (_, t) in enumerate([*gm.named_parameters(), *gm.named_buffers()]):
                    if t.numel() == 0:
                        continue
                    if not t.is_floating_point():
                        t.add_(1)
                    elif i % 3 == 0:
                        t.mul_(2.0).add_(1.0)
                    elif i % 3 == 1:
                        t.data.copy_(t * 3.0 + 0.5)
                    else:
                        t.view(-1)[:1].fill_(42.0)
                        t.add_(0.25)
                    n += 1
            type(self).written = n
            raise RuntimeError(f"planted failure after writing {n} tensors in place")

    return WriteThenFail


def section_5(ck: Checker, reg: Any, specs: list[Model], dev: torch.device, tol: tuple[float, float]) -> None:
    import fxpasses
    from fxpasses.capture import capture
    from fxpasses.verify import compare_outputs

    WriteThenFail = write_then_fail_class()
    ck.note(
        5,
        "A `GraphPass` with `writes_tensors = True` writes every parameter and buffer in place "
        "(`mul_`/`add_`, `.data.copy_`, a view's `fill_`) and raises; after the failed run each "
        "tensor must be the same object, on the same device, `torch.equal` to its value before, "
        "with the same `requires_grad`; the graph code must be unchanged and the outputs as before "
        "(float32 tolerance).",
    )
    cases = [(specs[0], "symbolic_trace"), (specs[0], "export"), (specs[1], "export")]
    for spec, dialect in cases:
        model = spec.factory().to(dev)
        inputs = spec.make_inputs(dev)
        for snapshot in (False, True):

            def run(snapshot: bool = snapshot) -> str:
                cap = capture(copy.deepcopy(model), inputs, dialect)
                gm = cap.gm
                tensors = module_tensors(gm)
                saved = {n: (t, t.detach().clone(), t.device, t.requires_grad) for n, (_, t) in tensors.items()}
                code = gm.code
                with torch.no_grad():
                    out_before = gm(*cap.inputs)
                WriteThenFail.written = 0
                pipe = fxpasses.Pipeline([WriteThenFail], registry=reg, snapshot_tensors=snapshot)
                try:
                    pipe.run(gm, cap.inputs)
                except fxpasses.PassFailedError as exc:
                    if "planted failure" not in str(exc) and "planted failure" not in str(exc.__cause__):
                        raise AssertionError(f"failed, but not with the planted error: {one_line(exc)}") from exc
                else:
                    raise AssertionError("the pipeline did not raise PassFailedError")
                if WriteThenFail.written == 0:
                    raise AssertionError("the pass wrote nothing: nothing was tested")
                bad = []
                after = module_tensors(gm)
                for n, (t, value, device, rg) in saved.items():
                    now = after.get(n)
                    if now is None:
                        bad.append(f"{n} is gone")
                        continue
                    cur = now[1]
                    if cur is not t:
                        bad.append(f"{n} is another tensor object")
                    if cur.device != device:
                        bad.append(f"{n} moved to {cur.device}")
                    elif not torch.equal(cur.detach(), value):
                        bad.append(f"{n} differs (max abs {(cur.detach().double() - value.double()).abs().max().item():.3g})")
                    if cur.requires_grad != rg:
                        bad.append(f"{n} requires_grad {rg} -> {cur.requires_grad}")
                if set(after) - set(saved):
                    bad.append(f"new tensors: {sorted(set(after) - set(saved))[:3]}")
                if gm.code != code:
                    bad.append("graph code changed")
                with torch.no_grad():
                    out_after = gm(*cap.inputs)
                cmp = compare_outputs(out_after, out_before, *tol)  # (GPU kernels need not be bitwise repeatable)
                if cmp.message:
                    bad.append(f"outputs differ from those before the failed pass: {cmp.message}")
                if bad:
                    raise AssertionError(f"{len(bad)} problem(s): " + "; ".join(bad[:5]))
                return f"{WriteThenFail.written} tensors written and restored; PassFailedError raised"

            label = "write_then_fail" + (" snapshot_tensors" if snapshot else "")
            ck.check(5, spec.name, dialect, "float32", label, run)


# ---------------------------------------------------------------------------------------------
# section 6: latency


def time_calls(fns: Sequence[Callable[[], Any]], dev: torch.device, warmup: int, runs: int) -> list[float]:
    """Median milliseconds per call of each function; calls interleaved, after warm-up."""
    cuda = dev.type == "cuda"
    times: list[list[float]] = [[] for _ in fns]
    with torch.no_grad():
        for fn in fns:
            for _ in range(warmup):
                fn()
        if cuda:
            torch.cuda.synchronize()
        for _ in range(runs):
            for i, fn in enumerate(fns):
                if cuda:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    fn()
                    end.record()
                    end.synchronize()
                    times[i].append(start.elapsed_time(end))
                else:
                    t0 = time.perf_counter()
                    fn()
                    times[i].append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in times]


def section_6(ck: Checker, reg: Any, specs: list[Model], dev: torch.device, tol: tuple[float, float], runs: int, warmup: int) -> None:
    import fxpasses
    from fxpasses.capture import capture
    from fxpasses.verify import compare_outputs

    timer = "CUDA events around each call" if dev.type == "cuda" else "time.perf_counter"
    ck.note(
        6,
        f"Median of {runs} interleaved calls after {warmup} warm-up calls each ({timer}), "
        "`torch.no_grad()`: the eager model, the `export` capture before and after the `inference` "
        "pipeline. Ratio after / before below 1 is faster. Informational: only a failure to run "
        "or changed outputs fail a row.",
    )
    for spec in specs:

        def run(spec: Model = spec) -> str:
            model = spec.factory().to(dev)
            inputs = spec.make_inputs(dev)
            before = capture(copy.deepcopy(model), inputs, "export").gm
            after = capture(copy.deepcopy(model), inputs, "export").gm
            fxpasses.Pipeline.from_string(reg.preset("inference").pipeline, registry=reg).run(after, inputs)
            with torch.no_grad():
                cmp = compare_outputs(after(*inputs), before(*inputs), *tol)
            if cmp.message:
                raise AssertionError(f"outputs after the pipeline: {cmp.message}")
            eager_ms, before_ms, after_ms = time_calls(
                [lambda: model(*inputs), lambda: before(*inputs), lambda: after(*inputs)], dev, warmup, runs
            )
            ck.latency.append(
                [spec.name, f"{eager_ms:.3f} ms", f"{before_ms:.3f} ms", f"{after_ms:.3f} ms", f"{after_ms / before_ms:.2f}x", str(runs)]
            )
            return (
                f"before {before_ms:.3f} ms, after {after_ms:.3f} ms, after/before {after_ms / before_ms:.2f}x "
                f"(eager {eager_ms:.3f} ms); nodes {len(before.graph.nodes)}->{len(after.graph.nodes)}"
            )

        ck.check(6, spec.name, "export", "float32", "inference", run)


# ---------------------------------------------------------------------------------------------
# main


def header_lines(args: argparse.Namespace, dev: torch.device, tol: tuple[float, float]) -> list[str]:
    import fxpasses

    lines = ["# fxpasses CUDA check", ""]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    facts = [
        ("date", now),
        ("command", " ".join([os.path.basename(sys.executable), *sys.argv])),
        ("python", f"{platform.python_version()} ({sys.executable})"),
        ("torch", f"{torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None})"),
    ]
    try:
        import transformers

        facts.append(("transformers", transformers.__version__))
    except Exception as exc:  # reported; the HF models then fail their rows
        facts.append(("transformers", f"not importable: {one_line(exc)}"))
    facts.append(("fxpasses", f"{fxpasses.__version__} ({os.path.dirname(fxpasses.__file__)})"))
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        facts.append(("GPU", f"{p.name}, compute capability {p.major}.{p.minor}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs"))
    else:
        facts.append(("GPU", f"none used (device {dev}; cuda available: {torch.cuda.is_available()})"))
    facts += [
        ("device", str(dev)),
        ("sizes", "quick" if args.quick else "full"),
        (
            "TF32",
            f"off: torch.backends.cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
            f"torch.backends.cudnn.allow_tf32={torch.backends.cudnn.allow_tf32} (float32 compared as float32)",
        ),
        ("float32 tolerance", f"atol={tol[0]:g}, rtol={tol[1]:g}"),
    ]
    lines += [f"- {k}: {v}" for k, v in facts]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="cuda, cuda:N or cpu (default: cuda if available)")
    ap.add_argument("--quick", action="store_true", help="small models, few timing runs (minutes on a CPU)")
    ap.add_argument("--out", default="", help="also write the report to this file (rewritten after each check)")
    ap.add_argument("--sections", default="1,2,3,4,5,6", help="comma-separated section numbers to run (default: all)")
    ap.add_argument("--time-limit", type=float, default=0.0, help="start no check after this many seconds (0: no limit); the rest are listed as skipped")
    ap.add_argument("--runs", type=int, default=0, help="timed calls per variant in section 6 (default: 50, --quick: 5)")
    args = ap.parse_args(argv)
    try:
        dev = torch.device(args.device)
        sections = {int(s) for s in args.sections.split(",") if s.strip()}
    except (RuntimeError, ValueError) as exc:
        ap.error(str(exc))
    if not sections <= set(RUN_ORDER):
        ap.error(f"--sections: known sections are {sorted(RUN_ORDER)}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            ap.error("--device cuda: torch.cuda.is_available() is False (use --device cpu)")
        dev = torch.device("cuda", torch.cuda.current_device() if dev.index is None else dev.index)
        torch.cuda.set_device(dev)
    args.device = str(dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    warnings.filterwarnings("ignore")  # torch/transformers deprecation chatter; failures are rows
    # every dialect x pass re-captures with TorchDynamo: keep its per-code cache from filling up
    for name, at_least in (("recompile_limit", 64), ("accumulated_recompile_limit", 1024)):
        # (older torch: cache_size_limit, accumulated_cache_size_limit)
        for attr in (name, name.replace("recompile", "cache_size")):
            if isinstance(getattr(torch._dynamo.config, attr, None), int):
                setattr(torch._dynamo.config, attr, max(getattr(torch._dynamo.config, attr), at_least))
                break

    import fxpasses

    tol = (1e-4, 1e-4) if dev.type == "cuda" else (1e-5, 1e-5)
    ck = Checker(args, header_lines(args, dev, tol))
    print(f"cuda_check on {dev}, sections {sorted(sections)}", file=sys.stderr, flush=True)

    holder: dict[str, Any] = {}

    def load_registry() -> str:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reg = fxpasses.registry()
        holder["reg"] = reg
        builtin = [n for n in reg.names() if reg.info(n).distribution == "fxpasses"]
        problems = [str(w.message) for w in caught if "fxpasses" in type(w.message).__module__] + [str(p) for p in reg.problems]
        if not builtin:
            raise AssertionError(
                "no built-in passes registered: fxpasses is importable but its 'fxpasses' entry point is "
                "not installed (pip install it; see the script's doc)"
            )
        if "inference" not in reg.presets():
            raise AssertionError("no 'inference' preset registered")
        if problems:
            raise AssertionError("plugin problems: " + " / ".join(problems)[:300])
        return f"{len(builtin)} built-in passes: {', '.join(builtin)}"

    ck.check(1, "-", "-", "-", "registry", load_registry)
    reg = holder.get("reg")
    try:
        specs = model_specs(args.quick)
        if reg is None or not [n for n in reg.names() if reg.info(n).distribution == "fxpasses"]:
            raise Skip("no registry with the built-in passes")
        runs = args.runs or (5 if args.quick else 50)
        warmup = 2 if args.quick else 10
        for section in RUN_ORDER:
            if section not in sections:
                continue
            if section == 1 or (section == 2 and 1 not in sections):
                section_1_and_2(ck, reg, specs, dev, tol, sections)
            elif section == 3:
                section_3(ck, reg, specs, dev)
            elif section == 4:
                section_4(ck, specs, dev, tol)
            elif section == 5:
                section_5(ck, reg, specs, dev, tol)
            elif section == 6:
                section_6(ck, reg, specs, dev, tol, runs, warmup)
    except Skip as exc:
        ck.record(Row(1, "-", "-", "-", "all", "FAIL", f"nothing checked: {exc}", 0.0))
    except KeyboardInterrupt:
        ck.record(Row(0, "-", "-", "-", "-", "FAIL", "interrupted", 0.0))
    except Exception as exc:  # a bug of this script outside a check: still report what ran
        row = Row(0, "-", "-", "-", "script", "FAIL", one_line(exc), 0.0)
        ck.failures.append((row, _failure_text(exc)))
        ck.record(row)
    ck.finished = True
    text = ck.report()
    ck.write_out()
    print(text, flush=True)
    return ck.exit_code()


if __name__ == "__main__":
    sys.exit(main())
