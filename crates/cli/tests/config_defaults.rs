//! A setting left out of the config is the library's default, read from the library: an empty
//! section resolves to exactly what `RetryPolicy::default()` and friends say, and the binary
//! differs only where `config::defaults` says so.

#![allow(clippy::unwrap_used)] // a failed unwrap fails the test

use ripcord_cli::config::{self, BreakerSettings, Provider, RetrySettings, TimeoutsConfig};
use ripcord_core::chain::{DEFAULT_DEADLINE, DEFAULT_MIN_ATTEMPT, DEFAULT_STREAM_MAX};
use ripcord_resilience::{BreakerPolicy, BudgetPolicy, RetryPolicy};

fn no_env(_: &str) -> Option<String> {
    None
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap()
}

/// What the library's own defaults say, read through its public API only.
fn library_retry() -> RetrySettings {
    let lib = RetryPolicy::default();
    RetrySettings {
        max_attempts: lib.max_attempts(),
        base_delay_ms: ms(lib.backoff().base),
        max_delay_ms: ms(lib.backoff().cap),
        retry_on: lib.retry_on(),
    }
}

fn library_breaker() -> BreakerSettings {
    let lib = BreakerPolicy::default();
    BreakerSettings {
        failure_threshold: lib.consecutive_failures().unwrap(),
        open_ms: ms(lib.open().iter().next().unwrap()),
        open_max_ms: lib.open().iter().take(40).map(ms).max().unwrap(),
        background_probe_ms: lib.background_probe().map(ms),
        half_open_probes: u32::try_from(lib.max_probes()).unwrap(),
    }
}

const EMPTY_SECTIONS: &str = r#"
[chain]
order = ["sections", "bare"]

[[providers]]
name = "sections"
kind = "openai"
model = "gpt-4o"
api_key = "sk-test-sections"
[providers.retry]
[providers.breaker]
[providers.probe]
[providers.timeouts]

[[providers]]
name = "bare"
kind = "openai"
model = "gpt-4o"
api_key = "sk-test-bare"

[budget]
tokens_per_window = 1000

[redaction]
"#;

fn provider<'a>(c: &'a config::Config, name: &str) -> &'a Provider {
    c.provider(name).unwrap()
}

#[test]
fn an_empty_section_resolves_to_exactly_the_library_defaults() {
    let c = config::parse("defaults.toml", EMPTY_SECTIONS, &no_env).unwrap();
    let p = provider(&c, "sections");
    assert_eq!(p.retry, library_retry());
    assert_eq!(p.breaker, library_breaker());
    assert_eq!(
        p.timeouts,
        TimeoutsConfig::default(),
        "timeouts stay unset for the adapter"
    );
    let probe = p.probe.as_ref().unwrap();
    assert_eq!(
        (probe.interval_ms, probe.timeout_ms, probe.probe_healthy),
        (None, None, false),
        "probe timing stays unset for the library's builder"
    );
    // A section left out entirely is the same as an empty one.
    let bare = provider(&c, "bare");
    assert_eq!(bare.retry, p.retry);
    assert_eq!(bare.breaker, p.breaker);

    let spec = &c.default_route().unwrap().spec;
    assert_eq!(spec.deadline_ms, ms(DEFAULT_DEADLINE));
    assert_eq!(spec.stream_max_ms, ms(DEFAULT_STREAM_MAX));
    assert_eq!(spec.min_attempt_ms, ms(DEFAULT_MIN_ATTEMPT));

    let budget = c.budget.as_ref().unwrap();
    assert_eq!(budget.window_s, BudgetPolicy::default().window().as_secs());
    assert_eq!(c.redaction.as_ref().unwrap().restore, None);
}

#[test]
fn a_set_field_overrides_only_itself() {
    let text = EMPTY_SECTIONS
        .replace(
            "[providers.retry]\n",
            "[providers.retry]\nbase_delay_ms = 250\n",
        )
        .replace(
            "[providers.breaker]\n",
            "[providers.breaker]\nopen_ms = 1500\n",
        );
    let c = config::parse("defaults.toml", &text, &no_env).unwrap();
    let p = provider(&c, "sections");
    assert_eq!(
        p.retry,
        RetrySettings {
            base_delay_ms: 250,
            ..library_retry()
        }
    );
    assert_eq!(
        p.breaker,
        BreakerSettings {
            open_ms: 1500,
            ..library_breaker()
        }
    );
}

#[test]
fn the_binary_differs_from_the_library_only_where_its_defaults_module_says() {
    let text = r#"
[chain]
order = ["local", "local-retried"]

[[providers]]
name = "local"
kind = "local-onnx"

[[providers]]
name = "local-retried"
kind = "local-onnx"
[providers.retry]

[budget]
tokens_per_window = 1000
"#;
    let c = config::parse("local.toml", text, &no_env).unwrap();
    // A local model's failures do not go away by waiting: no retry unless the file asks.
    assert!(library_retry().max_attempts > 1);
    assert_eq!(
        provider(&c, "local").retry,
        RetrySettings {
            max_attempts: config::defaults::LOCAL_MAX_ATTEMPTS,
            ..library_retry()
        }
    );
    assert_eq!(config::defaults::LOCAL_MAX_ATTEMPTS, 1);
    assert!(
        provider(&c, "local")
            .effective()
            .starts_with("retry: none (1 attempt)"),
        "{}",
        provider(&c, "local").effective()
    );
    // Asking for the section, even empty, gets the library's retry.
    assert_eq!(provider(&c, "local-retried").retry, library_retry());
    // The breaker is the library's for local links too.
    assert_eq!(provider(&c, "local").breaker, library_breaker());
    // The gateway budgets calls without a tenant unless told not to (the library does not by
    // default).
    assert_eq!(
        c.budget.as_ref().unwrap().anonymous,
        config::defaults::BUDGET_ANONYMOUS
    );
}

#[cfg(feature = "redis")]
#[test]
fn redis_timing_left_out_is_the_redis_crates_default() {
    let text = format!(
        "{EMPTY_SECTIONS}\n[state]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:1/0\"\n"
    );
    let c = config::parse("redis.toml", &text, &no_env).unwrap();
    let config::StateBackend::Redis(r) = &c.state else {
        panic!("expected the redis backend, got {:?}", c.state);
    };
    let d = ripcord_redis::StateOptions::default();
    assert_eq!(
        (r.op_timeout_ms, r.connect_timeout_ms, r.retry_interval_ms),
        (
            ms(d.op_timeout),
            ms(d.connect_timeout),
            ms(d.retry_interval)
        )
    );
}
