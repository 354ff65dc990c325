"""Secret redaction: environment values, key-shaped strings, log records."""

from __future__ import annotations

import io
import logging

import pytest

from porter.redact import REDACTED, RedactingFilter, add_secret, discard_secret, redact


def test_environment_secrets_are_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "plainvalue-without-prefix-1234")
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnop")
    monkeypatch.setenv("SOME_SERVICE_SECRET", "s3cr3t-value!")
    text = "a plainvalue-without-prefix-1234 b hf_abcdefghijklmnop c s3cr3t-value! d"
    assert redact(text) == f"a {REDACTED} b {REDACTED} c {REDACTED} d"


def test_every_name_kept_from_children_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    # one rule for both: a variable porter keeps from its children (environment.looks_secret) is also
    # masked in the program output a report keeps
    monkeypatch.setenv("DB_PASSWORD", "hunter2-hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG")
    monkeypatch.setenv("GITHUB_AUTH", "ghauth-0123456789")
    text = "pw=hunter2-hunter2 aws wJalrXUtnFEMI/K7MDENG gh ghauth-0123456789"
    assert redact(text) == f"pw={REDACTED} aws {REDACTED} gh {REDACTED}"


def test_short_and_unrelated_values_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINY_TOKEN", "abc")  # too short to be a secret: would blank ordinary words
    monkeypatch.setenv("HOME_DIR_PATH", "/home/someone/long/path")  # not a secret-named variable
    text = "abc abc /home/someone/long/path"
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-ant-api03-AbCdEf0123456789_-xyzXYZ end", f"key {REDACTED} end"),
        ("key sk-proj-AbCdEf0123456789abcdef end", f"key {REDACTED} end"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def", f"Authorization: Bearer {REDACTED}"),
        ("x-api-key: abcdefghijklmnop", f"x-api-key: {REDACTED}"),
        ('{"api_key": "abcdefghijklmnop"}', f'{{"api_key": "{REDACTED}"}}'),
    ],
)
def test_key_shaped_strings(text: str, expected: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert redact(text) == expected


def test_kernel_code_is_untouched() -> None:
    code = (
        "__global__ void task_kernel(const float* __restrict__ x, float* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; // disk-based tokens, sk-1\n"
        "  if (i < n) y[i] = x[i] * 2.0f;\n}\n"
    )
    assert redact(code) == code


def test_registered_secret() -> None:
    add_secret("registered-secret-value-42")
    add_secret("Zq7w")  # short: redacted too, where it is a whole token
    try:
        assert redact("x registered-secret-value-42 Zq7w Zq7wx") == f"x {REDACTED} {REDACTED} Zq7wx"
    finally:
        discard_secret("Zq7w")
    assert redact("Zq7w") == "Zq7w"


@pytest.mark.parametrize("var", ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"])
@pytest.mark.parametrize("key", ["k", "ab1", "s3cr3t!", "7777777"])
def test_provider_keys_of_any_length_are_redacted(
    var: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(var, key)
    for template in ("{}", "invalid x-api-key: {}", '{{"key": "{}"}}', "Bearer {} (rejected)"):
        assert redact(template.format(key)) == template.format(REDACTED)


def test_short_provider_keys_leave_ordinary_words_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "the")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "  abc\n")  # what is sent is the stripped value
    text = "theory: other abcd xabc the_kernel then-abc"
    assert redact(text) == text
    assert redact("key the was rejected; abc too") == f"key {REDACTED} was rejected; {REDACTED} too"


def test_empty_keys_redact_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "   ")
    add_secret("")
    add_secret("  ")
    assert redact("a b c") == "a b c"


def test_logging_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "abcdefghijklmnopqrstuvwxyz")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("porter.test.redact")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.info(
            "calling with %s and %s", "abcdefghijklmnopqrstuvwxyz", "Bearer sk-zzzzzzzzzzzzzzzzzzzzzz"
        )
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "abcdefghijklmnopqrstuvwxyz" not in out and "sk-zzzz" not in out
    assert out.count(REDACTED) == 2
