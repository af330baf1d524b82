//! Config errors name the file, the line and the key; one test per kind of mistake.

#![allow(clippy::unwrap_used, clippy::print_stdout)] // test helpers below fail the test by panicking

use ripcord_cli::config::{self, ConfigError};

fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name: &str| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    }
}

fn parse_ok(text: &str, vars: &'static [(&'static str, &'static str)]) -> config::Config {
    config::parse("ripcord.toml", text, &env(vars)).unwrap()
}

fn parse_err(text: &str, vars: &'static [(&'static str, &'static str)]) -> ConfigError {
    let e = config::parse("ripcord.toml", text, &env(vars)).unwrap_err();
    println!("{e}");
    e
}

const GOOD: &str = r#"
[chain]
order = ["primary", "local"]
deadline_ms = 9000
static_reply = "Busy: ${SUPPORT_HINT}"

[[providers]]
name = "primary"
kind = "openai"
model = "gpt-4o"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "OPENAI_API_KEY"
[providers.retry]
max_attempts = 2
base_delay_ms = 50
[providers.breaker]
failure_threshold = 3
open_ms = 1000

[[providers]]
name = "local"
kind = "local-onnx"
model_dir = "/models/smol"
"#;

#[test]
fn a_good_config_resolves_with_interpolation_and_redacts_keys() {
    let c = parse_ok(
        GOOD,
        &[
            ("OPENAI_API_KEY", "sk-test-SECRET-123"),
            ("SUPPORT_HINT", "call us"),
        ],
    );
    assert_eq!(c.chain.len(), 2);
    assert_eq!(c.chain[0].retry.max_attempts, 2);
    assert_eq!(c.chain[0].breaker.open_ms, 1000);
    assert_eq!(
        c.routes[0].spec.static_reply.as_deref(),
        Some("Busy: call us")
    );
    assert_eq!(c.routes[0].spec.deadline_ms, 9000);
    let shown = format!("{}\n{:?}", c.describe(), c);
    assert!(!shown.contains("sk-test-SECRET-123"), "{shown}");
    assert!(shown.contains("[redacted]"));
}

/// A vendor the binary was built without is refused naming the feature that adds it, not taken
/// for a typo (`cargo xtask features` runs this in a build without Bedrock).
#[cfg(not(feature = "bedrock"))]
#[test]
fn a_vendor_left_out_of_the_build_is_refused_naming_its_feature() {
    let text = GOOD
        .replace(
            "kind = \"openai\"",
            "kind = \"bedrock\"\nregion = \"us-east-1\"",
        )
        .replace("api_key_env = \"OPENAI_API_KEY\"\n", "");
    let e = parse_err(&text, &[("SUPPORT_HINT", "x")]);
    assert_eq!(e.key.as_deref(), Some("kind"), "{e}");
    assert!(
        e.message.contains("kind `bedrock` is not in this build")
            && e.message.contains("the `bedrock` feature"),
        "{e}"
    );
}

/// Every vendor of the registry is a kind the config accepts by its registry name.
#[test]
fn every_registered_vendor_is_a_config_kind() {
    for v in config::Vendor::ALL {
        let kind: config::ProviderKind =
            serde::Deserialize::deserialize(serde::de::value::StrDeserializer::<
                serde::de::value::Error,
            >::new(v.name()))
            .unwrap();
        assert_eq!(kind, config::ProviderKind::Vendor(v));
        assert_eq!(kind.as_str(), v.name());
    }
}

/// The keys [`GOOD`] needs from the environment.
const GOOD_VARS: &[(&str, &str)] = &[("OPENAI_API_KEY", "k"), ("SUPPORT_HINT", "x")];

/// One mistake in [`GOOD`]: the config with `from` replaced by `to`, read with `vars`, must be
/// refused with a message containing `message`, naming `key` and `line` where they are given.
struct Mistake {
    case: &'static str,
    from: &'static str,
    to: &'static str,
    vars: &'static [(&'static str, &'static str)],
    line: Option<usize>,
    key: Option<&'static str>,
    message: &'static str,
}

