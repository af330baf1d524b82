//! The OpenTelemetry instruments the layer records, and their bucket boundaries.

use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};

use super::*;

/// `gen_ai.client.operation.duration` boundaries recommended by the GenAI conventions.
pub(super) const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// `gen_ai.client.token.usage` boundaries recommended by the GenAI conventions.
pub(super) const TOKEN_BUCKETS: [f64; 14] = [
    1.0,
    4.0,
    16.0,
    64.0,
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];
/// `gen_ai.client.operation.time_to_first_chunk` boundaries recommended by the conventions.
pub(super) const TTFC_BUCKETS: [f64; 16] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];
pub(super) const RETRY_BUCKETS: [f64; 8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 16.0];

/// `ripcord.state.backend`: where shared resilience state lives (`redis`).
pub(super) const STATE_BACKEND: &str = "ripcord.state.backend";

/// `gen_ai.token.type`.
pub(super) const TOKEN_TYPE: &str = "gen_ai.token.type";

pub(super) struct Instruments {
    pub(super) op_duration: Histogram<f64>,
    pub(super) token_usage: Histogram<u64>,
    pub(super) ttfc: Histogram<f64>,
    pub(super) requests: Counter<u64>,
    pub(super) errors: Counter<u64>,
    pub(super) cost: Counter<f64>,
    pub(super) chain_calls: Counter<u64>,
    pub(super) chain_duration: Histogram<f64>,
    pub(super) retries: Histogram<u64>,
    pub(super) retries_scheduled: Counter<u64>,
    pub(super) events_skipped: Counter<u64>,
    pub(super) fallbacks: Counter<u64>,
    pub(super) continuations: Counter<u64>,
    pub(super) skipped: Counter<u64>,
    pub(super) static_replies: Counter<u64>,
    pub(super) breaker_state: Gauge<i64>,
    pub(super) breaker_transitions: Counter<u64>,
    pub(super) breaker_open_time: Counter<f64>,
    pub(super) state_degradations: Counter<u64>,
    pub(super) state_degraded: Gauge<i64>,
    pub(super) alerts: Counter<u64>,
    pub(super) chain_exhausted: Counter<u64>,
    pub(super) consecutive_failures: Gauge<u64>,
    pub(super) vendor_status: Gauge<i64>,
    pub(super) vendor_poll_failures: Counter<u64>,
    pub(super) tenant_tokens: Counter<u64>,
    pub(super) tenant_cost: Counter<f64>,
}

