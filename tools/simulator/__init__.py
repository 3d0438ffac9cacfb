"""A realistic, deterministic synthetic week of the LLM proxy's logs, in every form.

Test data for the analyzer's tests, the sample week (``sample_logs/generate.py``) and
the benchmarks; not part of the installed package.

The proxy (``llm_proxy.py`` of open-llm-proxy, see ``docs/log-format.md``)
fronts self-hosted GLM/Qwen models on vLLM plus hosted providers. This package plays
a week of its traffic -- multi-turn tool-calling agent sessions with every failure
class of the design -- and writes it the way the real proxy and its surroundings do:

- :func:`write_s3_chunks` -- the full-fidelity S3 chunk files, flushed every ~60 s
  per proxy process (``YYYY-MM-DD/HH-MM-SS-<pid>.jsonl`` from the old proxy,
  ``YYYY-MM-DD/HH-MM-SS-<host>-<pid>-<8hex>.jsonl`` from newer ones);
- :func:`write_kubectl_stdout` -- each proxy pod's stdout (``kubectl logs``): banner,
  uvicorn lines, prefixed records cut to 200 characters per string field when S3 is
  enabled, ``⚠️``/``🧹``/``✓ Flushed`` lines;
- :func:`write_consolidated_parquet` -- the consolidated Parquet tier (one row per
  record, the original JSON in ``entry``);
- :func:`write_prometheus_exports` -- Prometheus ``/api/v1/query_range`` JSON for
  ``up`` and the vLLM counters/gauges of the glm-5 and qwen3 pods;
- :func:`write_ground_truth` -- what each request was meant to be, for tests.

Quick start::

    from tools.simulator import simulate_week, write_s3_chunks
    week = simulate_week(seed=54, sessions=400)
    for record in week.records():      # dicts in time order, regenerated on each call
        ...
    write_s3_chunks(week, "out/s3")

Everything is a pure function of ``(seed, sessions, start, days)``: one
``random.Random`` per session (seeded from the seed and the session's index) and
one for the arrival process, never the global generator, so the same arguments give
the same bytes. Generation streams: sessions are merged lazily by time with a heap,
so memory stays flat however many sessions are asked for, and every writer consumes
an iterator. Each call of :meth:`SimulatedWeek.events` regenerates the week.

The week's scenario (times relative to ``start``, a Monday 00:00 UTC):

- the old proxy (Mon -> Wed 16:40) logs ``session_id``/``client`` null for old app
  builds and names chunks by PID only; it crashes once on Tue 19:31:34, leaving the
  requests it was serving unanswered;
- a newer proxy from Wed 16:40 (its first pod lacks the OpenRouter, Anthropic and
  Nimbus keys until 18:05); full capture mode (``messages`` and ``system_prompt``
  records, the prompt text in ``content`` as the real proxy writes it) Thu 14:00 ->
  Fri 03:00;
- from Sat 00:02 the proxy runs :mod:`analyzer.online`: its response records carry
  the fields of :func:`analyzer.online.log_fields`, produced by really calling
  :func:`analyzer.online.run_ladder` against a simulated upstream;
- the glm-5 vLLM pod is *wedged* Tue 20:10-20:35 (``up == 1``, the generation
  counter flat, requests stuck running) and Thu 16:35-17:25 with *frozen gauges*
  (the engine hung before its gauge update: running and waiting read 0, so only the
  failing requests show it), then *down* Thu 17:25-17:35 while its replacement
  loads (``up == 0``, ``ConnectError``); Wed 07:00-13:00 is a quiet night with flat
  counters and no demand (not a wedge); the qwen3 pod restarts Wed 11:02 (a counter
  reset); Prometheus misses scrapes Fri 05:10-05:15;
- GLM as it fails today: until Fri 18:40 glm-5 runs GLM-5.2 weights (glm-4.6 the
  same template) whose glm45 parser now and then files an answer given without
  thinking as reasoning (``answer-in-reasoning``); at Fri 18:40 the operator restarts
  the replacement pod on GLM-5.3 weights, still served as ``glm-5``: its template has
  no off switch, so every thinking-off request leaks its scratchpad and a dangling
  ``</think>`` into the content (``reasoning-leaked``; on the ladder days the proxy,
  knowing no template override, sends the false keys and splits the leak out of the
  answer), a GLM-5.3 turn after a tool result sometimes thinks, stops and reports 0
  completion tokens, and the pod's older vLLM refuses ``thinking_token_budget`` for
  lack of a reasoning config (the ladder's budget rung is refused).

Ground truth classes follow the design's rule applied to the truth: a 5xx is
``tool-history-5xx`` when the transcript carries tool history anywhere, failures of the glm-5 pod inside a wedged/down window are ``wedged-pod`` /
``pod-down``, a request whose response was never logged is ``unanswered``, and
``tool-call-stop-mismatch`` exists only where a finish reason is logged (the ladder
days). On ladder days the class is that of the *original* answer, as
``log_fields``'s ``incident_class``.

The modules, by what they model:

- :mod:`~tools.simulator.world` -- the deployment and the week's story: proxy
  replicas, vLLM pods, episodes, the scenario, demand;
  :mod:`~tools.simulator.models` -- each model's behaviour and failure rates;
  :mod:`~tools.simulator.apps` -- the calling apps and their text;
  :mod:`~tools.simulator.clock` -- simulated time and timestamp formats;
  :mod:`~tools.simulator.draws` -- random draws and collision-free ids;
- :mod:`~tools.simulator.sessions` -- multi-turn tool-calling sessions and the records
  of their exchanges; :mod:`~tools.simulator.answers` -- successful answers;
- :mod:`~tools.simulator.faults` -- failure injection, and the upstream the ladder runs
  against on ladder days;
- :mod:`~tools.simulator.week` -- :func:`simulate_week` and the merged event stream;
- :mod:`~tools.simulator.writers` -- the proxy's output forms (S3 chunks, pod stdout
  with its truncation, consolidated Parquet) and the Prometheus exports;
- :mod:`~tools.simulator.truth` -- the ground truth and its file.
"""

from tools.simulator.truth import Truth, write_ground_truth
from tools.simulator.week import Event, SimulatedWeek, records_on, simulate_week
from tools.simulator.world import DEFAULT_SEED, DEFAULT_START, Episode, ProxyProcess, VllmPod
from tools.simulator.writers import (
    S3WriteResult,
    chunk_line,
    stdout_record_line,
    stdout_view,
    write_consolidated_parquet,
    write_kubectl_stdout,
    write_prometheus_exports,
    write_s3_chunks,
)

__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_START",
    "Episode",
    "Event",
    "ProxyProcess",
    "S3WriteResult",
    "SimulatedWeek",
    "Truth",
    "VllmPod",
    "chunk_line",
    "records_on",
    "simulate_week",
    "stdout_record_line",
    "stdout_view",
    "write_consolidated_parquet",
    "write_ground_truth",
    "write_kubectl_stdout",
    "write_prometheus_exports",
    "write_s3_chunks",
]
