//! The vocabulary: span, attribute and event names, and the values of the GenAI attributes.
//! Every emitter spells a name through these constants, so the exporter and the metrics can
//! match on them.

/// Span names (the `tracing` name; the OpenTelemetry name comes from the `otel.name` field).
pub mod span_name {
    /// A chain call ([`crate::telemetry::chain_span`]).
    pub const CHAIN: &str = "ripcord.chain";
    /// One request to one model ([`crate::telemetry::attempt_span`]).
    pub const ATTEMPT: &str = "ripcord.attempt";
    /// One generation of the in-process model (inside its attempt span).
    pub const LOCAL_GENERATE: &str = "ripcord.local.generate";
}

/// Values of `gen_ai.operation.name`.
pub mod operation {
    /// Chat completion.
    pub const CHAT: &str = "chat";
    /// Embeddings.
    pub const EMBEDDINGS: &str = "embeddings";
}

/// Values of `gen_ai.provider.name` for ripcord's vendors.
///
/// Registered values of the GenAI semantic conventions where one exists (`openai`, `anthropic`,
/// `azure.ai.openai`, `deepseek`); stable custom values in the same style otherwise. The
/// deprecated `gen_ai.system` attribute is never written.
pub mod provider {
    /// OpenAI (registered).
    pub const OPENAI: &str = "openai";
    /// Anthropic (registered).
    pub const ANTHROPIC: &str = "anthropic";
    /// Azure OpenAI (registered).
    pub const AZURE_OPENAI: &str = "azure.ai.openai";
    /// DeepSeek (registered).
    pub const DEEPSEEK: &str = "deepseek";
    /// Zhipu AI (GLM); not registered, custom.
    pub const ZHIPU: &str = "zhipu_ai";
    /// Alibaba Cloud DashScope (Qwen); not registered, custom.
    pub const DASHSCOPE: &str = "alibaba.dashscope";
    /// Moonshot AI (Kimi); not registered, custom.
    pub const MOONSHOT: &str = "moonshot_ai";
    /// Baidu Qianfan (ERNIE); not registered, custom.
    pub const QIANFAN: &str = "baidu.qianfan";
    /// Ollama; not registered, custom.
    pub const OLLAMA: &str = "ollama";
    /// vLLM; not registered, custom.
    pub const VLLM: &str = "vllm";
    /// ripcord's in-process ONNX Runtime model; custom.
    pub const LOCAL_ONNX: &str = "ripcord.local_onnx";
    /// AWS Bedrock (registered).
    pub const AWS_BEDROCK: &str = "aws.bedrock";
    /// Mistral AI (registered).
    pub const MISTRAL_AI: &str = "mistral_ai";
    /// Groq (registered).
    pub const GROQ: &str = "groq";
    /// xAI (registered).
    pub const XAI: &str = "x_ai";
    /// OpenRouter; not registered, custom.
    pub const OPENROUTER: &str = "openrouter";
    /// Together AI; not registered, custom.
    pub const TOGETHER: &str = "together_ai";
    /// Fireworks AI; not registered, custom.
    pub const FIREWORKS: &str = "fireworks_ai";
    /// Cerebras; not registered, custom.
    pub const CEREBRAS: &str = "cerebras";
}

/// Attribute (field) names.
pub mod attr {
    /// `gen_ai.operation.name`: [`operation`](super::operation).
    pub const OPERATION_NAME: &str = "gen_ai.operation.name";
    /// `gen_ai.provider.name`: [`provider`](super::provider).
    pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// `gen_ai.request.model`: the model asked for.
    pub const REQUEST_MODEL: &str = "gen_ai.request.model";
    /// `gen_ai.request.stream`: whether the answer was streamed.
    pub const REQUEST_STREAM: &str = "gen_ai.request.stream";
    /// `gen_ai.response.model`: the model that answered, as the vendor named it.
    pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
    /// `gen_ai.response.finish_reasons`. `tracing` has no array values, so spans carry the
    /// reasons comma-separated; `ripcord-telemetry` exports them as a string array.
    pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// `gen_ai.usage.input_tokens`.
    pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// `gen_ai.usage.output_tokens`.
    pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// `gen_ai.response.time_to_first_chunk`, in seconds.
    pub const RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
    /// `gen_ai.input.messages`: the prompt, as JSON (only when content recording is on).
    pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
    /// `gen_ai.output.messages`: the completion, as JSON (only when content recording is on).
    pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
    /// `server.address`: the vendor's host.
    pub const SERVER_ADDRESS: &str = "server.address";
    /// `error.type`: ripcord's snake_case [`crate::ErrorKind`].
    pub const ERROR_TYPE: &str = "error.type";
    /// `otel.name`: the OpenTelemetry span name (read by `tracing-opentelemetry`).
    pub const OTEL_NAME: &str = "otel.name";
    /// `otel.kind`: `client` or `internal`.
    pub const OTEL_KIND: &str = "otel.kind";
    /// `otel.status_code`: `ERROR` on failure.
    pub const OTEL_STATUS_CODE: &str = "otel.status_code";
    /// `otel.status_description`: a short failure description (kind, HTTP status, vendor code).
    pub const OTEL_STATUS_DESCRIPTION: &str = "otel.status_description";

