//! The chain under test: a ripcord config (the built-in chaos chain, or the user's with
//! `--config`), its cloud providers pointed at fake servers on loopback, built by
//! `ripcord-cli` exactly as `ripcord chat` and `ripcord serve` build it — health → breaker →
//! retry → rate limit → adapter — with observers hooked in.

use ripcord_cli::config::Vendor;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ripcord_chaos::google_token::GoogleTokenServer;
use ripcord_chaos::{FakeOptions, FakeVendor, Reply, Wire};
use ripcord_cli::build::{BuildHooks, Built, Wrap, build_with};
use ripcord_cli::config::{
    BulkheadConfig, Config, Env, ProviderKind, RateLimitConfig, VertexCredentials,
};
use ripcord_core::ChatModel;
use secrecy::ExposeSecret;

use super::observe::{LocalSwitch, Observed, Point, Recorder};
use super::record::{DeploymentRec, LinkInfo};
use super::scenario::{
    CONTINUED_ANSWER, Fault, LONG_STREAM_CHUNKS, Phase, Scenario, hash_str, mix,
};

pub(super) mod configs;

use configs::{
    BEDROCK_CHAIN, BUILTIN, BUILTIN_LOCAL, REGIONS_CHAIN, VERTEX_CHAIN, VERTEX_LINK,
    VERTEX_PLACEHOLDER_TOKEN,
};

/// A distinctive fake key for `name`: easy to find if it ever leaks.
pub(crate) fn fake_key(name: &str, seed: u64) -> String {
    format!(
        "sk-chaos-{}-{:016x}",
        name.to_ascii_lowercase().replace('_', "-"),
        mix(seed ^ hash_str(name))
    )
}

/// The built-in chains (besides the two-route one): their configs are in [`configs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    /// The built-in chain ([`BUILTIN`]).
    Chaos,
    /// `claude-three-ways` ([`BEDROCK_CHAIN`]).
    Bedrock,
    /// `claude-via-vertex` ([`VERTEX_CHAIN`]).
    Vertex,
    /// `regions` ([`REGIONS_CHAIN`]).
    Regions,
}

/// The environment of a built-in config: the fake Vertex token and Bedrock test keys, and a
/// fake key for `RIPCORD_CHAOS_<NAME>_KEY`.
fn builtin_env(name: &str, seed: u64) -> Option<String> {
    match name {
        "RIPCORD_CHAOS_VERTEX_TOKEN" => Some(VERTEX_PLACEHOLDER_TOKEN.to_owned()),
        "RIPCORD_CHAOS_BEDROCK_ACCESS_KEY_ID" => {
            Some(ripcord_chaos::bedrock::TEST_ACCESS_KEY_ID.to_owned())
        }
        "RIPCORD_CHAOS_BEDROCK_SECRET_ACCESS_KEY" => {
            Some(ripcord_chaos::bedrock::TEST_SECRET_ACCESS_KEY.to_owned())
        }
        _ => name
            .strip_prefix("RIPCORD_CHAOS_")
            .and_then(|n| n.strip_suffix("_KEY"))
            .map(|n| fake_key(n, seed)),
    }
}

/// Parses the built-in config `text` (`file` in its errors) in [`builtin_env`].
fn parse_builtin(file: &str, text: &str, seed: u64, source: &str) -> Result<Template, String> {
    let env = |name: &str| builtin_env(name, seed);
    let config = ripcord_cli::config::parse(file, text, &env).map_err(|e| e.to_string())?;
    Template::new(config, source)
}

/// The environment of a user's config: the process environment, and a fake key for any
/// unset `*_KEY` variable (the fake servers accept any key).
struct ChaosEnv {
    seed: u64,
}

impl Env for ChaosEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .or_else(|| name.ends_with("KEY").then(|| fake_key(name, self.seed)))
    }
}

/// A resolved config to build each scenario's chain from.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub(crate) config: Config,
    /// Where it came from.
    pub(crate) source: String,
    /// `(provider, key)`: what the key scan looks for.
    pub(crate) keys: Vec<(String, String)>,
    pub(crate) links: Vec<LinkInfo>,
}

