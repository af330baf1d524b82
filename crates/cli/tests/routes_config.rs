//! `[[routes]]` and `[[server.keys]]` in the config: what resolves, and every mistake named by
//! file, line and key.

#![allow(clippy::unwrap_used, clippy::print_stdout)] // test helpers below fail the test by panicking

use ripcord_cli::config::{self, ConfigError};
use secrecy::ExposeSecret;

const ACME: &str = "acme-key-0123456789abcdef";
const GLOBEX: &str = "globex-key-0123456789abcdef";

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

fn keys_env() -> impl Fn(&str) -> Option<String> {
    env(&[("ACME_GATEWAY_KEY", ACME), ("GLOBEX_GATEWAY_KEY", GLOBEX)])
}

fn parse_err(text: &str) -> ConfigError {
    let e = config::parse("gateway.toml", text, &keys_env()).unwrap_err();
    println!("{e}");
    e
}

/// [`parse_err`] with only `vars` in the environment.
fn parse_err_in(text: &str, vars: &[(&str, &str)]) -> ConfigError {
    let e = config::parse("gateway.toml", text, &env(vars)).unwrap_err();
    println!("{e}");
    e
}

/// Providers shared by the routes below (lines 1–17 with the key [`with_providers`] adds).
const PROVIDERS: &str = r#"[[providers]]
name = "openai"
kind = "openai"
model = "gpt-4o"
api_key = "sk-openai-upstream"

[[providers]]
name = "anthropic"
kind = "anthropic"
model = "claude-sonnet-4-5"
api_key = "sk-ant-upstream"

[[providers]]
name = "deepseek"
kind = "deepseek"
model = "deepseek-chat"
"#;

fn with_providers(rest: &str) -> String {
    format!("{PROVIDERS}api_key = \"sk-ds-upstream\"\n{rest}")
}

const ROUTES: &str = r#"
[[routes]]
name = "smart"
aliases = ["gpt-4o", "best"]
order = ["openai", "anthropic"]
deadline_ms = 30000
static_reply = "Busy."
stream_policy = "restart"

[[routes]]
name = "fast"
order = ["deepseek", "openai"]

[[server.keys]]
tenant = "acme"
key_env = "ACME_GATEWAY_KEY"
routes = ["best"]
rpm = 60

[[server.keys]]
tenant = "globex"
key_env = "GLOBEX_GATEWAY_KEY"
sub_tenants = true
tpm = 100000
"#;

#[test]
fn routes_share_providers_declared_once_and_keys_name_their_tenants() {
    let c = config::parse("gateway.toml", &with_providers(ROUTES), &keys_env()).unwrap();
    assert!(!c.any_model);
    let names: Vec<&str> = c.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["smart", "fast"]);
    assert_eq!(c.model_names(), ["smart", "gpt-4o", "best", "fast"]);
    assert_eq!(c.route_index("best"), Some(0));
    assert_eq!(c.route_index("fast"), Some(1));
    assert_eq!(c.route_index("gpt-4o-mini"), None);
    // Every [chain] knob is a route knob; the rest keep their defaults.
    let smart = &c.routes[0].spec;
    assert_eq!(smart.deadline_ms, 30000);
    assert_eq!(smart.static_reply.as_deref(), Some("Busy."));
    assert!(smart.stream_restart);
    assert_eq!(c.routes[1].spec.deadline_ms, 45000);
    assert_eq!(c.routes[1].spec.order, ["deepseek", "openai"]);
    // "openai" is used by both routes and resolved once.
    let providers: Vec<&str> = c.chain.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(providers, ["openai", "anthropic", "deepseek"]);
    // Keys: tenant, the routes they may use (aliases resolved), limits, never the secret.
    let acme = &c.gateway_keys[0];
    assert_eq!(acme.tenant.as_deref(), Some("acme"));
    assert_eq!(acme.secret.expose_secret(), ACME);
    assert_eq!(acme.routes, Some(vec![0]));
    assert_eq!((acme.rpm, acme.tpm), (Some(60), None));
    let globex = &c.gateway_keys[1];
    assert!(globex.sub_tenants && globex.routes.is_none());
    let shown = format!("{}\n{:?}", c.describe(), c);
    println!("{shown}");
    assert!(!shown.contains(ACME) && !shown.contains(GLOBEX), "{shown}");
    assert!(!shown.contains("sk-openai-upstream"), "{shown}");
    for line in [
        "route \"smart\" (aliases: gpt-4o, best) (deadline 30000 ms):",
        "route \"fast\" (deadline 45000 ms):",
        "  1. deepseek (deepseek) model=deepseek-chat",
        "shared providers (one breaker, limiter and health record each): openai (smart, fast)",
        "key=[redacted] from env ACME_GATEWAY_KEY tenant=acme routes=smart rpm=60",
        "key=[redacted] from env GLOBEX_GATEWAY_KEY tenant=globex sub_tenants tpm=100000",
    ] {
        assert!(shown.contains(line), "missing {line:?} in\n{shown}");
    }
}