/// Each mistake is refused as its row says; a failure names the row.
fn assert_refused(mistakes: &[Mistake]) {
    for m in mistakes {
        let case = m.case;
        let e = parse_err(&GOOD.replace(m.from, m.to), m.vars);
        if let Some(line) = m.line {
            assert_eq!(e.line, Some(line), "{case}: {e}");
        }
        if let Some(key) = m.key {
            assert_eq!(e.key.as_deref(), Some(key), "{case}: {e}");
        }
        assert!(e.message.contains(m.message), "{case}: {e}");
    }
}

/// Mistakes in the chain and its providers name the line and the key.
#[test]
fn mistakes_name_the_line_and_key() {
    let mistake = |case, from, to, line, key, message| Mistake {
        case,
        from,
        to,
        vars: GOOD_VARS,
        line,
        key,
        message,
    };
    assert_refused(&[
        mistake(
            "unknown kind",
            "kind = \"openai\"",
            "kind = \"gpt\"",
            Some(9),
            Some("kind"),
            "unknown variant `gpt`",
        ),
        Mistake {
            case: "missing key env var",
            from: "",
            to: "",
            vars: &[("SUPPORT_HINT", "x")],
            line: Some(12),
            key: Some("api_key_env"),
            message: "environment variable OPENAI_API_KEY is not set",
        },
        mistake(
            "unknown provider in order",
            "order = [\"primary\", \"local\"]",
            "order = [\"primary\", \"backup\"]",
            Some(3),
            Some("chain.order"),
            "unknown provider \"backup\" (defined: local, primary)",
        ),
        mistake(
            "bad type",
            "max_attempts = 2",
            "max_attempts = \"two\"",
            Some(14),
            Some("max_attempts"),
            "invalid type",
        ),
        Mistake {
            case: "missing interpolated variable",
            from: "",
            to: "",
            vars: &[("OPENAI_API_KEY", "k")],
            line: Some(5),
            key: Some("chain.static_reply"),
            message: "SUPPORT_HINT is not set",
        },
        mistake(
            "unknown key",
            "deadline_ms = 9000",
            "deadline_ms = 9000\ndeadlne = 3",
            Some(5),
            None,
            "unknown field `deadlne`",
        ),
        mistake(
            "zero attempts",
            "max_attempts = 2",
            "max_attempts = 0",
            None,
            Some("retry.max_attempts"),
            "",
        ),
        mistake(
            "duplicate names",
            "name = \"local\"",
            "name = \"primary\"",
            None,
            None,
            "defined twice",
        ),
        mistake(
            "zero stream bound",
            "deadline_ms = 9000",
            "deadline_ms = 9000\nstream_max_ms = 0",
            None,
            Some("chain.stream_max_ms"),
            "",
        ),
    ]);
    // The whole message leads with the file, the line and the key.
    let e = parse_err(
        &GOOD.replace("kind = \"openai\"", "kind = \"gpt\""),
        GOOD_VARS,
    );
    assert!(
        e.to_string().starts_with("ripcord.toml:9: key `kind`: "),
        "{e}"
    );
}

/// The local-onnx settings are checked, and only a local-onnx provider takes them.
#[test]
fn local_onnx_settings_that_cannot_work_name_their_key() {
    let local = |case, setting, line, key, message| Mistake {
        case,
        from: "model_dir = \"/models/smol\"",
        to: setting,
        vars: GOOD_VARS,
        line,
        key: Some(key),
        message,
    };
    let remote = |case, setting, key| Mistake {
        case,
        from: "model = \"gpt-4o\"",
        to: setting,
        vars: GOOD_VARS,
        line: None,
        key: Some(key),
        message: "is a local-onnx setting",
    };
    assert_refused(&[
        local(
            "unknown variant",
            "model_dir = \"/models/smol\"\nvariant = \"int4\"",
            Some(24),
            "variant",
            "expected one of fp32, q8, q4",
        ),
        local(
            "zero threads",
            "model_dir = \"/models/smol\"\nthreads = 0",
            None,
            "threads",
            "at least 1",
        ),
        local(
            "unknown device",
            "model_dir = \"/models/smol\"\ndevice = \"tpu\"",
            None,
            "device",
            "unknown device \"tpu\"",
        ),
        local(
            "zero max_batch",
            "model_dir = \"/models/smol\"\nmax_batch = 0",
            None,
            "max_batch",
            "at least 1",
        ),
        remote(
            "threads on openai",
            "model = \"gpt-4o\"\nthreads = 2",
            "threads",
        ),
        remote(
            "device on openai",
            "model = \"gpt-4o\"\ndevice = \"cpu\"",
            "device",
        ),
    ]);
}

