"""The metrics and selectors the dashboards query, by name: what the services export
(services/runtime/base/metrics.py) and what the NATS exporter reports."""

REQ = "sidekick_requests_total"
REQ_TIME = "sidekick_request_duration_seconds"
ATTEMPTS = "sidekick_request_attempts"
SCORE = "sidekick_evaluator_score"
LLM_TIME = "sidekick_llm_request_duration_seconds"
DEAD = "sidekick_dead_letters_total"
CANCELS = "sidekick_cancellations_total"
FAILED = 'outcome="failed"'
WORK = 'stream_name=~".+_WORK"'
DL_SEQ = 'nats_stream_last_seq{stream_name=~".+_DEADLETTER"}'
