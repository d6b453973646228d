"""The example run configs in examples/: they load, their factories build, their models capture
with torch.export (and with the capture each config names) and match eager within 1e-5.

The end-to-end ``fxpasses run`` over these configs is tested with the CLI.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from fxpasses import Pipeline
from fxpasses.capture import capture
from fxpasses.config import Config, InputSpec, find_project_config, load_config_file
from fxpasses.context import tensor_info
from fxpasses.builtin_passes import BUILTIN_PRESETS
from fxpasses.verify import compare_outputs
from fxpasses.spec import parse_pipeline_string

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CONFIGS = ["convnet.toml", "gpt2.toml", "bert.toml", "convnet.yaml", "mlp.json", "pyproject_example/pyproject.toml"]
BUILTIN = {e.name for e in parse_pipeline_string(BUILTIN_PRESETS["inference"][0])}


def _load_models():
    spec = importlib.util.spec_from_file_location("fxpasses_example_models", EXAMPLES / "models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


models = _load_models()


def _factory(cfg: Config):
    """The callable a config's ``[model] factory`` names (``models:f`` or ``path/models.py:f``)."""
    module, _, attr = cfg.model.factory.partition(":")
    path = cfg._base_dir / module if module.endswith(".py") else cfg._base_dir / f"{module}.py"
    assert path.resolve() == (EXAMPLES / "models.py").resolve(), cfg.model.factory
    return getattr(models, attr)


def _make(spec: InputSpec, gen: torch.Generator) -> torch.Tensor:
    dtype = getattr(torch, spec.dtype)
    if dtype.is_floating_point:
        if spec.low is None and spec.high is None:
            return torch.randn(spec.shape, generator=gen, dtype=dtype)
        low, high = spec.low or 0.0, 1.0 if spec.high is None else spec.high
        return torch.rand(spec.shape, generator=gen, dtype=dtype) * (high - low) + low
    if dtype == torch.bool:
        return torch.randint(0, 2, spec.shape, generator=gen).bool()
    low, high = int(spec.low or 0), int(10 if spec.high is None else spec.high)
    return torch.randint(low, high, spec.shape, generator=gen, dtype=dtype)


@pytest.fixture(scope="module")
def built():
    """{config file: (config, model, inputs, eager output)}, each model built once."""
    out = {}
    for name in CONFIGS:
        cfg = load_config_file(EXAMPLES / name)
        model = _factory(cfg)(**cfg.model.kwargs)
        gen = torch.Generator().manual_seed(cfg.model.seed)
        inputs = tuple(_make(s, gen) for s in cfg.model.inputs)
        with torch.no_grad():
            expected = model(*inputs)
        out[name] = (cfg, model, inputs, expected)
    return out


@pytest.fixture(scope="module")
def exported(built):
    """{config file: export-captured GraphModule}, captured once."""
    return {name: capture(model, inputs, "export").gm for name, (_, model, inputs, _) in built.items()}


@pytest.mark.parametrize("name", CONFIGS)
def test_config_loads(name):
    cfg = load_config_file(EXAMPLES / name)
    assert cfg.model is not None and cfg.model.inputs
    assert cfg.verify == "numeric" and cfg.atol == 1e-5
    assert cfg.output and cfg.output.startswith("out/")
    entries = parse_pipeline_string(cfg.pipeline) if isinstance(cfg.pipeline, str) else cfg.pipeline
    names = [e if isinstance(e, str) else e.name for e in entries]
    assert names and set(names) <= BUILTIN, names
    _factory(cfg)


def test_real_model_configs():
    for name, factory in (("gpt2", "models:gpt2"), ("bert", "models:bert"), ("convnet", "models:convnet")):
        cfg = load_config_file(EXAMPLES / f"{name}.toml")
        assert cfg.model.factory == factory and cfg.model.capture == "export"
        assert cfg.pipeline == ",".join(
            ["remove_dropout", "fuse_conv_bn", "simplify_algebra", "fold_constants",
             "eliminate_common_subexpressions", "eliminate_dead_code"]
        )
        if name != "convnet":
            (spec,) = cfg.model.inputs
            assert spec.dtype == "int64" and spec.high == cfg.model.kwargs["vocab_size"]