    /// `ripcord.link`: the chain link's name ([`crate::ModelId::name`]).
    pub const LINK: &str = "ripcord.link";
    /// `ripcord.attempt`: the position of an attempt within its call (1-based).
    pub const ATTEMPT: &str = "ripcord.attempt";
    /// `ripcord.chain`: the chain's name.
    pub const CHAIN: &str = "ripcord.chain";
    /// `ripcord.chain.links`: how many links the chain has.
    pub const CHAIN_LINKS: &str = "ripcord.chain.links";
    /// `ripcord.attempts`: how many attempts a chain call made.
    pub const ATTEMPTS: &str = "ripcord.attempts";
    /// `ripcord.degraded`: the answer came from a fallback or is the static reply.
    pub const DEGRADED: &str = "ripcord.degraded";
    /// `ripcord.served_by`: the link that served the answer (`static` for the static reply).
    pub const SERVED_BY: &str = "ripcord.served_by";
    /// `ripcord.static_reply`: the answer is the static last-resort reply.
    pub const STATIC_REPLY: &str = "ripcord.static_reply";
    /// `ripcord.cost_usd`: estimated cost of an answer in USD.
    pub const COST_USD: &str = "ripcord.cost_usd";
    /// `ripcord.usage.cached_input_tokens`: prompt tokens served from the vendor's cache.
    pub const CACHED_INPUT_TOKENS: &str = "ripcord.usage.cached_input_tokens";
    /// `ripcord.fallback.from`: the link that failed (on [`super::event::FALLBACK`]).
    pub const FALLBACK_FROM: &str = "ripcord.fallback.from";
    /// `ripcord.fallback.to`: the link tried next (on [`super::event::FALLBACK`]).
    pub const FALLBACK_TO: &str = "ripcord.fallback.to";
    /// `ripcord.skip.reason`: why a link was skipped (on [`super::event::LINK_SKIPPED`]).
    pub const SKIP_REASON: &str = "ripcord.skip.reason";
    /// The link that continued a cut stream (the chain span, and the continuation event).
    pub const CONTINUED_BY: &str = "ripcord.continued_by";
    /// Where the continuation began: the bytes of answer text delivered before the cut.
    pub const CONTINUATION_OFFSET: &str = "ripcord.continuation.offset";
    /// How the continuing link was asked: `prefill` or `instruction`.
    pub const CONTINUATION_MODE: &str = "ripcord.continuation.mode";
    /// What ended the continued stream: `cut` (it ended or broke without its finish), `stall`
    /// (silent past its idle limit) or `in_band` (the vendor sent an error inside the stream).
    pub const CONTINUATION_REASON: &str = "ripcord.continuation.reason";
    /// How many continuations one streamed answer took (the chain span).
    pub const CONTINUATIONS: &str = "ripcord.continuations";
    /// `ripcord.tenant`: the tenant a call was charged to (on [`super::event::TENANT_USAGE`];
    /// the tenant of the caller's key, never a sub-tenant, so the values stay few).
    pub const TENANT: &str = "ripcord.tenant";
    /// `ripcord.alert.suppressed`: how many alert-kind failures of the pair were held back
    /// since the last [`super::event::ALERT`].
    pub const ALERT_SUPPRESSED: &str = crate::alert::SUPPRESSED;
    /// `vendor_component`: the component of a vendor's status page a link depends on (on
    /// [`super::event::VENDOR_STATUS`] and the declared-outage events).
    pub const VENDOR_COMPONENT: &str = "vendor_component";
    /// `ripcord.vendor_status`: a component's declared status as a number, 0 operational, 1
    /// degraded (or under maintenance), 2 partial outage, 3 major outage.
    pub const VENDOR_STATUS_LEVEL: &str = "ripcord.vendor_status.level";
}