#[test]
fn builtin_default_skips_providers_without_keys() {
    let c = config::builtin(&env(&[])).unwrap();
    let names: Vec<_> = c.chain.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["local"]);
    assert_eq!(c.notes.len(), 2);
    assert!(
        c.notes[0].contains("OPENAI_API_KEY is not set"),
        "{:?}",
        c.notes
    );
    let c = config::builtin(&env(&[("ANTHROPIC_API_KEY", "a")])).unwrap();
    let names: Vec<_> = c.chain.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["anthropic", "local"]);
    assert!(c.routes[0].spec.static_reply.is_some());
}

const SHARED: &str = r#"
[chain]
order = ["primary"]

[[providers]]
name = "primary"
kind = "openai"
model = "gpt-4o"
api_key = "sk-x"

[state]
backend = "redis"
url = "redis://ripcord:${REDIS_PASSWORD}@10.0.0.5:6379/2"
op_timeout_ms = 80
replicas = 3
"#;

#[cfg(feature = "redis")]
#[test]
fn a_redis_state_section_resolves_and_never_shows_its_password() {
    let c = parse_ok(SHARED, &[("REDIS_PASSWORD", "hunter2-pw")]);
    let config::StateBackend::Redis(r) = &c.state else {
        panic!("expected the redis backend, got {:?}", c.state);
    };
    assert_eq!(r.redacted_url, "redis://[redacted]@10.0.0.5:6379/2");
    assert_eq!(
        secrecy::ExposeSecret::expose_secret(&r.url),
        "redis://ripcord:hunter2-pw@10.0.0.5:6379/2"
    );
    assert_eq!(
        (r.op_timeout_ms, r.connect_timeout_ms, r.retry_interval_ms),
        (80, 2000, 1000)
    );
    assert_eq!(r.replicas, 3);
    let shown = format!("{}\n{:?}", c.describe(), c);
    assert!(!shown.contains("hunter2-pw"), "{shown}");
    assert!(
        shown.contains("state: redis redis://[redacted]@10.0.0.5:6379/2"),
        "{shown}"
    );
    // The raw section's Debug redacts too.
    let raw = format!(
        "{:?}",
        config::StateConfig {
            url: Some(toml::Spanned::new(0..0, "redis://:pw-raw@h:1".to_owned())),
            ..Default::default()
        }
    );
    assert!(!raw.contains("pw-raw"), "{raw}");
}

#[test]
fn the_state_defaults_to_local() {
    let c = parse_ok(GOOD, GOOD_VARS);
    assert!(matches!(c.state, config::StateBackend::Local));
    assert!(c.describe().contains("state: local"));
    let text = SHARED.replace(
        "backend = \"redis\"\nurl = \"redis://ripcord:${REDIS_PASSWORD}@10.0.0.5:6379/2\"\n",
        "backend = \"local\"\n",
    );
    let c = parse_ok(&text, &[]);
    assert!(matches!(c.state, config::StateBackend::Local));
}