impl Template {
    /// The built-in chain, with (`with_local`) or without the local model.
    pub(crate) fn builtin(
        deadline: Duration,
        with_local: bool,
        seed: u64,
    ) -> Result<Template, String> {
        Template::builtin_chain(Builtin::Chaos, deadline, with_local, seed)
    }

    /// One of the built-in chains, with (`with_local`) or without the local model (`regions`
    /// never has it).
    pub(crate) fn builtin_chain(
        chain: Builtin,
        deadline: Duration,
        with_local: bool,
        seed: u64,
    ) -> Result<Template, String> {
        let (file, table, links, source) = match chain {
            Builtin::Chaos => (
                "<built-in chaos chain>",
                BUILTIN,
                "",
                "built-in: primary (OpenAI wire) → backup (Anthropic wire) → local Llama → static reply",
            ),
            Builtin::Bedrock => (
                "<built-in bedrock chain>",
                BEDROCK_CHAIN,
                VERTEX_LINK,
                "built-in: claude (Anthropic wire) → claude-bedrock (Bedrock wire, SigV4) → claude-vertex (Vertex AI, OAuth) → local Llama → static reply",
            ),
            Builtin::Vertex => (
                "<built-in vertex chain>",
                VERTEX_CHAIN,
                VERTEX_LINK,
                "built-in: claude (Anthropic wire) → claude-vertex (Vertex AI, service-account tokens) → local Llama → static reply",
            ),
            Builtin::Regions => (
                "<built-in regions chain>",
                REGIONS_CHAIN,
                "",
                "built-in: regions (a pool of three OpenAI-wire deployments: east, west, north) → backup (Anthropic wire) → static reply",
            ),
        };
        let with_local = with_local && chain != Builtin::Regions;
        let text = table
            .replace("@DEADLINE_MS@", &deadline.as_millis().to_string())
            .replace("@LOCAL_ORDER@", if with_local { ", \"local\"" } else { "" })
            + links
            + if with_local { BUILTIN_LOCAL } else { "" };
        parse_builtin(file, &text, seed, source)
    }

    /// The built-in providers (without the local model) behind two routes that share
    /// `primary`: "chat" falls back to `backup`, "draft" only has `primary` and the static
    /// reply. One breaker, limiter and health record serve both routes.
    pub(crate) fn builtin_two_routes(deadline: Duration, seed: u64) -> Result<Template, String> {
        let chain_table = BUILTIN
            .split("[[providers]]")
            .next()
            .unwrap_or_default()
            .to_owned();
        let routes = format!(
            "[[routes]]\nname = \"chat\"\norder = [\"primary\", \"backup\"]\ndeadline_ms = {ms}\n\
             static_reply = \"The assistant is busy right now; please try again in a few minutes.\"\n\
             stream_policy = \"restart\"\n\n\
             [[routes]]\nname = \"draft\"\norder = [\"primary\"]\ndeadline_ms = {ms}\n\
             static_reply = \"Drafting is unavailable right now.\"\n\
             stream_policy = \"restart\"\n\n",
            ms = deadline.as_millis()
        );
        let text = BUILTIN.replacen(&chain_table, &routes, 1);
        parse_builtin(
            "<built-in chaos routes>",
            &text,
            seed,
            "built-in, two routes sharing primary: chat = primary → backup → static, draft = primary → static",
        )
    }

    /// A user's config file.
    pub(crate) fn file(path: &Path, seed: u64) -> Result<Template, String> {
        let config =
            ripcord_cli::config::load(Some(path), &ChaosEnv { seed }).map_err(|e| e.to_string())?;
        Template::new(config, &path.display().to_string())
    }