/// Event names (the message of a `tracing` event, which `tracing-opentelemetry` uses as the
/// span event's name).
pub mod event {
    /// The chain passed over a link without calling it (`ripcord.link`, `ripcord.skip.reason`).
    pub const LINK_SKIPPED: &str = "ripcord.link_skipped";
    /// A link's attempt failed (`ripcord.link`, `error.type`, `ripcord.attempt`, `latency_ms`).
    pub const LINK_FAILED: &str = "ripcord.link_failed";
    /// The chain moved on to another link after a failure (`ripcord.fallback.from`,
    /// `ripcord.fallback.to`, `error.type`).
    pub const FALLBACK: &str = "ripcord.fallback";
    /// The chain answered with its static reply (`error.type` of the last failure).
    pub const STATIC_REPLY: &str = "ripcord.static_reply";
    /// Every link of the chain failed or was skipped and no static reply is configured: the
    /// call ended in an error (`ripcord.chain`, `error.type` of the last failure). A call
    /// stopped early by a fail-fast error (a bad request) is not this event.
    pub const CHAIN_EXHAUSTED: &str = "ripcord.chain_exhausted";
    /// A committed stream failed and restarted on another link (`ripcord.fallback.from`,
    /// `ripcord.fallback.to`, `error.type`).
    pub const STREAM_RESTARTED: &str = "ripcord.stream_restarted";
    /// A committed stream failed and ended with the error (`ripcord.link`, `error.type`).
    pub const STREAM_FAILED: &str = "ripcord.stream_failed_after_commit";
    /// The chain waits for a cooling-down link (`wait_ms`).
    pub const READMISSION_WAIT: &str = "ripcord.readmission_wait";
    /// A retry decorator scheduled another attempt (`ripcord.link`, `attempt`, `delay_ms`, `error.type`).
    pub const RETRY_SCHEDULED: &str = "ripcord.retry_scheduled";
    /// A vendor stream event that could not be parsed was skipped (`ripcord.link`,
    /// `ripcord.skipped_events`: how many this stream skipped so far, `error.message`).
    pub const STREAM_EVENT_SKIPPED: &str = "ripcord.stream_event_skipped";
    /// A circuit breaker changed state (`ripcord.link`, `from`, `to`; states `closed`, `open`,
    /// `half_open`).
    pub const BREAKER_TRANSITION: &str = "ripcord.breaker_transition";
    /// Shared resilience state (Redis) became unreachable: the process runs on local state
    /// until it is back (`reason`). Said once per outage, not per request.
    pub const STATE_DEGRADED: &str = "ripcord.state_degraded";
    /// Shared resilience state is reachable again after [`STATE_DEGRADED`].
    pub const STATE_RESTORED: &str = "ripcord.state_restored";
    /// A link failed with a kind an operator must act on (`ripcord.link`, `error.type`,
    /// `ripcord.alert.suppressed`); at most one per link and kind per interval, see
    /// [`crate::alert`].
    pub const ALERT: &str = crate::alert::EVENT;
    /// A gateway call was answered for a tenant (`ripcord.tenant`,
    /// `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`, and `ripcord.cost_usd` when
    /// the price is known).
    pub const TENANT_USAGE: &str = "ripcord.tenant_usage";

    // The chain's finer decisions.
    /// The chain trimmed old messages to fit a link's context window (`trimmed_messages`).
    pub const TRIMMED: &str = "ripcord.trimmed";
    /// The chain did not fall back after a failure, because the request is not retry-safe and
    /// the vendor may have processed it (`ripcord.link`, `error.type`).
    pub const FALLBACK_UNSAFE_SKIPPED: &str = "ripcord.fallback_unsafe_skipped";
    /// A stream failed while its start was held back, before the caller saw any of it
    /// (`error.type`); the chain tries the next link.
    pub const STREAM_FAILED_IN_HOLDBACK: &str = "ripcord.stream_failed_in_holdback";
    /// A link's vendor stated its context window in a context-length error and the chain
    /// judges the link by it from now on (`ripcord.link`, `window`).
    pub const WINDOW_LEARNED: &str = "ripcord.window_learned";
    /// A committed stream failed and the next link continues the answer from the text already
    /// delivered (`ripcord.fallback.from`, `ripcord.continued_by`, `ripcord.continuation.offset`,
    /// `ripcord.continuation.mode`, `ripcord.continuation.reason`, `error.type`).
    pub const STREAM_CONTINUED: &str = "ripcord.stream_continued";
    /// A committed stream could not be continued (tool calls, not retry-safe, no link left)
    /// and ends with its error (`ripcord.link`, `reason`).
    pub const STREAM_CONTINUE_REFUSED: &str = "ripcord.stream_continue_refused";