#[cfg(feature = "redis")]
#[test]
fn bad_state_settings_name_the_key() {
    let vars: &[(&str, &str)] = &[("REDIS_PASSWORD", "hunter2-pw")];
    let cases = [
        (
            "backend = \"redis\"",
            "backend = \"memcached\"",
            "state.backend",
            "expected \"local\" or \"redis\"",
        ),
        (
            "op_timeout_ms = 80",
            "op_timeout_ms = 0",
            "state.op_timeout_ms",
            "greater than zero",
        ),
        (
            "replicas = 3",
            "replicas = 0",
            "state.replicas",
            "at least 1",
        ),
        (
            "url = \"redis://ripcord:${REDIS_PASSWORD}@10.0.0.5:6379/2\"",
            "",
            "state.url",
            "needs `url",
        ),
        (
            "redis://ripcord",
            "https://ripcord",
            "state.url",
            "expected a redis://host:port URL",
        ),
        (
            "redis://ripcord",
            "rediss://ripcord",
            "state.url",
            "TLS (rediss://) is not supported",
        ),
        (
            "backend = \"redis\"",
            "backend = \"local\"",
            "state.url",
            "needs backend = \"redis\"",
        ),
    ];
    for (from, to, key, message) in cases {
        let text = SHARED.replace(from, to);
        let e = parse_err(&text, vars);
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
        assert!(e.message.contains(message), "{e}");
        assert!(e.line.is_some(), "{e}");
        assert!(!e.to_string().contains("hunter2-pw"), "{e}");
    }
    let text = SHARED.replace("replicas = 3", "replicas = 3\nreplica = 2");
    let e = parse_err(&text, vars);
    assert!(e.message.contains("unknown field `replica`"), "{e}");
    assert_eq!(e.line, Some(16));
    let e = parse_err(SHARED, &[]);
    assert_eq!(e.key.as_deref(), Some("state.url"));
    assert!(e.message.contains("REDIS_PASSWORD is not set"), "{e}");
}

#[test]
fn redact_url_hides_userinfo_only() {
    assert_eq!(
        config::redact_url("redis://:pw@127.0.0.1:6379"),
        "redis://[redacted]@127.0.0.1:6379"
    );
    assert_eq!(
        config::redact_url("redis://127.0.0.1:6379/0"),
        "redis://127.0.0.1:6379/0"
    );
    assert_eq!(
        config::redact_url("redis://u:p@ss@h:1/0?x=@"),
        "redis://[redacted]@h:1/0?x=@"
    );
}

#[cfg(not(feature = "redis"))]
#[test]
fn without_the_redis_feature_the_redis_backend_is_a_clear_error() {
    let e = parse_err(SHARED, &[("REDIS_PASSWORD", "hunter2-pw")]);
    assert_eq!(e.key.as_deref(), Some("state.backend"));
    assert!(
        e.message.contains("built without the `redis` feature"),
        "{e}"
    );
}

#[test]
fn a_budget_section_resolves_and_bad_values_name_the_key() {
    let text = format!(
        "{GOOD}\n[budget]\ntokens_per_window = 5000\ntenants = {{ acme = 90000 }}\nanonymous = true\n"
    );
    let vars = GOOD_VARS;
    let budget_err = |from: &str, to: &str| parse_err(&text.replace(from, to), vars);
    let c = parse_ok(&text, vars);
    assert_eq!(
        c.budget,
        Some(config::TenantBudget {
            tokens_per_window: 5000,
            window_s: 3600,
            period: None,
            tenants: vec![("acme".to_owned(), 90000)],
            anonymous: true,
        })
    );
    assert!(
        c.describe().contains(
            "budget: 5000 tokens per tenant per 3600 s (1 override(s), anonymous calls too)"
        ),
        "{}",
        c.describe()
    );
    let e = budget_err("tokens_per_window = 5000", "tokens_per_window = 0");
    assert_eq!(e.key.as_deref(), Some("budget.tokens_per_window"), "{e}");
    assert!(e.line.is_some(), "{e}");
    let e = budget_err("anonymous = true", "window_s = 0");
    assert_eq!(e.key.as_deref(), Some("budget.window_s"), "{e}");
    let e = budget_err("anonymous = true", "anonymus = true");
    assert!(e.message.contains("unknown field `anonymus`"), "{e}");
    // A calendar period instead of the window; not both, and only day or month.
    let monthly = text.replace("anonymous = true", "period = \"month\"");
    let c = parse_ok(&monthly, vars);
    let b = c.budget.as_ref().unwrap();
    assert_eq!(b.period, Some(ripcord_resilience::BudgetPeriod::Month));
    assert!(
        c.describe()
            .contains("5000 tokens per tenant per UTC month"),
        "{}",
        c.describe()
    );
    let e = budget_err("anonymous = true", "period = \"week\"");
    assert_eq!(e.key.as_deref(), Some("budget.period"), "{e}");
    assert!(e.message.contains("\"week\""), "{e}");
    let e = budget_err("anonymous = true", "period = \"day\"\nwindow_s = 60");
    assert_eq!(e.key.as_deref(), Some("budget.window_s"), "{e}");
}

