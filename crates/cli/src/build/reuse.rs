//! What a reload keeps: each provider's built link, with its breaker, limiter, health record,
//! cache and prober, reused as long as everything it was built from is unchanged.
//!
//! A provider's fingerprint is a digest of its resolved settings (their `Debug` text, which
//! redacts secrets), of its secrets themselves (so a rotated upstream key rebuilds the link),
//! of the redaction and state settings every link is built with, and of the probe bound the
//! routes give it. Two builds with the same fingerprint would build the same link, so the
//! running one is kept, state and all.

use std::sync::Arc;

use ripcord_core::ChatModel;
use ripcord_resilience::{HealthHandle, Prober};
use secrecy::ExposeSecret;

use super::admin::LinkSwitch;
use crate::config::{Config, Provider, VertexCredentials};

/// A provider's built link, as the next reload may keep it.
#[derive(Debug, Clone)]
pub struct KeptLink {
    pub(super) fingerprint: [u8; 32],
    /// The link as the routes use it (behind its switch, before any hedge around it).
    pub(super) link: Arc<dyn ChatModel>,
    pub(super) health: HealthHandle,
    pub(super) prober: Option<Arc<Prober>>,
    pub(super) switch: LinkSwitch,
    /// A pooled link's handle (its deployments' state, for the status pages).
    pub(super) pool: Option<ripcord_resilience::PoolHandle>,
}

/// The digest of everything provider `p`'s link is built from.
pub(super) fn fingerprint(config: &Config, p: &Provider, deadline_ms: u64) -> [u8; 32] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(format!("{p:?}").as_bytes());
    ctx.update(format!("|{deadline_ms}|{:?}|{:?}|", config.redaction, config.state).as_bytes());
    if let Some(k) = &p.api_key {
        ctx.update(b"key:");
        ctx.update(k.expose_secret().as_bytes());
    }
    // A pool's deployment keys (its `Debug` redacts them, so a rotation would go unseen).
    for d in p.pool.iter().flat_map(|pool| &pool.deployments) {
        if let Some(k) = &d.api_key {
            ctx.update(b"deployment-key:");
            ctx.update(d.name.as_bytes());
            ctx.update(b"=");
            ctx.update(k.expose_secret().as_bytes());
        }
    }
    if let Some(v) = &p.vertex
        && let VertexCredentials::Token(t) = &v.credentials
    {
        ctx.update(b"token:");
        ctx.update(t.expose_secret().as_bytes());
    }
    let d = ctx.finish();
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl super::Built {
    /// The providers whose links this build kept from `previous` (same settings, same state).
    pub fn reused_from(&self, previous: &super::Built) -> Vec<String> {
        self.kept
            .iter()
            .filter(|(name, k)| {
                previous
                    .kept
                    .get(*name)
                    .is_some_and(|p| p.fingerprint == k.fingerprint)
            })
            .map(|(name, _)| name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(key: &str, open_ms: u64) -> Config {
        let text = format!(
            "[chain]\norder = [\"p\"]\n[[providers]]\nname = \"p\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\napi_key = \"{key}\"\n[providers.breaker]\nopen_ms = {open_ms}\n"
        );
        let env = |_: &str| -> Option<String> { None };
        crate::config::parse("reuse.toml", &text, &env).unwrap()
    }

    fn print(c: &Config) -> [u8; 32] {
        fingerprint(c, &c.chain[0], 1000)
    }

    #[test]
    fn the_same_settings_keep_a_link_and_a_rotated_key_or_a_changed_policy_rebuilds_it() {
        let a = config("sk-one", 5000);
        assert_eq!(print(&a), print(&config("sk-one", 5000)));
        assert_ne!(print(&a), print(&config("sk-two", 5000)), "a rotated key");
        assert_ne!(
            print(&a),
            print(&config("sk-one", 6000)),
            "a changed breaker"
        );
        assert_ne!(
            print(&a),
            fingerprint(&a, &a.chain[0], 2000),
            "another probe bound"
        );
    }
}
