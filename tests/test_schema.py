"""`fxpasses schema`: editors validate configs with it; shipped examples pass, broken ones fail."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

import fxpasses
from fxpasses.cli import cli
from fxpasses.schema import config_schema

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(path: Path):
    if path.name == "pyproject.toml":
        return tomllib.loads(path.read_text())["tool"]["fxpasses"]
    if path.suffix == ".toml":
        return tomllib.loads(path.read_text())
    if path.suffix in (".yaml", ".yml"):
        return yaml.safe_load(path.read_text())
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def validator():
    schema = config_schema(fxpasses.Registry())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


SHIPPED = sorted(
    p for p in EXAMPLES.rglob("*") if p.suffix in (".toml", ".yaml", ".yml", ".json") and "out" not in p.parts
)


def test_there_are_shipped_configs():
    assert len(SHIPPED) >= 5


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_configs_validate(validator, path):
    errors = list(validator.iter_errors(load(path)))
    assert errors == [], [e.message for e in errors]


@pytest.mark.parametrize(
    "config",
    [
        {"pipeline": "count_ops,no_such_pass"},
        {"pipeline": ["count_ops", "no_such_pass"]},
        {"pipeline": [{"name": "count_ops", "options": {"only": "relu"}}]},  # not a list
        {"pipeline": [{"name": "count_ops", "options": {"onl": ["relu"]}}]},  # unknown option
        {"pipeline": "count_ops", "options": {"count_ops": {"onl": []}}},
        {"pipeline": "count_ops", "options": {"no_such_pass": {}}},
        {"pipeline": "count_ops", "verify": "sometimes"},
        {"pipeline": "count_ops", "pipelin": "x"},
        {"pipeline": []},
        {"pipeline": "count_ops", "model": {"factory": "no-colon", "inputs": [{"shape": [1]}]}},
    ],
)
def test_broken_configs_are_rejected(validator, config):
    assert list(validator.iter_errors(config))


def test_valid_options_accepted(validator):
    cfg = {"pipeline": [{"name": "count_ops", "options": {"only": ["relu"]}}, "remove_identity"],
           "options": {"count_ops": {"only": []}}}
    assert list(validator.iter_errors(cfg)) == []


def test_cli_schema_is_json():
    r = CliRunner().invoke(cli, ["schema"])
    assert r.exit_code == 0
    data = json.loads(r.output)
    assert data["$schema"].endswith("2020-12/schema")
    assert "options_count_ops" in data["$defs"]