def test_pyproject_example_is_found():
    found = find_project_config(EXAMPLES / "pyproject_example")
    assert found == EXAMPLES / "pyproject_example" / "pyproject.toml"
    cfg = load_config_file(found)
    assert cfg.options == {"fold_constants": {"max_numel": 65536}}


@pytest.mark.parametrize("name", CONFIGS)
def test_factory_builds_in_eval_mode_returning_a_tensor(built, name):
    cfg, model, inputs, expected = built[name]
    assert not model.training and not any(m.training for m in model.modules())
    assert isinstance(expected, torch.Tensor) and expected.dtype == torch.float32
    assert torch.isfinite(expected).all()
    if "vocab_size" in cfg.model.kwargs:
        assert int(inputs[0].max()) < cfg.model.kwargs["vocab_size"]


def test_factories_are_reproducible_and_leave_the_rng_alone():
    state = torch.get_rng_state()
    a, b = models.convnet(), models.convnet()
    assert torch.equal(torch.get_rng_state(), state)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    bn = a.features[0][1]
    assert bn.running_var.min() > 0 and not torch.allclose(bn.running_mean, torch.zeros_like(bn.running_mean))
    assert sum(1 for m in a.modules() if isinstance(m, torch.nn.Conv2d) and m.bias is None) == 2
    assert not torch.equal(models.convnet(seed=1).head.weight, a.head.weight)


@pytest.mark.parametrize("name", CONFIGS)
def test_export_capture_matches_eager(built, exported, name):
    _, _, inputs, expected = built[name]
    with torch.no_grad():
        got = exported[name](*inputs)
    cmp = compare_outputs(got, expected, atol=1e-5, rtol=0.0)
    assert not cmp.message, cmp.message


@pytest.mark.parametrize("name", ["mlp.json", "pyproject_example/pyproject.toml"])
def test_configured_capture_matches_eager(built, name):
    cfg, model, inputs, expected = built[name]
    assert cfg.model.capture != "export"
    cap = capture(model, inputs, cfg.model.capture)
    with torch.no_grad():
        got = cap.gm(*cap.inputs)
    got = got[0] if isinstance(got, (tuple, list)) else got  # TorchDynamo graphs return a tuple
    cmp = compare_outputs(got, expected, atol=1e-5, rtol=0.0)
    assert not cmp.message, cmp.message


@pytest.mark.parametrize("name", ["gpt2.toml", "bert.toml", "convnet.toml"])
def test_propagate_shapes_on_the_exported_models(built, exported, name):
    cfg, _, inputs, expected = built[name]
    gm = exported[name]
    report = Pipeline(["propagate_shapes"]).run(gm, inputs)
    assert report.passes[0].counters.get("real_fallback") is None
    (result,) = gm.graph.output_node().meta["val"]
    assert result.shape == expected.shape and result.dtype == expected.dtype
    interp = torch.fx.Interpreter(gm, garbage_collect_values=False)
    with torch.no_grad():
        interp.run(*inputs)
    tensors = {n: v for n, v in interp.env.items() if isinstance(v, torch.Tensor)}
    assert len(tensors) > 30
    wrong = [n.name for n, v in tensors.items() if tensor_info(n) != (v.shape, v.dtype)]
    assert not wrong


def test_deep_convnet_keeps_its_outputs_through_the_inference_preset_at_depth():
    """The benchmarks' exported scaling model (examples/models.py `deep_convnet`): small gains
    keep its outputs of the input's size at any depth, so a comparison after the pipeline
    stays meaningful at the 1000 blocks the benchmark uses (here 30)."""
    state = torch.get_rng_state()
    model = models.deep_convnet(30)
    assert torch.equal(torch.get_rng_state(), state) and not model.training
    x = torch.randn(1, 8, 6, 6, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model(x)
    assert expected.shape == x.shape and 0.1 < expected.abs().max() < 100
    gm = torch.export.export(model, (x,)).module()
    batch_norms = lambda: sum("batch_norm" in str(n.target) for n in gm.graph.nodes)  # noqa: E731
    assert batch_norms() == 30
    report = Pipeline.from_preset("inference").run(gm, example_inputs=[x])
    assert next(p for p in report.passes if p.name == "fuse_conv_bn").counters["fused"] == 30
    assert batch_norms() == 0
    with torch.no_grad():
        torch.testing.assert_close(gm(x), expected, atol=1e-5, rtol=1e-5)
