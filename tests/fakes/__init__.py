"""Test doubles that are real programs: the fake LLM server speaks HTTP to the real SDKs."""

from fakes.llm_server import FakeLLMServer, Hang, Malformed, Request, Status, Text

__all__ = ["FakeLLMServer", "Hang", "Malformed", "Request", "Status", "Text"]
