"""model_for routes by role, never by model name, and reads the retry settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilth.config import load_settings
from tilth.errors import ConfigError, ModelError
from tilth.model import FakeServer, OpenAIModel, Script, error, model_for, reply


def test_same_model_name_different_urls_each_role_reaches_its_own_server(
    tilth_home: Path,
) -> None:
    # Reference bug §12.1-2: same model name, different base URL sent calls to the wrong provider.
    servers = {
        role: FakeServer(Script([reply(f"{role} here")] * 3)).start()
        for role in ("worker", "evaluator", "prep")
    }
    try:
        settings = load_settings(
            {
                "TILTH_HOME": str(tilth_home),
                "TILTH_BASE_URL": servers["worker"].base_url,
                "TILTH_API_KEY": "worker-key",
                "TILTH_WORKER_MODEL": "same/model",
                "TILTH_EVALUATOR_BASE_URL": servers["evaluator"].base_url,
                "TILTH_EVALUATOR_API_KEY": "evaluator-key",
                "TILTH_EVALUATOR_MODEL": "same/model",
                "TILTH_PREP_BASE_URL": servers["prep"].base_url,
                "TILTH_PREP_MODEL": "same/model",
            }
        )
        for role in ("prep", "worker", "evaluator", "worker"):
            assert model_for(settings, role).complete([], []).content == f"{role} here"
    finally:
        for server in servers.values():
            server.stop()
    counts = {role: len(server.requests) for role, server in servers.items()}
    assert counts == {"worker": 2, "evaluator": 1, "prep": 1}
    keys = {
        role: server.requests[0]["headers"]["authorization"] for role, server in servers.items()
    }
    assert keys == {
        "worker": "Bearer worker-key",
        "evaluator": "Bearer evaluator-key",
        "prep": "Bearer worker-key",
    }, "prep has no key of its own, so it falls back to the worker's"
    assert all(r["body"]["model"] == "same/model" for s in servers.values() for r in s.requests)


def test_retry_settings_reach_the_model(tilth_home: Path) -> None:
    retries: list[int] = []
    with FakeServer(Script([error(500)] * 5)) as server:
        settings = load_settings(
            {
                "TILTH_HOME": str(tilth_home),
                "TILTH_BASE_URL": server.base_url,
                "TILTH_API_KEY": "k",
                "TILTH_WORKER_MODEL": "m",
                "TILTH_MODEL_MAX_RETRIES": "1",
                "TILTH_MODEL_BACKOFF_SECONDS": "0.001",
                "TILTH_MODEL_TIMEOUT_SECONDS": "7.5",
            }
        )
        model = model_for(settings, "worker", on_retry=lambda n, *_: retries.append(n))
        assert isinstance(model, OpenAIModel) and model.timeout_seconds == 7.5
        with pytest.raises(ModelError, match=r"after 2 attempts"):
            model.complete([], [])
    assert retries == [1]
    assert len(server.requests) == 2


def test_retry_setting_defaults(tilth_home: Path) -> None:
    settings = load_settings({"TILTH_HOME": str(tilth_home)})
    assert settings.model_max_retries == 4
    assert settings.model_backoff_seconds == 1.0
    assert settings.model_timeout_seconds == 300.0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TILTH_MODEL_MAX_RETRIES", "three"),
        ("TILTH_MODEL_MAX_RETRIES", "-1"),
        ("TILTH_MODEL_BACKOFF_SECONDS", "soon"),
        ("TILTH_MODEL_BACKOFF_SECONDS", "-0.5"),
        ("TILTH_MODEL_BACKOFF_SECONDS", "nan"),
        ("TILTH_MODEL_TIMEOUT_SECONDS", "0"),
        ("TILTH_MODEL_TIMEOUT_SECONDS", "inf"),
    ],
)
def test_malformed_retry_settings_name_the_variable(
    tilth_home: Path, name: str, value: str
) -> None:
    with pytest.raises(ConfigError, match=name):
        load_settings({"TILTH_HOME": str(tilth_home), name: value})


def test_missing_endpoint_is_a_config_error(tilth_home: Path) -> None:
    with pytest.raises(ConfigError, match="TILTH_BASE_URL"):
        model_for(load_settings({"TILTH_HOME": str(tilth_home)}), "evaluator")


def test_one_fake_server_serves_every_role_by_model_name(tilth_home: Path) -> None:
    script = Script(
        {"worker": [reply("built it")], "evaluator": [reply("accept")], "prep": [reply("seeded")]}
    )
    with FakeServer(script) as server:
        settings = load_settings({"TILTH_HOME": str(tilth_home), **server.tilth_env()})
        answers = [
            model_for(settings, role).complete([], []).content
            for role in ("prep", "worker", "evaluator")
        ]
    assert answers == ["seeded", "built it", "accept"]
