"""4. Real models: GPT-2 and BERT (transformers, random weights, torch.export) at two sizes,
a 96-layer GPT-2 (about 5k nodes), and the example convolutional network."""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
from typing import Any, Callable

import torch

from fxpasses.verify import compare_outputs

from bench_pipeline import inference_pipeline
from common import Config, Result, Run, Target, fmt_s, fmt_x, md_table, measure_interleaved

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import models  # noqa: E402  (examples/models.py)


def _models(cfg: Config) -> list[tuple[str, Callable[[], torch.nn.Module], torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    tokens = lambda t: torch.randint(0, 1000, (1, t), generator=g)  # noqa: E731
    out = [
        ("GPT-2 2x128", lambda: models.gpt2(n_layer=2, n_embd=128, n_head=4), tokens(32)),
        ("BERT 2x128", lambda: models.bert(), tokens(32)),
        ("convnet w16", lambda: models.convnet(), torch.randn(2, 3, 32, 32, generator=g)),
    ]
    if not cfg.quick:
        out[2:2] = [
            ("GPT-2 12x768", lambda: models.gpt2(n_layer=12, n_embd=768, n_head=12), tokens(64)),
            (
                "BERT 12x768",
                lambda: models.bert(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072),
                tokens(64),
            ),
        ]
        # deep and narrow: a graph of an LLM's depth (5k nodes) at a small cost to export
        out.insert(4, ("GPT-2 96x64", lambda: models.gpt2(n_layer=96, n_embd=64, n_head=4), tokens(32)))
        out.append(("convnet w64", lambda: models.convnet(width=64), torch.randn(8, 3, 64, 64, generator=g)))
    return out


def latencies(fns: list[Callable[[], Any]], runs: int) -> list[float]:
    """Median seconds of one call of each function, after warm-up; calls interleaved so that
    load changes on the machine hit every variant alike."""
    ts: list[list[float]] = [[] for _ in fns]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # steadier on a shared machine: no wait for a busy second core
    with torch.no_grad():
        for fn in fns:
            for _ in range(10):
                fn()
        for _ in range(runs):
            for i, fn in enumerate(fns):
                t0 = time.perf_counter()
                fn()
                ts[i].append(time.perf_counter() - t0)
    torch.set_num_threads(threads)
    return [statistics.median(t) for t in ts]


def run(cfg: Config) -> Result:
    res = Result("models", "4. Real models")
    rows, lat_rows = [], []
    pipe = inference_pipeline()
    runs = 10 if cfg.quick else 20
    for label, factory, x in _models(cfg):
        model = factory()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            ep = torch.export.export(model, (x,))
            export_s = time.perf_counter() - t0
        with torch.no_grad():
            ref = model(x)
        after_nodes: list[int] = []
        optimized: list[torch.fx.GraphModule] = []

        def keep(gm: Any, out: Any) -> None:
            after_nodes.append(len(gm.graph.nodes))
            optimized[:] = [gm]

        before_nodes = len(ep.module().graph.nodes)
        reps = cfg.repeats_big if "12x" in label else cfg.repeats_small
        timed = measure_interleaved(
            {"pipeline": Run(lambda gm: pipe.run(gm), ep.module, keep), "recompile": Run(lambda gm: gm.recompile(), ep.module)},
            reps,
        )
        st, rc = timed["pipeline"], timed["recompile"]
        gm_after = optimized[0]
        with torch.no_grad():
            err = compare_outputs(gm_after(x), ref, 1e-4, 1e-4)
        assert not err.message, f"{label}: {err.message}"
        gm_before = ep.module()
        fns = [lambda: model(x), lambda: gm_before(x), lambda: gm_after(x)]
        ofi = "n/a (symbolic_trace cannot trace it)"
        ofi_model = None
        if label.startswith("convnet"):
            from torch.fx.experimental.optimization import optimize_for_inference

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                ofi_model = optimize_for_inference(model)
                ofi_s = time.perf_counter() - t0
            with torch.no_grad():
                e2 = compare_outputs(ofi_model(x), ref, 1e-4, 1e-4)
            fns.append(lambda: ofi_model(x))  # type: ignore[misc]
        lat = latencies(fns, runs)
        lat_eager, lat_before, lat_after = lat[:3]
        if ofi_model is not None:
            ofi = f"{fmt_s(lat[3])} ({fmt_x(lat[3] / lat_before)}; transform {fmt_s(ofi_s)}{'' if not e2.message else ', outputs differ'})"
        rows.append(
            [
                label,
                fmt_s(export_s),
                f"{before_nodes} -> {after_nodes[-1]}",
                str(st),
                str(rc),
                fmt_x(st.median / rc.median),
                f"{err.max_abs:.1e}",
            ]
        )
        lat_rows.append(
            [
                label,
                fmt_s(lat_eager),
                fmt_s(lat_before),
                fmt_s(lat_after),
                fmt_x(lat_after / lat_before),
                ofi,
            ]
        )
        del model, ep, gm_before, gm_after, optimized, ofi_model, fns
    res.add(
        "Each model captured once with `torch.export` (`examples/models.py` factories; transformers "
        "models from a config with random weights, vocabulary 1000); every repeat runs the `inference` "
        "preset (the built-in passes, `fold_constants{fold_parameters=true}`: an exported module always "
        "says training, so parameters fold only when asked; default `verify=lint`) on a fresh "
        "`ep.module()`. Baseline: one `recompile()` of "
        "the same module. Outputs after the pipeline are checked against eager (max abs error)."
    )
    res.add(md_table(["model", "export", "nodes", "pipeline", "one recompile()", "pipeline / recompile", "max abs err"], rows))
    res.add(
        f"Inference latency (median of {runs} interleaved calls after 10 warm-up calls, "
        "`torch.no_grad()`, one torch thread): eager model, exported module before and after the "
        "pipeline, and `torch.fx.experimental.optimization.optimize_for_inference` (fuse + "
        "remove_dropout + MKLDNN layouts; needs `symbolic_trace`, so the convnets only). Ratios "
        "against the exported module before the pipeline."
    )
    res.add(md_table(["model", "eager", "exported", "after pipeline", "after / before", "optimize_for_inference"], lat_rows))
    return res
