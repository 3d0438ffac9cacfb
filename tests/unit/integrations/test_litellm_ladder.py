"""analyzer.integrations.litellm_ladder through LiteLLM's own SDK, against the fault-injecting upstream.

``litellm.completion(model="ladder/glm-5", ...)`` with the adapter in
``litellm.custom_provider_map``: LiteLLM's real dispatch to a custom provider, its
real logging (a CustomLogger receives the StandardLoggingPayload the S3 callback
would write), the upstream on 127.0.0.1 recording what each rung sent. The proxy
(``litellm --config``, the async path) is tests/e2e/test_litellm.py's.

Skipped without litellm only when ``CI`` is not set; under CI that is a failure.
"""

from __future__ import annotations

import re
import time

import pytest

from analyzer.online import LOG_FIELDS_KEY
from analyzer.online import LadderSettings
from tools.litellm_payloads import TOOL_HISTORY, TOOLS
from tests.support.repo import REPO
from tests.support.services import need_litellm
from tools.faulty_upstream import (
    DROP_TOOLS,
    FaultyUpstream,
    Reply,
    always,
    fail_until,
    glm53,
    gzipped,
    hang_up,
    naked_500,
    ok,
)


# litellm's own types warn on import under this pydantic (ReadOnly TypedDict items): not ours to fix
pytestmark = pytest.mark.filterwarnings("ignore:Items? .* the `ReadOnly` qualifier:UserWarning")


# litellm (and the adapter, which imports it) is imported when the module's first test runs, not
# when it is collected: it takes seconds, and every pytest worker collects every module.
@pytest.fixture(scope="module")
def litellm():
    """The litellm package, with its wheel's cost map (no download): a skip without it, unless under CI."""
    return need_litellm()