    fn new(config: Config, source: &str) -> Result<Template, String> {
        for p in &config.chain {
            if p.kind == ProviderKind::LocalOnnx {
                let dir = p.model_dir.clone().unwrap_or_default();
                if !dir.join("model.onnx").is_file() {
                    return Err(format!(
                        "the local model of provider {:?} is missing ({} has no model.onnx): run `cargo xtask setup-model` first",
                        p.name,
                        dir.display()
                    ));
                }
                let ort = ripcord_local_onnx::default_ort_dylib();
                if !ort.is_file() {
                    return Err(format!(
                        "ONNX Runtime is missing ({}): run `cargo xtask setup-model` first",
                        ort.display()
                    ));
                }
            }
        }
        let mut keys: Vec<(String, String)> = config
            .chain
            .iter()
            .filter_map(|p| {
                p.api_key
                    .as_ref()
                    .map(|k| (p.name.clone(), k.expose_secret().to_owned()))
            })
            .filter(|(_, k)| !k.is_empty())
            .collect();
        // A Bedrock link signs with the fake's test secret: it must never show either.
        keys.extend(
            config
                .chain
                .iter()
                .filter(|p| p.kind == ProviderKind::Vendor(Vendor::Bedrock))
                .map(|p| {
                    (
                        p.name.clone(),
                        ripcord_chaos::bedrock::TEST_SECRET_ACCESS_KEY.to_owned(),
                    )
                }),
        );
        // A Vertex link signs with the test key: no line of its PEM body may show anywhere.
        keys.extend(config.chain.iter().filter(|p| is_vertex(p.kind)).map(|p| {
            (
                p.name.clone(),
                ripcord_chaos::google_token::TEST_PRIVATE_KEY_PEM
                    .lines()
                    .nth(2)
                    .unwrap_or_default()
                    .to_owned(),
            )
        }));
        let links = config
            .chain
            .iter()
            .map(|p| LinkInfo {
                name: p.name.clone(),
                kind: p.kind.as_str().to_owned(),
                permits: p.breaker.half_open_probes.max(1) as usize,
                open_ms: p.breaker.open_ms,
                failure_threshold: p.breaker.failure_threshold,
            })
            .collect();
        Ok(Template {
            config,
            source: source.to_owned(),
            keys,
            links,
        })
    }

    /// Provider names in chain order.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.config.chain.iter().map(|p| p.name.as_str()).collect()
    }

    /// The deployments of the chain's pooled links, as scenarios name them
    /// (`link/deployment`): each has its own fake server.
    pub(crate) fn deployment_names(&self) -> Vec<String> {
        self.config
            .chain
            .iter()
            .filter_map(|p| p.pool.as_ref().map(|pool| (p, pool)))
            .flat_map(|(p, pool)| {
                pool.deployments
                    .iter()
                    .map(move |d| deployment_key(&p.name, &d.name))
            })
            .collect()
    }

    /// Fails when the scenario scripts a vendor the chain does not have.
    pub(crate) fn check(&self, s: &Scenario) -> Result<(), String> {
        let mut names = self.names();
        let deployments = self.deployment_names();
        names.extend(deployments.iter().map(String::as_str));
        for v in s.vendors() {
            if !names.contains(&v) {
                return Err(format!(
                    "scenario {:?} ({}) scripts vendor {v:?}, which the chain ({}) does not have (providers: {})",
                    s.name,
                    s.source,
                    self.source,
                    names.join(", ")
                ));
            }
            let local = self
                .config
                .chain
                .iter()
                .any(|p| p.name == v && p.kind == ProviderKind::LocalOnnx);
            let wants_local = s
                .phases
                .iter()
                .filter(|p| p.vendor == v)
                .all(|p| p.fault.fits_local() && p.otherwise.fits_local());
            if local && !wants_local {
                return Err(format!(
                    "scenario {:?} gives the local model {v:?} an HTTP fault; it takes only \"ok\" and \"fail\"",
                    s.name
                ));
            }
            let http = s
                .phases
                .iter()
                .filter(|p| p.vendor == v)
                .all(|p| p.fault.behavior().is_some() && p.otherwise.behavior().is_some());
            if !local && !http {
                return Err(format!(
                    "scenario {:?} gives {v:?} the fault \"fail\", which only a local model takes",
                    s.name
                ));
            }
        }
        Ok(())
    }
}

/// Vertex AI's kinds: their links get tokens from the rig's fake token endpoint.
fn is_vertex(kind: ProviderKind) -> bool {
    matches!(
        kind,
        ProviderKind::Vendor(Vendor::Vertex) | ProviderKind::Vendor(Vendor::VertexAnthropic)
    )
}

