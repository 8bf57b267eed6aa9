"""What an endpoint says about a model: listed or not, its context window, tool support.

Asked with plain HTTP GETs (no SDK, short timeouts), each answer optional:
``<base_url>/models`` lists the models, with metadata on some servers (OpenRouter's
``context_length``, vLLM's ``max_model_len``); llama.cpp's ``/props`` (at the server root)
gives the context it was started with (``n_ctx``) and whether its chat template takes
tools (``chat_template_caps.supports_tools``). Nothing here raises for a missing route.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import cache
from typing import Any

from tilth.config import Endpoint

PROBE_TIMEOUT = 5.0
DEFAULT_CONTEXT_TOKENS = 32_768
"""The window assumed when neither the endpoint nor ``TILTH_CONTEXT_TOKENS`` says."""
_WINDOW_KEYS = ("context_length", "max_model_len", "context_window", "n_ctx", "max_context_length")


@dataclass(frozen=True)
class ModelFacts:
    """One role's model as its endpoint describes it; None where it does not say."""

    listed: bool | None
    """Whether ``/models`` lists the model (None: no list could be read)."""
    context_window: int | None
    window_source: str | None
    """Where ``context_window`` came from (``/props n_ctx``, ``/models context_length``…)."""
    supports_tools: bool | None
    """llama.cpp's ``chat_template_caps.supports_tools`` (None: not a llama.cpp server)."""


def get_json(url: str, api_key: str, timeout: float = PROBE_TIMEOUT) -> Any:
    """The JSON body of ``GET url`` with the key, or None (any failure, any non-JSON)."""
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def server_root(base_url: str) -> str:
    """``http://host:port`` for ``http://host:port/v1`` (llama.cpp serves ``/props`` there)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def model_ids(body: Any) -> list[str] | None:
    """The ids a ``/models`` body lists (None: not a model list)."""
    items = body.get("data") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return None
    return [str(item.get("id")) for item in items if isinstance(item, dict)]


def window_from_models(body: Any, model: str) -> tuple[int | None, str | None]:
    """The context window ``/models`` metadata gives ``model`` (and the key that said so)."""
    items = body.get("data") if isinstance(body, dict) else None
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or str(item.get("id")) != model:
            continue
        for where in (item, item.get("top_provider"), item.get("meta")):
            if not isinstance(where, dict):
                continue
            for key in _WINDOW_KEYS:
                value = where.get(key)
                if isinstance(value, int) and value > 0:
                    return value, f"/models {key}"
    return None, None


def facts_from_props(props: Any) -> tuple[int | None, bool | None]:
    """``(n_ctx, supports_tools)`` from a llama.cpp ``/props`` body."""
    if not isinstance(props, dict):
        return None, None
    window = None
    for where in (props.get("default_generation_settings"), props):
        value = where.get("n_ctx") if isinstance(where, dict) else None
        if isinstance(value, int) and value > 0:
            window = value
            break
    caps = props.get("chat_template_caps")
    tools = caps.get("supports_tools") if isinstance(caps, dict) else None
    return window, tools if isinstance(tools, bool) else None


def model_facts(endpoint: Endpoint, timeout: float = PROBE_TIMEOUT) -> ModelFacts:
    """Ask the endpoint about its model (``/models``, then llama.cpp's ``/props``)."""
    models = get_json(endpoint.base_url.rstrip("/") + "/models", endpoint.api_key, timeout)
    ids = model_ids(models)
    window, source = window_from_models(models, endpoint.model)
    props = get_json(server_root(endpoint.base_url) + "/props", endpoint.api_key, timeout)
    n_ctx, tools = facts_from_props(props)
    if n_ctx is not None:
        window, source = n_ctx, "/props n_ctx"
    return ModelFacts(
        listed=None if ids is None else endpoint.model in ids,
        context_window=window,
        window_source=source,
        supports_tools=tools,
    )


@cache
def cached_facts(endpoint: Endpoint) -> ModelFacts:
    """``model_facts`` asked once per process and endpoint."""
    return model_facts(endpoint)


def cached_window(endpoint: Endpoint) -> int | None:
    """The endpoint's context window for its model, asked once per process."""
    return cached_facts(endpoint).context_window


NO_TOOLS_FIX = (
    "start llama-server with --jinja and a chat template that supports tools "
    "(--chat-template-file); see docs/models.md"
)


def no_tools_warning(model: object) -> str | None:
    """The line to show before work starts when ``model``'s server says its chat template
    takes no tools (the model would never see one); None when it takes them or cannot say.

    A model that can tell has ``takes_tools() -> bool | None`` (``OpenAIModel`` asks its
    endpoint's ``/props``); the ``Model`` seam does not require it.
    """
    asked = getattr(model, "takes_tools", None)
    if not callable(asked) or asked() is not False:
        return None
    endpoint = getattr(model, "endpoint", None)
    where = endpoint.base_url if isinstance(endpoint, Endpoint) else "the model's server"
    return (
        f"{where} cannot take tool calls (/props chat_template_caps.supports_tools is "
        f"false): the model will never see Tilth's tools → {NO_TOOLS_FIX}"
    )
