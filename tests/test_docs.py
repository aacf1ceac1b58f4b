"""The README documents every config key, and every CLI command explains itself."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from click.testing import CliRunner

from ragsync import config as cfg
from ragsync.cli import main
from ragsync.registry import source_class, source_kinds

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def documented_names() -> set[str]:
    section = README.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    names = set()
    for cell in re.findall(r"`([^`]+)`", section):
        names.add(cell)
        names.add(cell.rsplit(".", 1)[-1].split("[].")[-1])
    return names


def test_every_config_key_is_in_the_readme():
    names = documented_names()
    sections = {
        "state": cfg.StateConfig,
        "store": cfg.StoreConfig,
        "embedder": cfg.EmbedderConfig,
        "chunker": cfg.ChunkerConfig,
        "fetch": cfg.FetchConfig,
        "server": cfg.ServerConfig,
    }
    missing = [
        f"{name}.{f.name}"
        for name, cls in sections.items()
        for f in dataclasses.fields(cls)
        if f"{name}.{f.name}" not in names and f.name not in names
    ]
    missing += [
        f"events[].{f.name}" for f in dataclasses.fields(cfg.EventConfig) if f.name not in names
    ]
    missing += [
        f"sources[].{f.name}"
        for f in dataclasses.fields(cfg.SourceConfig)
        if f.name != "options" and f.name not in names
    ]
    for kind in source_kinds():
        missing += [
            f"{kind}: {f.name}"
            for f in dataclasses.fields(source_class(kind).Options)
            if f.name not in names
        ]
    assert missing == []


def test_every_run_counter_is_in_the_readme():
    from ragsync.models import Counters

    section = README.split("\nCounters: ", 1)[1].split("\n## ", 1)[0]
    assert [name for name in Counters().as_dict() if f"`{name}`" not in section] == []


def test_every_cli_command_has_help_text():
    runner = CliRunner()
    assert len(main.commands) >= 11
    for name, command in main.commands.items():
        assert command.help and len(command.help.strip()) > 20, name
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output, name
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, f"{name} {param.opts}"
        assert f"ragsync {name}" in README or f"ragsync [-v|-vv|-q] {name}" in README, name