/// How scenarios, fakes and records name one deployment of a pooled link.
pub(crate) fn deployment_key(link: &str, deployment: &str) -> String {
    format!("{link}/{deployment}")
}

/// The wire a provider kind speaks (`None` for the local model).
fn wire_of(kind: ProviderKind) -> Option<Wire> {
    match kind {
        ProviderKind::LocalOnnx => None,
        ProviderKind::Vendor(Vendor::Anthropic) | ProviderKind::Vendor(Vendor::VertexAnthropic) => {
            Some(Wire::Anthropic)
        }
        ProviderKind::Vendor(Vendor::Gemini) | ProviderKind::Vendor(Vendor::Vertex) => {
            Some(Wire::Gemini)
        }
        ProviderKind::Vendor(Vendor::Bedrock) => Some(Wire::Bedrock),
        _ => Some(Wire::OpenAi),
    }
}

/// The base URL a provider of `kind` takes to reach `fake`.
fn base_url(kind: ProviderKind, fake: &FakeVendor) -> String {
    match kind {
        // Anthropic appends `/v1/messages`; Azure `/openai/deployments/…`.
        // Bedrock appends `/model/{id}/converse`.
        ProviderKind::Vendor(Vendor::Anthropic)
        | ProviderKind::Vendor(Vendor::AzureOpenAi)
        | ProviderKind::Vendor(Vendor::Bedrock) => fake.base_url(),
        // Gemini appends `/models/{m}:…` to AI Studio's versioned base; Vertex appends
        // `/projects/…` to its versioned host.
        ProviderKind::Vendor(Vendor::Gemini) => format!("{}/v1beta", fake.base_url()),
        ProviderKind::Vendor(Vendor::Vertex) | ProviderKind::Vendor(Vendor::VertexAnthropic) => {
            format!("{}/v1", fake.base_url())
        }
        // OpenAI and the OpenAI-compatible presets append `/chat/completions`.
        _ => format!("{}/v1", fake.base_url()),
    }
}

/// Local models loaded once per run and shared by every scenario's chain (loading SmolLM2
/// takes seconds; its breaker and policies are still built fresh per scenario, around it).
#[derive(Debug, Default)]
pub(crate) struct LocalCache {
    models: Mutex<BTreeMap<String, Arc<dyn ChatModel>>>,
}

impl LocalCache {
    fn get(&self, name: &str) -> Option<Arc<dyn ChatModel>> {
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// The cached model for `name`, or `base` (now cached).
    fn share(&self, name: &str, base: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
        self.models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.to_owned())
            .or_insert(base)
            .clone()
    }
}

/// A scenario's chain, its fake vendors and the notes of its build.
pub(crate) struct Rig {
    pub(crate) built: Built,
    pub(crate) fakes: BTreeMap<String, FakeVendor>,
    pub(crate) notes: Vec<String>,
    /// Per cloud link: its breaker's background-probe interval (ms), when it has one.
    pub(crate) background_probe_ms: BTreeMap<String, u64>,
    /// The fake token endpoint the Vertex links get their tokens from, when there are any.
    pub(crate) tokens: Option<VertexTokens>,
    /// The whole answer every fake gives and continues, when the scenario continues streams.
    pub(crate) whole: Option<Whole>,
    /// The config the chain was built from (pointed at the fakes), and the hooks it was built
    /// with: what a mid-run reload starts from.
    pub(crate) config: Config,
    pub(crate) hooks: BuildHooks,
}

/// Google's side of a rig: the fake token endpoint, the key file that points at it, and the
/// lifetime of the tokens it mints.
pub(crate) struct VertexTokens {
    pub(crate) server: GoogleTokenServer,
    pub(crate) lifetime: Duration,
    dir: PathBuf,
}

impl Drop for VertexTokens {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl VertexTokens {
    /// Starts the endpoint and writes its service-account key file.
    async fn start(lifetime: Duration) -> Result<VertexTokens, String> {
        let server = GoogleTokenServer::start(lifetime)
            .await
            .map_err(|e| format!("cannot start the fake Google token endpoint: {e}"))?;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ripcord-chaos-google-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        std::fs::write(dir.join("service-account.json"), server.key_file_json())
            .map_err(|e| format!("cannot write the test key file: {e}"))?;
        Ok(VertexTokens {
            server,
            lifetime,
            dir,
        })
    }

