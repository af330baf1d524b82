//! The chains the chaos run builds when no `--config` is given, as ripcord configs: the
//! built-in one (with or without the local model), the Bedrock and Vertex ones, and `regions`.

/// The `[chain]` table every built-in chain shares: short limits, so a few seconds of chaos
/// show the whole story. `@DEADLINE_MS@` is filled in by the template.
macro_rules! chain_table {
    ($order:literal) => {
        concat!(
            "\n[chain]\norder = ",
            $order,
            "\ndeadline_ms = @DEADLINE_MS@\nstream_max_ms = 8000\nmin_attempt_ms = 300\n\
             stream_holdback_ms = 100\n\
             static_reply = \"The assistant is busy right now; please try again in a few minutes.\"\n\
             stream_policy = \"restart\"\n"
        )
    };
}

/// The breaker and timeout tables every cloud link of the built-in chains shares.
macro_rules! breaker_and_timeouts {
    () => {
        r#"[providers.breaker]
failure_threshold = 3
open_ms = 1000
half_open_probes = 1
[providers.timeouts]
connect_ms = 500
first_token_ms = 1000
idle_ms = 500
"#
    };
}

/// The retry, breaker and timeout tables every cloud link of the built-in chains shares (the
/// pooled `regions` link has no retry table: the pool retries on another deployment).
macro_rules! link_policies {
    () => {
        concat!(
            r#"[providers.retry]
max_attempts = 3
base_delay_ms = 50
max_delay_ms = 400
"#,
            $crate::chaos::chain::configs::breaker_and_timeouts!()
        )
    };
}

pub(in crate::chaos) use {breaker_and_timeouts, link_policies};

/// A cloud link on Anthropic's wire, named `$name`, its key in `$key`.
macro_rules! anthropic_link {
    ($name:literal, $key:literal) => {
        concat!(
            "\n[[providers]]\nname = \"",
            $name,
            "\"\nkind = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\n\
             base_url = \"http://127.0.0.1:9\"\napi_key = \"${",
            $key,
            "}\"\n",
            link_policies!()
        )
    };
}

/// The built-in chain: an OpenAI-wire fake, an Anthropic-wire fake, the real local Llama and a
/// static reply. Short limits, so a few seconds of chaos show the whole story.
pub(super) const BUILTIN: &str = concat!(
    chain_table!(r#"["primary", "backup"@LOCAL_ORDER@]"#),
    r#"
[[providers]]
name = "primary"
kind = "openai"
model = "gpt-4o"
base_url = "http://127.0.0.1:9/v1"
api_key = "${RIPCORD_CHAOS_PRIMARY_KEY}"
"#,
    link_policies!(),
    anthropic_link!("backup", "RIPCORD_CHAOS_BACKUP_KEY"),
);

pub(super) const BUILTIN_LOCAL: &str = r#"
[[providers]]
name = "local"
kind = "local-onnx"
[providers.breaker]
failure_threshold = 2
open_ms = 1000
half_open_probes = 1
"#;

/// The `claude-three-ways` chain: Claude from Anthropic's API, Claude on Bedrock (the fake
/// Bedrock checks every SigV4 signature against its test keys), Claude on Vertex AI (see
/// [`VERTEX_LINK`]), the real local Llama and a static reply. The same short limits as the
/// built-in chain.
pub(super) const BEDROCK_CHAIN: &str = concat!(
    chain_table!(r#"["claude", "claude-bedrock", "claude-vertex"@LOCAL_ORDER@]"#),
    anthropic_link!("claude", "RIPCORD_CHAOS_CLAUDE_KEY"),
    r#"
[[providers]]
name = "claude-bedrock"
kind = "bedrock"
model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
region = "us-east-1"
base_url = "http://127.0.0.1:9"
access_key_id_env = "RIPCORD_CHAOS_BEDROCK_ACCESS_KEY_ID"
secret_access_key_env = "RIPCORD_CHAOS_BEDROCK_SECRET_ACCESS_KEY"
"#,
    link_policies!(),
);

/// Claude on Vertex AI: a service-account key (the rig writes one for the fake token endpoint
/// and swaps it in for the placeholder token) exchanged for access tokens the fake Vertex
/// checks on every request.
pub(super) const VERTEX_LINK: &str = concat!(
    r#"
[[providers]]
name = "claude-vertex"
kind = "vertex-anthropic"
model = "claude-sonnet-4-5@20250929"
project = "ripcord-fake"
location = "us-east5"
base_url = "http://127.0.0.1:9/v1"
token_env = "RIPCORD_CHAOS_VERTEX_TOKEN"
"#,
    link_policies!(),
);

/// The `claude-via-vertex` chain: Claude from Anthropic's API, then Claude on Vertex AI
/// ([`VERTEX_LINK`]), the real local Llama and a static reply.
pub(super) const VERTEX_CHAIN: &str = concat!(
    chain_table!(r#"["claude", "claude-vertex"@LOCAL_ORDER@]"#),
    anthropic_link!("claude", "RIPCORD_CHAOS_CLAUDE_KEY"),
);

/// What the config's Vertex token variable holds until the rig swaps in a key file.
pub(super) const VERTEX_PLACEHOLDER_TOKEN: &str = "ya29.chaos-placeholder-never-sent";

/// The `regions` chain: one link, `regions`, that pools three deployments of one model (each
/// its own fake OpenAI-wire server), then the Anthropic-wire backup and a static reply. The
/// same short limits as the built-in chain.
pub(super) const REGIONS_CHAIN: &str = concat!(
    chain_table!(r#"["regions", "backup"]"#),
    r#"
[[providers]]
name = "regions"
kind = "openai"
model = "gpt-4o"
base_url = "http://127.0.0.1:9/v1"
api_key = "${RIPCORD_CHAOS_REGIONS_KEY}"
deployments = [
  { name = "east", region = "us-east", base_url = "http://127.0.0.1:9/v1" },
  { name = "west", region = "us-west", base_url = "http://127.0.0.1:9/v1" },
  { name = "north", region = "eu-north", base_url = "http://127.0.0.1:9/v1" },
]
"#,
    breaker_and_timeouts!(),
    anthropic_link!("backup", "RIPCORD_CHAOS_BACKUP_KEY"),
);
