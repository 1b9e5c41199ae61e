"""The LLM client through real HTTP against the loopback server: accounting, retries, caps, configuration, and the
parsing that rejects what cannot be a program (counted, never raised). No network, no kernels."""

import pytest

from klineage.llm import (
    Failure,
    LLMClient,
    LLMConfig,
    Parsed,
    Reply,
    ask_program,
    code_block,
    materialize_messages,
    parse_program,
    usage_line,
)
from klineage.workload import UserError
from tests.llm.loopback import Loopback, error, reply
from tests.llm.programs import EXP2, NAIVE, NO_MODEL, RENAMED, SYNTAX, answer


def _client(server: Loopback, **caps) -> LLMClient:
    config = LLMConfig(
        model="loopback-model", base_url=server.base_url, api_key="not-needed", backoff_s=0.0, timeout_s=10
    )
    return LLMClient(config, **caps)


def test_a_reply_is_counted_with_the_servers_token_counts():
    with Loopback([reply("hello", prompt_tokens=42, completion_tokens=7)]) as server:
        client = _client(server)
        got = client.chat([{"role": "user", "content": "hi"}])
    assert isinstance(got, Reply) and got.text == "hello" and got.finish_reason == "stop"
    usage = client.usage
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.tokens) == (1, 42, 7, 49)
    assert server.requests[0]["model"] == "loopback-model" and server.requests[0]["auth"] == "Bearer not-needed"
    assert usage.as_dict()["tokens"] == 49 and "1 calls" in usage_line(usage.as_dict())


def test_server_errors_are_retried_a_bounded_number_of_times():
    with Loopback([error(500), error(503), reply("ok", 10, 2)]) as server:
        client = _client(server)
        assert isinstance(client.chat([{"role": "user", "content": "x"}]), Reply)
    assert client.usage.retries == 2 and client.usage.calls == 1 and client.usage.failed_calls == 0
    with Loopback([error(500)] * 5) as server:
        client = _client(server)
        got = client.chat([{"role": "user", "content": "x"}])
        assert len(server.requests) == 3  # one try and two retries (the default)
    assert isinstance(got, Failure) and got.reason == "no_reply" and client.usage.failed_calls == 1


def test_a_client_error_is_not_retried_and_an_unreachable_server_is_a_value():
    with Loopback([error(400, "bad request")]) as server:
        client = _client(server)
        got = client.chat([{"role": "user", "content": "x"}])
        assert len(server.requests) == 1
    assert isinstance(got, Failure) and "400" in got.detail
    with Loopback() as server:
        url = server.base_url
    client = LLMClient(LLMConfig(model="m", base_url=url, api_key="k", backoff_s=0.0, retries=1, timeout_s=2))
    got = client.chat([{"role": "user", "content": "x"}])
    assert isinstance(got, Failure) and got.reason == "no_reply" and client.usage.retries == 1


def test_caps_on_calls_and_tokens_stop_further_calls():
    with Loopback([reply("a", 50, 10), reply("b", 50, 10)]) as server:
        client = _client(server, max_calls=1)
        assert isinstance(client.chat([{"role": "user", "content": "x"}]), Reply)
        capped = client.chat([{"role": "user", "content": "x"}])
        assert len(server.requests) == 1
    assert isinstance(capped, Failure) and capped.reason == "capped" and "1 model calls" in client.usage.capped
    with Loopback([reply("a", 50, 10)]) as server:
        client = _client(server, max_tokens=60)
        client.chat([{"role": "user", "content": "x"}])
        assert client.chat([{"role": "user", "content": "x"}]).reason == "capped"
    assert "60 tokens" in client.usage.capped


def test_a_reply_without_usage_counts_no_invented_tokens():
    with Loopback([reply("x", usage=False)]) as server:
        client = _client(server)
        client.chat([{"role": "user", "content": "x"}])
    assert client.usage.calls_without_usage == 1 and client.usage.tokens == 0


def test_configuration_comes_from_the_environment(monkeypatch):
    for name in ("KLINEAGE_LLM_MODEL", "KLINEAGE_LLM_BASE_URL", "KLINEAGE_LLM_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UserError, match="KLINEAGE_LLM_MODEL"):
        LLMConfig.from_env()
    monkeypatch.setenv("KLINEAGE_LLM_MODEL", "qwen")
    with pytest.raises(UserError, match="API key"):
        LLMConfig.from_env()
    monkeypatch.setenv("KLINEAGE_LLM_BASE_URL", "http://127.0.0.1:8000/v1")
    config = LLMConfig.from_env()
    assert config.api_key == "not-needed" and config.base_url.endswith("/v1") and "api_key" not in repr(config)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("KLINEAGE_LLM_TIMEOUT", "30")
    assert LLMConfig.from_env().api_key == "sk-test" and LLMConfig.from_env().timeout_s == 30.0
    monkeypatch.setenv("KLINEAGE_LLM_API_KEY", "sk-klineage")
    assert LLMConfig.from_env().api_key == "sk-klineage"


def test_the_last_python_block_is_taken():
    text = "```python\nfirst = 1\n```\nthen\n```\nbare = 1\n```\n```py\nlast = 2\n```\nbye"
    assert code_block(text).strip() == "last = 2"
    assert code_block("```\nonly_bare = 1\n```").strip() == "only_bare = 1"
    assert code_block("no code") is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("I would use exp2 here, it is faster.", "no_code_block"),
        (answer(SYNTAX), "syntax_error"),
        (answer(NO_MODEL), "no_model_new"),
        (answer(RENAMED), "kernel_renamed"),
        (answer(NAIVE), "unchanged"),
        ("x" * 200_000 + answer(EXP2), "too_long"),
    ],
)
def test_malformed_replies_are_rejected_as_values(text, reason):
    got = parse_program(Reply(text, 1, 1, "stop"), NAIVE)
    assert isinstance(got, Failure) and got.reason == reason, got


def test_a_reply_cut_at_the_token_limit_is_too_long():
    for text in (answer(EXP2), "Let me think step by step. " * 100):
        got = parse_program(Reply(text, 1, 1, "length"), NAIVE)
        assert isinstance(got, Failure) and got.reason == "too_long"


def test_ask_program_counts_every_rejection_and_never_raises():
    script = ["no code here", answer(SYNTAX), answer(RENAMED), "y" * 100_000, answer(EXP2, "fold log2(e)")]
    with Loopback(script) as server:
        client = _client(server)
        messages = materialize_messages("card", "program", NAIVE, "softmax_kernel", {"N": [1, 10]})
        results = [ask_program(client, messages, NAIVE) for _ in script]
    assert [r.reason for r in results[:4]] == ["no_code_block", "syntax_error", "kernel_renamed", "too_long"]
    assert isinstance(results[4], Parsed) and results[4].intent == "fold log2(e)" and "exp2" in results[4].source
    assert client.usage.rejected == {"no_code_block": 1, "syntax_error": 1, "kernel_renamed": 1, "too_long": 1}
    assert client.usage.calls == 5
    prompt = server.prompts()[0]
    assert "card" in prompt and "softmax_kernel" in prompt and "N: [1, 10]" in prompt