    fn key_file(&self) -> PathBuf {
        self.dir.join("service-account.json")
    }
}

/// The answer the fakes give and continue from any start of it: a continued answer whose
/// every piece came from these links must be exactly `text`.
#[derive(Debug, Clone)]
pub(crate) struct Whole {
    pub(crate) text: String,
    pub(crate) links: BTreeSet<String>,
}

impl Rig {
    /// What each pooled deployment's fake saw (when each model request reached it, since
    /// `start`) and how `s` scripted it over a run of `run`.
    pub(crate) fn deployment_records(
        fakes: &BTreeMap<String, FakeVendor>,
        t: &Template,
        s: &Scenario,
        start: tokio::time::Instant,
        run: Duration,
    ) -> BTreeMap<String, DeploymentRec> {
        let start = start.into_std();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut out = BTreeMap::new();
        for p in &t.config.chain {
            let Some(pool) = &p.pool else { continue };
            for d in &pool.deployments {
                let key = deployment_key(&p.name, &d.name);
                let Some(fake) = fakes.get(&key) else {
                    continue;
                };
                let requests_ms = fake
                    .requests()
                    .iter()
                    .filter(|r| r.path_only().ends_with("/chat/completions"))
                    .map(|r| ms(r.at.saturating_duration_since(start)))
                    .collect();
                let phases = s.phases_of(&key, run);
                let mut throttled = Vec::new();
                for (i, (at, ph)) in phases.iter().enumerate() {
                    let to = phases.get(i + 1).map_or(f64::MAX, |(next, _)| ms(*next));
                    if let (
                        true,
                        Fault::RateLimited {
                            retry_after_ms: Some(wait),
                        },
                    ) = (ph.p >= 1.0, ph.fault)
                    {
                        throttled.push((ms(*at), to, wait as f64));
                    }
                }
                let failing = |ph: &Phase| ph.p >= 1.0 && ph.fault != Fault::Ok;
                let down_all_run = phases.first().is_some_and(|(at, _)| at.is_zero())
                    && phases.iter().all(|(_, ph)| failing(ph));
                let healthy_all_run = phases
                    .iter()
                    .all(|(_, ph)| ph.fault == Fault::Ok && ph.otherwise == Fault::Ok);
                out.insert(
                    key,
                    DeploymentRec {
                        link: p.name.clone(),
                        requests_ms,
                        throttled,
                        down_all_run,
                        healthy_all_run,
                    },
                );
            }
        }
        out
    }
}

/// A folder that does not exist: given to a local provider whose model is already loaded, so
/// the build skips the load (the hook swaps the cached model in).
fn not_a_folder(dir: &Path) -> PathBuf {
    dir.join("chaos-reuses-the-model-already-loaded")
}

/// Starts the fake vendors and builds the chain for one scenario.
///
/// `perturb` wraps adapters outside the wire observer (tests use it to break an invariant on
/// purpose).
pub(crate) async fn rig(
    t: &Template,
    s: &Scenario,
    rec: &Arc<Recorder>,
    cache: &Arc<LocalCache>,
    run: Duration,
    seed: u64,
    perturb: Option<Wrap>,
) -> Result<Rig, String> {
    let mut config = t.config.clone();
    let mut fakes = BTreeMap::new();
    // Every Vertex link exchanges the test key at the fake token endpoint — a user's key file
    // included, whose token_uri would otherwise leave loopback.
    let tokens = if config.chain.iter().any(|p| is_vertex(p.kind)) {
        let lifetime = s
            .load
            .token_lifetime_ms
            .map_or(Duration::from_secs(3600), Duration::from_millis);
        Some(VertexTokens::start(lifetime).await?)
    } else {
        None
    };
    let mut reused = Vec::new();
    let mut options = FakeOptions::fast();
    if s.load.stream_continue {
        // One token per chunk, and each fake continues the answer from the start a
        // continuation request carries: the joined answer can be checked against the whole.
        options.reply = Reply::words(CONTINUED_ANSWER).continuing();
    } else if s.long_streams() {
        options.reply = Reply {
            chunks: LONG_STREAM_CHUNKS,
            ..Reply::text(
                "Once upon a time, a very long answer streamed past its deadline, chunk after chunk, and was never cut.",
            )
        };
    }
    if s.load.stream_continue {
        for r in &mut config.routes {
            r.spec.stream_restart = false;
            r.spec.stream_continue = true;
            r.spec.stream_holdback_ms = 0;
        }
    }
    for p in &mut config.chain {
        if s.load.unknown_models && p.kind != ProviderKind::LocalOnnx {
            p.model = Some(format!("{}-finetune-unlisted", p.name));
        }
        if let Some((_, sp)) = s.load.spells.iter().find(|(n, _)| *n == p.name) {
            p.breaker.open_ms = sp.open_ms;
            p.breaker.open_max_ms = sp.open_max_ms;
            p.breaker.background_probe_ms = sp.background_probe_ms;
        }
        if let Some((_, l)) = s.load.limits.iter().find(|(n, _)| *n == p.name) {
            p.bulkhead = Some(BulkheadConfig {
                max_in_flight: l.slots,
                max_queue: None,
                max_queue_wait_ms: Some(l.queue_wait_ms),
            });
            p.rate_limit = Some(RateLimitConfig {
                rpm: Some(l.rpm),
                tpm: None,
                pause_429_ms: None,
            });
        }
        if let (Some(wire), Some(pool)) = (wire_of(p.kind), p.pool.as_mut()) {
            // A pool: one fake per deployment, recording, so the checks can see when each
            // deployment was called.
            let recording = FakeOptions {
                record: true,
                ..options.clone()
            };
            for d in &mut pool.deployments {
                let fake = FakeVendor::start_with(wire, recording.clone())
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot start the fake vendor of deployment {:?} of {:?}: {e}",
                            d.name, p.name
                        )
                    })?;
                d.base_url = Some(base_url(p.kind, &fake));
                fakes.insert(deployment_key(&p.name, &d.name), fake);
            }
            continue;
        }
        match wire_of(p.kind) {
            Some(wire) => {
                let mut options = options.clone();
                // A vendor whose key a reload rotates records its requests: the reload checks
                // read which key each one carried.
                options.record = s
                    .load
                    .reload
                    .as_ref()
                    .is_some_and(|r| r.rotate.contains(&p.name));
                let fake = FakeVendor::start_with(wire, options)
                    .await
                    .map_err(|e| format!("cannot start the fake vendor {:?}: {e}", p.name))?;
                p.base_url = Some(base_url(p.kind, &fake));
                if let (Some(t), Some(v)) = (&tokens, p.vertex.as_mut()) {
                    v.credentials = VertexCredentials::KeyFile(t.key_file());
                    fake.require_tokens(t.server.registry());
                }
                fakes.insert(p.name.clone(), fake);
            }
            None => {
                if cache.get(&p.name).is_some() {
                    let dir = p.model_dir.clone().unwrap_or_default();
                    p.model_dir = Some(not_a_folder(&dir));
                    reused.push(p.name.clone());
                }
            }
        }
    }
    let local_phases: BTreeMap<String, _> = config
        .chain
        .iter()
        .filter(|p| p.kind == ProviderKind::LocalOnnx)
        .map(|p| {
            let phases = s
                .phases_of(&p.name, run)
                .into_iter()
                .map(|(at, ph)| (at, ph.fault, ph.p, ph.otherwise))
                .collect::<Vec<_>>();
            (p.name.clone(), phases)
        })
        .collect();
    // Local links have no liveness check: their breakers recover by their spells alone.
    let background_probe_ms = config
        .chain
        .iter()
        .filter(|p| p.kind != ProviderKind::LocalOnnx)
        .filter_map(|p| p.breaker.background_probe_ms.map(|ms| (p.name.clone(), ms)))
        .collect();
    let wire_rec = Arc::clone(rec);
    let cache_for_hook = Arc::clone(cache);
    let scenario_seed = mix(seed ^ hash_str(&s.name));
    let around_adapter: Wrap = Arc::new(move |name: &str, base: Arc<dyn ChatModel>| {
        let model = match local_phases.get(name) {
            Some(phases) => LocalSwitch::wrap(
                cache_for_hook.share(name, base),
                &wire_rec,
                phases.clone(),
                mix(scenario_seed ^ hash_str(name)),
            ),
            None => base,
        };
        let observed = Observed::wrap(model, &wire_rec, Point::Wire);
        match &perturb {
            Some(p) => p(name, observed),
            None => observed,
        }
    });
    let admit_rec = Arc::clone(rec);
    let inside_breaker: Wrap = Arc::new(move |_name: &str, model: Arc<dyn ChatModel>| {
        Observed::wrap(model, &admit_rec, Point::Admitted)
    });
    let hooks = BuildHooks {
        breaker_listener: Some(Arc::clone(rec) as Arc<dyn ripcord_resilience::BreakerListener>),
        around_adapter: Some(around_adapter),
        inside_breaker: Some(inside_breaker),
    };
    // Building may load the local model: seconds of blocking work, off the runtime's thread.
    let (config_kept, hooks_kept) = (config.clone(), hooks.clone());
    let built = tokio::task::spawn_blocking(move || build_with(&config, &hooks))
        .await
        .map_err(|e| format!("the chain build failed: {e}"))?
        .map_err(|e| format!("the chain cannot be built: {e}"))?;
    let notes = built
        .notes
        .iter()
        .filter(|n| {
            !reused
                .iter()
                .any(|r| n.contains(&format!("provider {r:?}")))
        })
        .cloned()
        .collect();
    let whole = s.load.stream_continue.then(|| Whole {
        text: CONTINUED_ANSWER.to_owned(),
        links: fakes.keys().cloned().collect(),
    });
    Ok(Rig {
        built,
        fakes,
        notes,
        background_probe_ms,
        tokens,
        whole,
        config: config_kept,
        hooks: hooks_kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::scenario::builtins;

    #[test]
    fn builtin_chain_parses_with_fake_keys_and_checks_scenarios() {
        let t = Template::builtin(Duration::from_millis(2500), false, 7).unwrap();
        assert_eq!(t.names(), ["primary", "backup"]);
        assert_eq!(t.config.routes[0].spec.deadline_ms, 2500);
        assert!(t.config.routes[0].spec.stream_restart);
        assert_eq!(t.keys.len(), 2);
        assert_eq!(t.keys[0].1, fake_key("PRIMARY", 7));
        assert!(t.keys[0].1.starts_with("sk-chaos-primary-"));
        assert_ne!(t.keys[0].1, t.keys[1].1);
        assert!(!t.config.describe().contains(&t.keys[0].1));
        assert_eq!(t.links[0].permits, 1);
        assert_eq!(t.links[0].open_ms, 1000);
        let all = builtins();
        let down = all.iter().find(|s| s.name == "all-cloud-down").unwrap();
        let e = t.check(down).unwrap_err();
        assert!(e.contains("scripts vendor \"local\""), "{e}");
        let outage = all.iter().find(|s| s.name == "primary-outage").unwrap();
        assert!(t.check(outage).is_ok());
    }

    #[test]
    fn regions_chain_names_its_deployments_and_only_it_fits_regions() {
        let t = Template::builtin_chain(Builtin::Regions, Duration::from_millis(2500), false, 7)
            .unwrap();
        assert_eq!(t.names(), ["regions", "backup"]);
        assert_eq!(
            t.deployment_names(),
            ["regions/east", "regions/west", "regions/north"]
        );
        let all = builtins();
        let regions = all.iter().find(|s| s.name == "regions").unwrap();
        assert!(t.check(regions).is_ok());
        assert!(regions.load.healthy_baseline);
        let plain = Template::builtin(Duration::from_millis(2500), false, 7).unwrap();
        assert!(plain.deployment_names().is_empty());
        let e = plain.check(regions).unwrap_err();
        assert!(e.contains("scripts vendor \"regions/"), "{e}");
    }
}
