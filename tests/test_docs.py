"""The docs are generated from the code they describe, and stay current."""

from __future__ import annotations

from pathlib import Path

from compactlog.server.server_config import SERVER_CONFIGS
from compactlog.storage.broker_config import BROKER_ONLY_CONFIGS
from compactlog.storage.topic_config import docs_table

ROOT = Path(__file__).parents[1]


def test_config_docs_are_current():
    text = (ROOT / "docs" / "configs.md").read_text()
    assert docs_table() in text, "docs/configs.md is stale: regenerate it from compactlog.storage.topic_config.docs_table()"
    assert docs_table(configs=BROKER_ONLY_CONFIGS) in text, "docs/configs.md's broker settings are stale"
    assert docs_table(configs=SERVER_CONFIGS) in text, "docs/configs.md's server settings are stale"


def test_readme_names_the_two_setup_commands():
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e . && compactlog demo --data-dir demo-data" in readme
    assert "apt-get install -y -qq chromium >/dev/null && pip install -e '.[test]' && python -m pytest -q && COMPACTLOG_NO_EXTENSIONS=1 python -m pytest -q -m 'not spark'" in readme