    // Vendor adapters.
    /// A vendor failure became a ripcord error (`gen_ai.provider.name`, `gen_ai.request.model`,
    /// `error.type`, `http.response.status_code`, `vendor_code`).
    pub const VENDOR_ERROR: &str = "ripcord.vendor_error";
    /// A vendor stream ended cleanly after its stop reason but without its terminator, and was
    /// accepted as complete.
    pub const STREAM_ENDED_WITHOUT_TERMINATOR: &str = "ripcord.stream_ended_without_terminator";

    // The in-process model.
    /// A local model was loaded (`model`, timings).
    pub const LOCAL_LOADED: &str = "ripcord.local.loaded";
    /// A local model finished a generation (`model`, token counts, timings).
    pub const LOCAL_GENERATED: &str = "ripcord.local.generated";

    // Retry.
    /// The retry decorator did not retry an error of a class it is not set to retry.
    pub const RETRY_CLASS_NOT_RETRIED: &str = "ripcord.retry_class_not_retried";
    /// The retry decorator did not retry a request that is not retry-safe after the vendor may
    /// have processed it.
    pub const RETRY_UNSAFE_SKIPPED: &str = "ripcord.retry_unsafe_skipped";
    /// The vendor's `Retry-After` was longer than the retry decorator waits.
    pub const RETRY_AFTER_TOO_LONG: &str = "ripcord.retry_after_too_long";
    /// The next retry would start after the call's deadline.
    pub const RETRY_BEYOND_DEADLINE: &str = "ripcord.retry_beyond_deadline";
    /// The retry budget (retries as a share of calls) is spent.
    pub const RETRY_BUDGET_EXHAUSTED: &str = "ripcord.retry_budget_exhausted";

    // Rate limits and budgets.
    /// The local rate limiter made a call wait or refused it (`ripcord.link`, `wait_ms`, `why`).
    pub const RATE_LIMITED_LOCALLY: &str = "ripcord.rate_limited_locally";
    /// A vendor's rate-limit answer paused the link (`ripcord.link`, `pause_ms`).
    pub const RATE_LIMIT_PAUSED: &str = "ripcord.rate_limit_paused";
    /// A tenant's budget is spent (`ripcord.link`, `tenant`).
    pub const BUDGET_EXHAUSTED: &str = "ripcord.budget_exhausted";
    /// The queue of breaker reports to shared state is full; a report was dropped and the
    /// local breaker still counts it.
    pub const STATE_REPORT_QUEUE_FULL: &str = "ripcord.state_report_queue_full";

    // Other decorators.
    /// A health probe ran (`ripcord.link`, outcome).
    pub const PROBE: &str = "ripcord.probe";
    /// A health probe was skipped (the link served real traffic recently).
    pub const PROBE_SKIPPED: &str = "ripcord.probe_skipped";
    /// An open breaker's background liveness probe ran (`ripcord.link`, `outcome`,
    /// `latency_ms`, `error.type`); an answer re-admits the link (half-open).
    pub const BREAKER_PROBE: &str = "ripcord.breaker_probe";
    /// The response cache answered (`ripcord.link`).
    pub const CACHE_HIT: &str = "ripcord.cache_hit";
    /// Personal data was redacted from a request (`ripcord.link`, counts by kind).
    pub const REDACTED: &str = "ripcord.redacted";
    /// A hedge was not sent: the hedge budget is spent (`ripcord.link`).
    pub const HEDGE_BUDGET_SPENT: &str = "ripcord.hedge_budget_spent";
    /// A hedge request was sent (`ripcord.link`, `hedge`, `delay_ms`).
    pub const HEDGE_STARTED: &str = "ripcord.hedge_started";
    /// The hedge answered first (`ripcord.link`, `hedge`).
    pub const HEDGE_WON: &str = "ripcord.hedge_won";
    /// An answer failed validation (`ripcord.link`, `reason`).
    pub const VALIDATION_FAILED: &str = "ripcord.validation_failed";