#[test]
fn stream_bound_and_min_attempt_have_defaults_and_are_read() {
    let c = parse_ok(GOOD, GOOD_VARS);
    assert_eq!(
        (
            c.routes[0].spec.stream_max_ms,
            c.routes[0].spec.min_attempt_ms
        ),
        (600_000, 1_000)
    );
    let text = GOOD.replace(
        "deadline_ms = 9000",
        "deadline_ms = 9000\nstream_max_ms = 120000\nmin_attempt_ms = 250",
    );
    let c = parse_ok(&text, GOOD_VARS);
    assert_eq!(
        (
            c.routes[0].spec.stream_max_ms,
            c.routes[0].spec.min_attempt_ms
        ),
        (120_000, 250)
    );
}

#[test]
fn server_limits_default_and_resolve() {
    let vars = GOOD_VARS;
    let c = parse_ok(GOOD, vars);
    assert_eq!(c.server, config::ServerSettings::default());
    assert_eq!(c.server.header_timeout, std::time::Duration::from_secs(10));
    assert_eq!(c.server.shutdown_grace, std::time::Duration::from_secs(30));
    let text = format!(
        "{GOOD}\n[server]\nheader_timeout_ms = 500\nbody_timeout_ms = 700\nidle_timeout_ms = 900\nmax_connections = 8\nshutdown_grace_ms = 1500\nmax_concurrency = 2\nmax_queue = 0\nexpose_errors = true\nmetrics_listen = \"127.0.0.1:9464\"\n"
    );
    let c = parse_ok(&text, vars);
    let s = &c.server;
    assert_eq!(s.header_timeout.as_millis(), 500);
    assert_eq!(s.body_timeout.as_millis(), 700);
    assert_eq!(s.idle_timeout.as_millis(), 900);
    assert_eq!(s.shutdown_grace.as_millis(), 1500);
    assert_eq!(
        (s.max_connections, s.max_concurrency, s.max_queue),
        (8, 2, 0)
    );
    assert!(s.expose_errors);
    assert_eq!(s.metrics_listen.as_deref(), Some("127.0.0.1:9464"));
}

#[test]
fn server_limits_that_cannot_work_name_their_key() {
    for (line, key) in [
        ("max_concurrency = 0", "server.max_concurrency"),
        ("max_connections = 0", "server.max_connections"),
        ("header_timeout_ms = 0", "server.header_timeout_ms"),
        ("shutdown_grace_ms = 0", "server.shutdown_grace_ms"),
    ] {
        let text = format!("{GOOD}\n[server]\n{line}\n");
        let e = parse_err(&text, GOOD_VARS);
        assert_eq!(e.key.as_deref(), Some(key), "{e}");
        assert!(e.message.contains("at least 1"), "{e}");
    }
}

const STREAMS: &str = r#"
[chain]
order = ["primary"]
stream_holdback_ms = 250
stream_policy = "@POLICY@"

[[providers]]
name = "primary"
kind = "openai"
model = "gpt-4o"
base_url = "http://127.0.0.1:9/v1"
api_key = "sk-test-primary-key"
reserve_ms = 700
[providers.retry]
retry_on = ["rate_limited", "overloaded", "server_error"]
[providers.timeouts]
idle_ms = 9000
max_skipped_events = 5
"#;