#[test]
fn a_config_with_only_a_chain_is_one_route_answering_any_model() {
    let c = config::parse(
        "one.toml",
        &with_providers("[chain]\norder = [\"openai\"]\n"),
        &keys_env(),
    )
    .unwrap();
    assert!(c.any_model);
    assert_eq!(c.routes.len(), 1);
    assert_eq!(
        c.chain.len(),
        1,
        "only the providers a route uses are built"
    );
    assert!(c.describe().contains("answers any model"));
}

/// Each mistake after [`PROVIDERS`]: `(case, rest of the config, line, key, message)`; the
/// error names `line` and `key` where they are given, and its message contains `message`.
type Mistake = (
    &'static str,
    String,
    Option<usize>,
    Option<&'static str>,
    &'static str,
);

#[test]
fn route_and_key_mistakes_name_their_line_and_key() {
    let mistakes: Vec<Mistake> = vec![
        (
            "duplicate route names",
            "[[routes]]\nname = \"smart\"\norder = [\"openai\"]\n[[routes]]\nname = \"smart\"\norder = [\"deepseek\"]\n".into(),
            Some(22),
            Some("routes.name"),
            "route \"smart\" is defined twice",
        ),
        (
            "an alias equal to another route's name",
            "[[routes]]\nname = \"smart\"\naliases = [\"fast\"]\norder = [\"openai\"]\n[[routes]]\nname = \"fast\"\norder = [\"deepseek\"]\n".into(),
            Some(20),
            Some("routes.aliases"),
            "alias \"fast\" is the name of route \"fast\"",
        ),
        (
            "two routes claiming one alias",
            "[[routes]]\nname = \"a\"\naliases = [\"x\"]\norder = [\"openai\"]\n[[routes]]\nname = \"b\"\naliases = [\"x\"]\norder = [\"deepseek\"]\n".into(),
            Some(24),
            None,
            "already an alias of route \"a\"",
        ),
        (
            "an unknown provider in a route's order",
            "[[routes]]\nname = \"smart\"\norder = [\"openai\"]\n[[routes]]\nname = \"fast\"\norder = [\"deepseek\", \"mistral\"]\n".into(),
            Some(23),
            Some("routes.order"),
            "route \"fast\": unknown provider \"mistral\" (defined: anthropic, deepseek, openai)",
        ),
        (
            "an unknown route setting",
            "[[routes]]\nname = \"smart\"\norder = [\"openai\"]\ndeadline = 5\n".into(),
            Some(21),
            Some("deadline"),
            "unknown field `deadline` in a [[routes]] entry, expected one of `name`, `aliases`, `order`, `deadline_ms`",
        ),
        (
            "a route without a name",
            "[[routes]]\norder = [\"openai\"]\n".into(),
            None,
            None,
            "missing field `name`",
        ),
        (
            "a chain and routes",
            "[chain]\norder = [\"openai\"]\n[[routes]]\nname = \"smart\"\norder = [\"openai\"]\n".into(),
            None,
            Some("routes"),
            "not both",
        ),
        (
            "a key naming an unknown route",
            format!("{ONE_ROUTE}[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_GATEWAY_KEY\"\nroutes = [\"smart\", \"cheap\"]\n"),
            Some(24),
            Some("server.keys.routes"),
            "unknown route \"cheap\" (routes: smart)",
        ),
        (
            "a key with rpm = 0",
            format!("{ONE_ROUTE}[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_GATEWAY_KEY\"\nrpm = 0\n"),
            None,
            Some("server.keys.rpm"),
            "",
        ),
    ];
    for (case, rest, line, key, message) in mistakes {
        let e = parse_err(&with_providers(&rest));
        assert_eq!(e.file, "gateway.toml", "{case}: {e}");
        if let Some(line) = line {
            assert_eq!(e.line, Some(line), "{case}: {e}");
        }
        if let Some(key) = key {
            assert_eq!(e.key.as_deref(), Some(key), "{case}: {e}");
        }
        assert!(e.message.contains(message), "{case}: {e}");
    }
}