    // Pools of deployments.
    /// A pool's deployment cools down for the vendor's retry-after (`ripcord.link`,
    /// `ripcord.deployment`, `cooldown_ms`).
    pub const POOL_COOLDOWN: &str = "ripcord.pool_cooldown";
    /// A pool's deployment was ejected for its error rate (`ripcord.link`,
    /// `ripcord.deployment`, `ejection_ms`, `failure_rate`).
    pub const POOL_EJECTED: &str = "ripcord.pool_ejected";
    /// A pool's deployment went out of service until a probe or an operator reinstates it
    /// (`ripcord.link`, `ripcord.deployment`, `error.type`).
    pub const POOL_OUT_OF_SERVICE: &str = "ripcord.pool_out_of_service";
    /// A pool's deployment was reinstated (`ripcord.link`, `ripcord.deployment`, `by`).
    pub const POOL_REINSTATED: &str = "ripcord.pool_reinstated";

    // Vendors' own status pages.
    /// A poll of a vendor's status page read a new declared status for a link's components
    /// (`ripcord.link`, `vendor_component`, `ripcord.vendor_status.level`, `status`); also
    /// said on the first poll, so the gauge starts with a value.
    pub const VENDOR_STATUS: &str = "ripcord.vendor_status";
    /// A vendor's status page declared a major outage of a component a link depends on
    /// (`ripcord.link`, `vendor_component`, `incident`, `policy`: what ripcord does about it,
    /// `demote`, `open` or `alert`). Said once per outage.
    pub const VENDOR_DECLARED_OUTAGE: &str = "ripcord.vendor_declared_outage";
    /// The declared major outage is over (`ripcord.link`, `vendor_component`): the link is back
    /// in its place.
    pub const VENDOR_DECLARED_RESOLVED: &str = "ripcord.vendor_declared_resolved";
    /// A vendor's status page could not be read (`ripcord.link`, `error.message`, `failures`
    /// in a row); nothing changes. Logged at most once per backoff step.
    pub const VENDOR_STATUS_POLL_FAILED: &str = "ripcord.vendor_poll_failed";

    /// Every event name above: the vocabulary a test holds the emitters to.
    pub const ALL: &[&str] = &[
        LINK_SKIPPED,
        LINK_FAILED,
        FALLBACK,
        STATIC_REPLY,
        CHAIN_EXHAUSTED,
        STREAM_RESTARTED,
        STREAM_FAILED,
        READMISSION_WAIT,
        RETRY_SCHEDULED,
        STREAM_EVENT_SKIPPED,
        BREAKER_TRANSITION,
        STATE_DEGRADED,
        STATE_RESTORED,
        ALERT,
        TENANT_USAGE,
        TRIMMED,
        FALLBACK_UNSAFE_SKIPPED,
        STREAM_FAILED_IN_HOLDBACK,
        WINDOW_LEARNED,
        STREAM_CONTINUED,
        STREAM_CONTINUE_REFUSED,
        VENDOR_ERROR,
        STREAM_ENDED_WITHOUT_TERMINATOR,
        LOCAL_LOADED,
        LOCAL_GENERATED,
        RETRY_CLASS_NOT_RETRIED,
        RETRY_UNSAFE_SKIPPED,
        RETRY_AFTER_TOO_LONG,
        RETRY_BEYOND_DEADLINE,
        RETRY_BUDGET_EXHAUSTED,
        RATE_LIMITED_LOCALLY,
        RATE_LIMIT_PAUSED,
        BUDGET_EXHAUSTED,
        STATE_REPORT_QUEUE_FULL,
        PROBE,
        PROBE_SKIPPED,
        BREAKER_PROBE,
        CACHE_HIT,
        REDACTED,
        HEDGE_BUDGET_SPENT,
        HEDGE_STARTED,
        HEDGE_WON,
        VALIDATION_FAILED,
        POOL_COOLDOWN,
        POOL_EJECTED,
        POOL_OUT_OF_SERVICE,
        POOL_REINSTATED,
        VENDOR_STATUS,
        VENDOR_DECLARED_OUTAGE,
        VENDOR_DECLARED_RESOLVED,
        VENDOR_STATUS_POLL_FAILED,
    ];
}
