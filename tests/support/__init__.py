"""Shared builders and helpers for the tests, one module per theme (records, the small week, the CLI
in process, loopback servers, browsers...). Test modules import from here, never from each other;
what tools/ also needs (the fault-injecting upstream, LiteLLM's payloads and proxy, a free port)
lives in tools/, which never imports tests/."""