impl Instruments {
    pub(super) fn new(meter: &Meter) -> Self {
        Instruments {
            op_duration: meter
                .f64_histogram(names::OPERATION_DURATION)
                .with_unit("s")
                .with_description("GenAI operation duration")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            token_usage: meter
                .u64_histogram(names::TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Number of input and output tokens used")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            ttfc: meter
                .f64_histogram(names::TIME_TO_FIRST_CHUNK)
                .with_unit("s")
                .with_description("Time to receive the first chunk of a streamed answer")
                .with_boundaries(TTFC_BUCKETS.to_vec())
                .build(),
            requests: meter
                .u64_counter(names::REQUESTS)
                .with_unit("{request}")
                .with_description("Requests sent to models")
                .build(),
            errors: meter
                .u64_counter(names::ERRORS)
                .with_unit("{request}")
                .with_description("Requests to models that failed, by error.type")
                .build(),
            cost: meter
                .f64_counter(names::COST)
                .with_unit("USD")
                .with_description("Estimated cost of answers")
                .build(),
            chain_calls: meter
                .u64_counter(names::CHAIN_CALLS)
                .with_unit("{call}")
                .with_description("Chain calls by the link that served them")
                .build(),
            chain_duration: meter
                .f64_histogram(names::CHAIN_DURATION)
                .with_unit("s")
                .with_description("Duration of whole chain calls, fallbacks included")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            retries: meter
                .u64_histogram(names::RETRIES)
                .with_unit("{retry}")
                .with_description("Retries per chain call")
                .with_boundaries(RETRY_BUCKETS.to_vec())
                .build(),
            retries_scheduled: meter
                .u64_counter(names::RETRIES_SCHEDULED)
                .with_unit("{retry}")
                .with_description("Retries scheduled, by link and error.type")
                .build(),
            events_skipped: meter
                .u64_counter(names::STREAM_EVENTS_SKIPPED)
                .with_unit("{event}")
                .with_description("Unparseable vendor stream events skipped, by link")
                .build(),
            fallbacks: meter
                .u64_counter(names::FALLBACKS)
                .with_unit("{fallback}")
                .with_description("Fallbacks from one link to another")
                .build(),
            continuations: meter
                .u64_counter(names::STREAM_CONTINUATIONS)
                .with_unit("{continuation}")
                .with_description(
                    "Cut, stalled or failed streams continued on another link from the delivered text",
                )
                .build(),
            skipped: meter
                .u64_counter(names::LINKS_SKIPPED)
                .with_unit("{link}")
                .with_description("Links passed over without a call")
                .build(),
            static_replies: meter
                .u64_counter(names::STATIC_REPLIES)
                .with_unit("{reply}")
                .with_description("Static last-resort replies served")
                .build(),
            breaker_state: meter
                .i64_gauge(names::BREAKER_STATE)
                .with_description("Circuit breaker state: 0 closed, 1 half-open, 2 open")
                .build(),
            breaker_transitions: meter
                .u64_counter(names::BREAKER_TRANSITIONS)
                .with_unit("{transition}")
                .with_description("Circuit breaker state changes")
                .build(),
            breaker_open_time: meter
                .f64_counter(names::BREAKER_OPEN_TIME)
                .with_unit("s")
                .with_description("Time circuit breakers spent open")
                .build(),
            state_degradations: meter
                .u64_counter(names::STATE_DEGRADATIONS)
                .with_unit("{outage}")
                .with_description(
                    "Times the shared resilience state became unreachable (local state served)",
                )
                .build(),
            state_degraded: meter
                .i64_gauge(names::STATE_DEGRADED)
                .with_description("1 while serving on local state because shared state is down")
                .build(),
            tenant_tokens: meter
                .u64_counter(names::TENANT_TOKENS)
                .with_unit("{token}")
                .with_description("Tokens of gateway answers by the tenant charged")
                .build(),
            tenant_cost: meter
                .f64_counter(names::TENANT_COST)
                .with_unit("USD")
                .with_description("Estimated cost of gateway answers by the tenant charged")
                .build(),
            alerts: meter
                .u64_counter(names::ALERTS)
                .with_unit("{alert}")
                .with_description(
                    "Alerts: failures an operator must act on (auth, quota, permission, region), \
                     at most one per link and error.type per interval",
                )
                .build(),
            chain_exhausted: meter
                .u64_counter(names::CHAIN_EXHAUSTED)
                .with_unit("{call}")
                .with_description(
                    "Chain calls that ended in an error because every link failed or was \
                     skipped and no static reply is configured",
                )
                .build(),
            consecutive_failures: meter
                .u64_gauge(names::LINK_CONSECUTIVE_FAILURES)
                .with_unit("{attempt}")
                .with_description(
                    "Failed attempts of a link in a row since its last success (0 after a \
                     success; cancelled attempts count neither way)",
                )
                .build(),
            vendor_status: meter
                .i64_gauge(names::VENDOR_STATUS)
                .with_description(
                    "What the vendor's own status page declares for a component a link depends \
                     on: 0 operational, 1 degraded or under maintenance, 2 partial outage, 3 major \
                     outage",
                )
                .build(),
            vendor_poll_failures: meter
                .u64_counter(names::VENDOR_POLL_FAILURES)
                .with_unit("{poll}")
                .with_description(
                    "Polls of a vendor's status page that could not be read (nothing changed)",
                )
                .build(),
        }
    }
}
