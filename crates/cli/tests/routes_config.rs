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

#[test]
fn duplicate_route_names_are_named() {
    let e = parse_err(&with_providers(
        "[[routes]]\nname = \"smart\"\norder = [\"openai\"]\n[[routes]]\nname = \"smart\"\norder = [\"deepseek\"]\n",
    ));
    assert_eq!(e.file, "gateway.toml");
    assert_eq!(e.line, Some(22), "{e}");
    assert_eq!(e.key.as_deref(), Some("routes.name"));
    assert!(
        e.message.contains("route \"smart\" is defined twice"),
        "{e}"
    );
}

#[test]
fn an_alias_equal_to_another_routes_name_is_named() {
    let e = parse_err(&with_providers(
        "[[routes]]\nname = \"smart\"\naliases = [\"fast\"]\norder = [\"openai\"]\n[[routes]]\nname = \"fast\"\norder = [\"deepseek\"]\n",
    ));
    assert_eq!(e.line, Some(20), "{e}");
    assert_eq!(e.key.as_deref(), Some("routes.aliases"));
    assert!(
        e.message
            .contains("alias \"fast\" is the name of route \"fast\""),
        "{e}"
    );
    // Two routes claiming one alias.
    let e = parse_err(&with_providers(
        "[[routes]]\nname = \"a\"\naliases = [\"x\"]\norder = [\"openai\"]\n[[routes]]\nname = \"b\"\naliases = [\"x\"]\norder = [\"deepseek\"]\n",
    ));
    assert_eq!(e.line, Some(24), "{e}");
    assert!(e.message.contains("already an alias of route \"a\""), "{e}");
}

#[test]
fn an_unknown_provider_in_a_routes_order_is_named() {
    let e = parse_err(&with_providers(
        "[[routes]]\nname = \"smart\"\norder = [\"openai\"]\n[[routes]]\nname = \"fast\"\norder = [\"deepseek\", \"mistral\"]\n",
    ));
    assert_eq!(e.line, Some(23), "{e}");
    assert_eq!(e.key.as_deref(), Some("routes.order"));
    assert!(
        e.message.contains(
            "route \"fast\": unknown provider \"mistral\" (defined: anthropic, deepseek, openai)"
        ),
        "{e}"
    );
}

#[test]
fn unknown_route_settings_are_rejected_with_their_line() {
    let e = parse_err(&with_providers(
        "[[routes]]\nname = \"smart\"\norder = [\"openai\"]\ndeadline = 5\n",
    ));
    assert_eq!(e.line, Some(21), "{e}");
    assert_eq!(e.key.as_deref(), Some("deadline"));
    assert!(
        e.message
            .contains("unknown field `deadline` in a [[routes]] entry, expected one of `name`, `aliases`, `order`, `deadline_ms`"),
        "{e}"
    );
    let e = parse_err(&with_providers("[[routes]]\norder = [\"openai\"]\n"));
    assert!(e.message.contains("missing field `name`"), "{e}");
    let e = parse_err(&with_providers(
        "[chain]\norder = [\"openai\"]\n[[routes]]\nname = \"smart\"\norder = [\"openai\"]\n",
    ));
    assert_eq!(e.key.as_deref(), Some("routes"));
    assert!(e.message.contains("not both"), "{e}");
}

const ONE_ROUTE: &str = "[[routes]]\nname = \"smart\"\norder = [\"openai\"]\n";

#[test]
fn a_key_whose_variable_is_unset_is_named() {
    let e = config::parse(
        "gateway.toml",
        &with_providers(&format!(
            "{ONE_ROUTE}[[server.keys]]\ntenant = \"acme\"\nkey_env = \"NOPE_KEY\"\n"
        )),
        &keys_env(),
    )
    .unwrap_err();
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
    let e = config::parse(
        "gateway.toml",
        &text,
        &env(&[("ACME_GATEWAY_KEY", ACME), ("COPY_KEY", ACME)]),
    )
    .unwrap_err();
    println!("{e}");
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
    let e = config::parse(
        "gateway.toml",
        &text,
        &env(&[
            ("ACME_GATEWAY_KEY", ACME),
            (
                "LIST",
                "other-key-0123456789abcdef, acme-key-0123456789abcdef",
            ),
        ]),
    )
    .unwrap_err();
    assert!(e.message.contains("same secret"), "{e}");
}

#[test]
fn short_keys_are_refused_at_start() {
    let e = config::parse(
        "gateway.toml",
        &with_providers(&format!(
            "{ONE_ROUTE}[[server.keys]]\ntenant = \"acme\"\nkey_env = \"SHORT\"\n"
        )),
        &env(&[("SHORT", "fifteen-chars!!")]),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(23), "{e}");
    assert!(
        e.message
            .contains("the key in SHORT is 15 characters long; gateway keys need at least 16"),
        "{e}"
    );
    assert!(!e.to_string().contains("fifteen-chars"));
    let e = config::parse(
        "gateway.toml",
        &with_providers(&format!("{ONE_ROUTE}[server]\napi_keys_env = \"LIST\"\n")),
        &env(&[("LIST", "long-enough-key-0123456789,short")]),
    )
    .unwrap_err();
    assert_eq!(e.key.as_deref(), Some("server.api_keys_env"));
    assert!(
        e.message
            .contains("LIST (key 2 of the list) is 5 characters"),
        "{e}"
    );
}

#[test]
fn a_key_naming_an_unknown_route_is_named() {
    let e = parse_err(&with_providers(&format!(
        "{ONE_ROUTE}[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_GATEWAY_KEY\"\nroutes = [\"smart\", \"cheap\"]\n"
    )));
    assert_eq!(e.line, Some(24), "{e}");
    assert_eq!(e.key.as_deref(), Some("server.keys.routes"));
    assert!(
        e.message
            .contains("unknown route \"cheap\" (routes: smart)"),
        "{e}"
    );
    let e = parse_err(&with_providers(
        "[[routes]]\nname = \"smart\"\norder = [\"openai\"]\n[[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_GATEWAY_KEY\"\nrpm = 0\n",
    ));
    assert_eq!(e.key.as_deref(), Some("server.keys.rpm"));
}