const ONE_ROUTE: &str = "[[routes]]\nname = \"smart\"\norder = [\"openai\"]\n";

#[test]
fn a_key_whose_variable_is_unset_is_named() {
    let e = parse_err(&with_providers(&format!(
        "{ONE_ROUTE}[[server.keys]]\ntenant = \"acme\"\nkey_env = \"NOPE_KEY\"\n"
    )));
    assert_eq!(e.line, Some(23), "{e}");
    assert_eq!(e.key.as_deref(), Some("server.keys.key_env"));
    assert!(
        e.message
            .contains("environment variable NOPE_KEY is not set (the key of tenant \"acme\")"),
        "{e}"
    );
}

#[test]
fn two_keys_with_the_same_secret_are_refused() {
    let text = with_providers(&format!(
        "{ONE_ROUTE}[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_GATEWAY_KEY\"\n\
         [[server.keys]]\ntenant = \"globex\"\nkey_env = \"COPY_KEY\"\n"
    ));
    let e = parse_err_in(&text, &[("ACME_GATEWAY_KEY", ACME), ("COPY_KEY", ACME)]);
    assert_eq!(e.line, Some(26), "{e}");
    assert!(
        e.message.contains(
            "the key in COPY_KEY is the same secret as the key in ACME_GATEWAY_KEY (tenant acme)"
        ),
        "{e}"
    );
    assert!(!e.to_string().contains(ACME));
    // A tenant key repeated in api_keys_env is the same mistake.
    let text = with_providers(&format!(
        "{ONE_ROUTE}[server]\napi_keys_env = \"LIST\"\n[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_GATEWAY_KEY\"\n"
    ));
    let e = parse_err_in(
        &text,
        &[
            ("ACME_GATEWAY_KEY", ACME),
            (
                "LIST",
                "other-key-0123456789abcdef, acme-key-0123456789abcdef",
            ),
        ],
    );
    assert!(e.message.contains("same secret"), "{e}");
}

#[test]
fn short_keys_are_refused_at_start() {
    let e = parse_err_in(
        &with_providers(&format!(
            "{ONE_ROUTE}[[server.keys]]\ntenant = \"acme\"\nkey_env = \"SHORT\"\n"
        )),
        &[("SHORT", "fifteen-chars!!")],
    );
    assert_eq!(e.line, Some(23), "{e}");
    assert!(
        e.message
            .contains("the key in SHORT is 15 characters long; gateway keys need at least 16"),
        "{e}"
    );
    assert!(!e.to_string().contains("fifteen-chars"));
    let e = parse_err_in(
        &with_providers(&format!("{ONE_ROUTE}[server]\napi_keys_env = \"LIST\"\n")),
        &[("LIST", "long-enough-key-0123456789,short")],
    );
    assert_eq!(e.key.as_deref(), Some("server.api_keys_env"));
    assert!(
        e.message
            .contains("LIST (key 2 of the list) is 5 characters"),
        "{e}"
    );
}
