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
    let c = config::parse(
        "ripcord.toml",
        GOOD,
        &env(&[
            ("OPENAI_API_KEY", "sk-test-SECRET-123"),
            ("SUPPORT_HINT", "call us"),
        ]),
    )
    .unwrap();
    assert_eq!(c.chain.len(), 2);
    assert_eq!(c.chain[0].retry.max_attempts, 2);
    assert_eq!(c.chain[0].breaker.open_ms, 1000);
    assert_eq!(c.static_reply.as_deref(), Some("Busy: call us"));
    assert_eq!(c.deadline_ms, 9000);
    let shown = format!("{}\n{:?}", c.describe(), c);
    assert!(!shown.contains("sk-test-SECRET-123"), "{shown}");
    assert!(shown.contains("[redacted]"));
}

#[test]
fn unknown_kind_names_the_line_and_key() {
    let text = GOOD.replace("kind = \"openai\"", "kind = \"gpt\"");
    let e = parse_err(&text, &[("OPENAI_API_KEY", "k"), ("SUPPORT_HINT", "x")]);
    assert_eq!(e.line, Some(9));
    assert_eq!(e.key.as_deref(), Some("kind"));
    assert!(e.message.contains("unknown variant `gpt`"), "{e}");
    assert!(
        e.to_string().starts_with("ripcord.toml:9: key `kind`: "),
        "{e}"
    );
}

#[test]
fn missing_key_env_var_names_the_variable() {
    let e = parse_err(GOOD, &[("SUPPORT_HINT", "x")]);
    assert_eq!(e.line, Some(12));
    assert_eq!(e.key.as_deref(), Some("api_key_env"));
    assert!(
        e.message
            .contains("environment variable OPENAI_API_KEY is not set"),
        "{e}"
    );
}

#[test]
fn unknown_provider_in_order() {
    let text = GOOD.replace(
        "order = [\"primary\", \"local\"]",
        "order = [\"primary\", \"backup\"]",
    );
    let e = parse_err(&text, &[("OPENAI_API_KEY", "k"), ("SUPPORT_HINT", "x")]);
    assert_eq!(e.line, Some(3));
    assert_eq!(e.key.as_deref(), Some("chain.order"));
    assert!(
        e.message
            .contains("unknown provider \"backup\" (defined: local, primary)"),
        "{e}"
    );
}

#[test]
fn bad_type_names_the_line_and_key() {
    let text = GOOD.replace("max_attempts = 2", "max_attempts = \"two\"");
    let e = parse_err(&text, &[("OPENAI_API_KEY", "k"), ("SUPPORT_HINT", "x")]);
    assert_eq!(e.line, Some(14));
    assert_eq!(e.key.as_deref(), Some("max_attempts"));
    assert!(e.message.contains("invalid type"), "{e}");
}

#[test]
fn missing_interpolated_variable() {
    let e = parse_err(GOOD, &[("OPENAI_API_KEY", "k")]);
    assert_eq!(e.line, Some(5));
    assert_eq!(e.key.as_deref(), Some("chain.static_reply"));
    assert!(e.message.contains("SUPPORT_HINT is not set"), "{e}");
}

#[test]
fn unknown_keys_are_rejected() {
    let text = GOOD.replace("deadline_ms = 9000", "deadline_ms = 9000\ndeadlne = 3");
    let e = parse_err(&text, &[("OPENAI_API_KEY", "k"), ("SUPPORT_HINT", "x")]);
    assert!(e.message.contains("unknown field `deadlne`"), "{e}");
    assert_eq!(e.line, Some(5));
}

#[test]
fn zero_attempts_and_duplicate_names_are_rejected() {
    let text = GOOD.replace("max_attempts = 2", "max_attempts = 0");
    let e = parse_err(&text, &[("OPENAI_API_KEY", "k"), ("SUPPORT_HINT", "x")]);
    assert_eq!(e.key.as_deref(), Some("retry.max_attempts"));
    let text = GOOD.replace("name = \"local\"", "name = \"primary\"");
    let e = parse_err(&text, &[("OPENAI_API_KEY", "k"), ("SUPPORT_HINT", "x")]);
    assert!(e.message.contains("defined twice"), "{e}");
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
    assert!(c.static_reply.is_some());
}