#[test]
fn check_config_prints_every_effective_timeout_reserve_retry_and_stream_setting() {
    let c = parse_ok(&STREAMS.replace("@POLICY@", "end_with_error"), &[]);
    let d = c.describe();
    println!("{d}");
    for want in [
        "chain (deadline 45000 ms",
        "retry: 3 attempts, backoff 1000..20000 ms",
        "a 429 without retry-after waits at least 500 ms",
        "retry_on [rate_limited, overloaded, server_error]",
        "breaker: opens after 5 failures",
        "reserve: 700 ms",
        "timeouts: connect 5000 ms, first token 30000 ms (non-streamed: the whole answer) / 10000 ms (streams), stream idle 9000 ms; up to 5 unparseable stream events skipped",
        "hold-back 250 ms; after commit: end with the error",
    ] {
        assert!(d.contains(want), "missing {want:?} in:\n{d}");
    }
    assert!(!d.contains("sk-test-primary-key"));
    assert!(c.serve_refusal().is_none());
}

#[test]
fn restart_is_refused_for_serve_and_an_unknown_retry_class_is_named() {
    let c = parse_ok(&STREAMS.replace("@POLICY@", "restart"), &[]);
    let why = c.serve_refusal().expect("serve must refuse restart");
    assert!(
        why.contains("stream_policy = \"restart\"") && why.contains("stream_holdback_ms"),
        "{why}"
    );
    let e = parse_err(
        &STREAMS
            .replace("@POLICY@", "end_with_error")
            .replace("\"overloaded\"", "\"teapot\""),
        &[],
    );
    let text = e.to_string();
    assert!(
        text.contains("retry_on") && text.contains("teapot") && text.contains("silent"),
        "{text}"
    );
}

/// The breaker rules the Redis store cannot share are refused by name under
/// `[state] backend = "redis"`, not accepted and applied only in each replica's fallback view;
/// with local state they stand.
#[cfg(feature = "redis")]
#[test]
fn breaker_rules_redis_cannot_share_are_refused_by_name() {
    let vars = &[("REDIS_PASSWORD", "pw")];
    for (rule, line) in [
        (
            "breaker.failure_rate",
            "failure_rate = { threshold = 0.5, window_ms = 30000, min_calls = 20 }",
        ),
        ("breaker.success_threshold", "success_threshold = 2"),
    ] {
        let text = SHARED.replace(
            "api_key = \"sk-x\"\n",
            &format!("api_key = \"sk-x\"\n[providers.breaker]\n{line}\n"),
        );
        let e = parse_err(&text, vars).to_string();
        assert!(e.contains(rule), "{e}");
        assert!(e.contains("not shared through Redis"), "{e}");
        assert!(e.contains("\"primary\""), "{e}");
        let local = text.replace("backend = \"redis\"", "backend = \"local\"");
        let local = local.replace(
            "url = \"redis://ripcord:${REDIS_PASSWORD}@10.0.0.5:6379/2\"\n",
            "",
        );
        let local = local.replace("op_timeout_ms = 80\nreplicas = 3\n", "");
        parse_ok(&local, vars);
    }
}

/// [`GOOD`] with `settings` added to its local-onnx provider.
fn good_with_local(settings: &str) -> String {
    GOOD.replace(
        "model_dir = \"/models/smol\"",
        &format!("model_dir = \"/models/smol\"\n{settings}"),
    )
}

#[test]
fn local_onnx_settings_are_read_and_default_to_unset() {
    let vars = GOOD_VARS;
    let c = parse_ok(&good_with_local("variant = \"q4\"\nthreads = 2"), vars);
    let local = &c.chain[1];
    assert_eq!(local.variant, Some(ripcord_local_onnx::Variant::Q4));
    assert_eq!(local.threads, Some(2));
    let c = parse_ok(&good_with_local("max_batch = 8\ndevice = \"cuda\""), vars);
    assert_eq!(c.chain[1].max_batch, Some(8));
    assert_eq!(c.chain[1].device, Some(ripcord_local_onnx::Device::Cuda));
    // Unset: the library's defaults.
    let c = parse_ok(GOOD, vars);
    assert_eq!((c.chain[1].variant, c.chain[1].threads), (None, None));
    assert_eq!((c.chain[1].max_batch, c.chain[1].device), (None, None));
}