class Payloads:
    """The StandardLoggingPayloads LiteLLM hands its callbacks (mixed into litellm's CustomLogger)."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[dict] = []
        self.start = 0

    def log_success_event(self, kwargs, response_obj, start_time, end_time):
        self.got.append(kwargs["standard_logging_object"])

    def log_failure_event(self, kwargs, response_obj, start_time, end_time):
        self.got.append(kwargs["standard_logging_object"])

    def wait(self, n: int, timeout_s: float = 10.0) -> list[dict]:
        """The payloads logged since the test began, once there are ``n`` (LiteLLM logs in a thread)."""
        deadline = time.monotonic() + timeout_s
        while len(self.got) - self.start < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.got[self.start:]


@pytest.fixture(scope="module")
def logger(litellm):
    # Once for the module: LiteLLM sets its callbacks up from litellm.callbacks on its first call.
    from litellm.integrations.custom_logger import CustomLogger

    from analyzer.integrations.litellm_ladder import LadderLLM

    logger = type("PayloadsLogger", (Payloads, CustomLogger), {})()
    before = (litellm.callbacks, litellm.custom_provider_map)
    litellm.callbacks = [logger]
    litellm.custom_provider_map = [{"provider": "ladder", "custom_handler": LadderLLM()}]
    litellm.utils.custom_llm_setup()
    yield logger
    litellm.callbacks, litellm.custom_provider_map = before


@pytest.fixture
def lite(logger):
    logger.start = len(logger.got)
    return logger


def _fields(payload: dict) -> dict:
    return (payload["metadata"].get("spend_logs_metadata") or {})[LOG_FIELDS_KEY]


def test_a_naked_500_with_tool_history_is_recovered_and_said_in_the_payload(lite, litellm):
    with FaultyUpstream(fail_until(DROP_TOOLS)) as up:
        r = litellm.completion(model="ladder/glm-5", messages=TOOL_HISTORY, tools=TOOLS, max_tokens=1024,
                               api_base=up.url + "/v1", enable_thinking=True)
        assert r.choices[0].message.content == "Here is the answer."
        assert up.rungs_seen() == ["original", "tool_choice_none", "drop_tools"]
        # the normalizer's keys reached the upstream, LiteLLM's own params did not
        first = up.payloads[0]
        assert first["chat_template_kwargs"] == {"enable_thinking": True, "thinking": True, "clear_thinking": False}
        assert "max_retries" not in first and "stream" not in first and first["max_tokens"] == 1024
    fields = _fields(lite.wait(1)[0])
    assert (fields["incident_class"], fields["final_class"]) == ("tool-history-5xx", "ok")
    assert fields["ladder"]["outcome"] == "recovered" and fields["ladder"]["recovered_at"] == "drop_tools"
    assert [a["rung"] for a in fields["ladder"]["attempts"]] == ["original", "tool_choice_none", "drop_tools"]


def test_a_streamed_call_gets_the_ladders_answer_in_chunks(lite, litellm):
    with FaultyUpstream(fail_until(DROP_TOOLS)) as up:
        stream = litellm.completion(model="ladder/glm-5", messages=TOOL_HISTORY, tools=TOOLS, max_tokens=1024,
                                    api_base=up.url + "/v1", stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream)
        assert text == "Here is the answer." and up.rungs_seen()[-1] == "drop_tools"


def test_a_leaked_think_block_is_split_out_and_a_gzip_answer_decoded(lite, litellm):
    leaking = glm53(always(lambda: ok("Texas.")))
    with FaultyUpstream(lambda payload: gzipped(leaking(payload))) as up:
        r = litellm.completion(model="ladder/glm-5", messages=TOOL_HISTORY, max_tokens=1024,
                               api_base=up.url + "/v1", chat_template_kwargs={"enable_thinking": False})
        assert up.count == 1
    message = r.choices[0].message
    assert message.content == "Texas." and "check the schema first" in message.reasoning_content
    fields = _fields(lite.wait(1)[0])
    assert fields["incident_class"] == "reasoning-leaked" and fields["reasoning_repaired"] is True


def test_client_junk_is_a_400_before_any_upstream_call(lite, litellm):
    with FaultyUpstream(always(ok)) as up:
        with pytest.raises(litellm.BadRequestError) as exc:
            litellm.completion(model="ladder/glm-5", messages=TOOL_HISTORY, max_tokens=100,
                               api_base=up.url + "/v1", thinking_token_budget=-5)
        assert up.count == 0
    assert "ThinkingBudgetError" in str(exc.value)
    payload = lite.wait(1)[0]
    assert payload["status"] == "failure" and _fields(payload)["incident_class"] == "client-error"


def test_every_rung_failing_passes_the_upstreams_status_on(lite, litellm):
    with FaultyUpstream(always(naked_500)) as up:
        with pytest.raises(litellm.InternalServerError):
            litellm.completion(model="ladder/glm-5", messages=TOOL_HISTORY, tools=TOOLS, max_tokens=1024,
                               api_base=up.url + "/v1", num_retries=0)
        assert up.rungs_seen() == ["original", "tool_choice_none", "drop_tools", "final_answer"]
    fields = _fields(lite.wait(1)[0])
    assert fields["ladder"]["outcome"] == "exhausted" and fields["final_class"] == "tool-history-5xx"


def test_a_dead_upstream_is_a_transport_error_and_other_models_get_one_call(lite, litellm):
    with FaultyUpstream(always(hang_up)) as up:
        with pytest.raises(litellm.BadGatewayError) as exc:
            litellm.completion(model="ladder/glm-5", messages=TOOL_HISTORY, tools=TOOLS, api_base=up.url + "/v1",
                               num_retries=0)
        assert up.count == 1 and exc.value.status_code == 502
    assert _fields(lite.wait(1)[0])["incident_class"] == "connection-error"
    with FaultyUpstream(always(naked_500)) as up:  # the ladder is a GLM fix: qwen3 is sent once
        with pytest.raises(litellm.InternalServerError):
            litellm.completion(model="ladder/qwen3", messages=TOOL_HISTORY, tools=TOOLS, api_base=up.url + "/v1",
                               num_retries=0)
        assert up.count == 1
    assert _fields(lite.wait(2)[1])["ladder_armed"] is False


def test_a_200_litellm_cannot_take_as_a_chat_completion_is_a_502(lite, litellm):
    bad = Reply(200, b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": 5}]}',
                (("content-type", "application/json"),))
    with FaultyUpstream(always(bad)) as up:
        with pytest.raises(litellm.BadGatewayError):
            litellm.completion(model="ladder/glm-5", messages=TOOL_HISTORY, api_base=up.url + "/v1", num_retries=0)
        assert up.count == 1
    assert _fields(lite.wait(1)[0])["incident_class"] == "no-answer-200"


def test_the_docs_own_ladder_with_other_settings(litellm):
    """docs/integrations/litellm.md's my_ladder.py: the options reach the ladder and the normalizer."""
    from analyzer.integrations.litellm_ladder import LadderLLM

    page = (REPO / "docs" / "integrations" / "litellm.md").read_text(encoding="utf-8")
    listing = re.search(r"^```text\n(# my_ladder\.py.*?)^```", page, re.M | re.S)
    assert listing, "docs/integrations/litellm.md lost its my_ladder.py"
    module: dict = {}
    exec(listing.group(1), module)  # the module as the page writes it
    ladder = module["ladder"]
    assert isinstance(ladder, LadderLLM) and ladder.settings.templates == {"glm-5": "glm-5.3"} and ladder.settings.length_recovery is True
    assert ladder.caller_deadline_s == 120
    with pytest.raises(ValueError, match="time_budget_s"):  # checked when made, not on a call
        LadderLLM(LadderSettings(time_budget_s=0))
    with pytest.raises(TypeError, match="LadderSettings"):  # the old keywords are not taken silently
        LadderLLM({"length_recovery": True})
