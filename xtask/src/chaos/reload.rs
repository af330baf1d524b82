//! A live reload mid-run (the `reload-during-outage` scenario): the config is changed, rebuilt
//! with `ripcord-cli`'s reload build and swapped in while the users keep sending, and three
//! checks judge it:
//!
//! | id | invariant | read from |
//! | --- | --- | --- |
//! | `reload-no-failures` | the reload was accepted, and no request in flight at it or sent after it failed, was lost or fell to the static reply | the reload, request outcomes |
//! | `reload-keeps-state` | every provider the reload left unchanged kept its link and its breaker state (an open breaker is still open after the swap); every rotated one was rebuilt | the builds' kept links, breaker snapshots |
//! | `reload-new-order` | every request sent after the swap started on the new order's first link, and the vendor whose key was rotated saw only the new key once the old chain's calls were over | attempts, skips, the fake vendors' requests |

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use ripcord_chaos::FakeVendor;
use ripcord_cli::build::{BuildHooks, Built, rebuild_with};
use ripcord_cli::config::Config;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ModelId, Result,
};
use secrecy::{ExposeSecret, SecretString};
use tokio::time::Instant;

use super::invariants::Check;
use super::observe::Recorder;
use super::record::{Outcome, Records, ReloadRec};
use super::scenario::Reload;

/// The chain the users call: whatever model was swapped in last. A call takes the current
/// model when it starts and finishes on it, as a gateway request finishes on the config it
/// started with.
#[derive(Debug)]
pub(crate) struct Swap {
    id: ModelId,
    caps: Capabilities,
    current: RwLock<Arc<dyn ChatModel>>,
}

impl Swap {
    pub(crate) fn new(model: Arc<dyn ChatModel>) -> Swap {
        Swap {
            id: model.id().clone(),
            caps: model.capabilities().clone(),
            current: RwLock::new(model),
        }
    }

    fn load(&self) -> Arc<dyn ChatModel> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn store(&self, model: Arc<dyn ChatModel>) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = model;
    }
}

#[async_trait]
impl ChatModel for Swap {
    model_identity!(own);
    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        self.load().chat(req, ctx).await
    }
    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        self.load().stream(req, ctx).await
    }
    fn bounds_itself(&self) -> bool {
        self.load().bounds_itself()
    }
    fn refusal(&self, ctx: &Context) -> Option<Error> {
        self.load().refusal(ctx)
    }
}

/// The rotated form of a key. It contains the old key, so the key scan (which looks for the
/// old one) would still catch the new one in any log line.
fn rotated(key: &str) -> String {
    format!("{key}-rotated")
}

/// The config the reload installs: `plan.order` first, then the rest, in every route and in
/// the provider list; the keys of `plan.rotate` rotated.
fn changed(config: &Config, plan: &Reload) -> Config {
    let mut next = config.clone();
    let rank = |name: &str| {
        plan.order
            .iter()
            .position(|n| n == name)
            .unwrap_or(plan.order.len())
    };
    for r in &mut next.routes {
        r.spec.order.sort_by_key(|n| rank(n));
    }
    next.chain.sort_by_key(|p| rank(&p.name));
    for p in &mut next.chain {
        if plan.rotate.contains(&p.name)
            && let Some(k) = &p.api_key
        {
            p.api_key = Some(SecretString::from(rotated(k.expose_secret())));
        }
    }
    next
}

/// Each named provider's breaker state in `built`, as text.
fn breaker_states(built: &Built, names: &[String]) -> Vec<Option<String>> {
    names
        .iter()
        .map(|name| {
            built
                .health
                .iter()
                .map(ripcord_resilience::HealthHandle::snapshot)
                .find(|s| &*s.link == name.as_str())
                .and_then(|s| s.breaker.map(|b| format!("{:?}", b.state).to_lowercase()))
        })
        .collect()
}

/// Makes the scenario's reload at its time, unless it has none: waits, rebuilds the changed
/// config off the runtime's thread, swaps the new chain in. Returns the builds to drop after
/// the run (the old one first) and what the reload did.
#[expect(
    clippy::too_many_arguments,
    reason = "the run's settings, passed through once"
)]
pub(crate) async fn reload_at(
    plan: Option<&Reload>,
    built: Built,
    config: &Config,
    hooks: &BuildHooks,
    swap: &Swap,
    rec: &Recorder,
    start: Instant,
    run: Duration,
) -> (Vec<Built>, Option<ReloadRec>) {
    let Some(plan) = plan else {
        return (vec![built], None);
    };
    tokio::time::sleep_until(start + run.mul_f64(plan.at)).await;
    let at_ms = rec.elapsed().as_secs_f64() * 1000.0;
    let next = changed(config, plan);
    let mut out = ReloadRec {
        at_ms,
        old_order: config.chain.iter().map(|p| p.name.clone()).collect(),
        new_order: next.chain.iter().map(|p| p.name.clone()).collect(),
        rotated: plan.rotate.clone(),
        keeps: plan.keeps.clone(),
        ..ReloadRec::default()
    };
    let names: Vec<String> = config.chain.iter().map(|p| p.name.clone()).collect();
    let hooks = hooks.clone();
    let rebuilt = tokio::task::spawn_blocking(move || {
        let before = breaker_states(&built, &names);
        let new = rebuild_with(&next, &hooks, &built);
        (built, before, names, new)
    })
    .await;
    let (old, before, names, new) = match rebuilt {
        Ok(v) => v,
        Err(e) => {
            out.error = Some(format!("the rebuild did not finish: {e}"));
            out.done_ms = rec.elapsed().as_secs_f64() * 1000.0;
            return (Vec::new(), Some(out));
        }
    };
    match new {
        Err(e) => {
            out.error = Some(format!("the new config was refused: {e}"));
            out.done_ms = rec.elapsed().as_secs_f64() * 1000.0;
            (vec![old], Some(out))
        }
        Ok(new) => {
            swap.store(Arc::clone(&new.model));
            out.done_ms = rec.elapsed().as_secs_f64() * 1000.0;
            out.reused = new.reused_from(&old);
            let after = breaker_states(&new, &names);
            out.breakers = names
                .into_iter()
                .zip(before.into_iter().zip(after))
                .map(|(n, (b, a))| (n, b, a))
                .collect();
            (vec![old, new], Some(out))
        }
    }
}

/// After the run: which requests each rotated vendor's fake received carried the new key.
pub(crate) fn record_keys(
    reload: &mut ReloadRec,
    config: &Config,
    fakes: &std::collections::BTreeMap<String, FakeVendor>,
    start: Instant,
) {
    for name in &reload.rotated {
        let (Some(fake), Some(key)) = (
            fakes.get(name),
            config
                .chain
                .iter()
                .find(|p| &p.name == name)
                .and_then(|p| p.api_key.as_ref()),
        ) else {
            continue;
        };
        let new_key = rotated(key.expose_secret());
        let seen = fake
            .requests()
            .iter()
            .map(|q| {
                let ms =
                    q.at.saturating_duration_since(start.into_std())
                        .as_secs_f64()
                        * 1000.0;
                (ms, q.headers.iter().any(|(_, v)| v.contains(&new_key)))
            })
            .collect();
        reload.keyed.insert(name.clone(), seen);
    }
}

/// The three reload checks; none when the scenario made no reload.
pub(crate) fn check_reload(r: &Records) -> Vec<Check> {
    let Some(rl) = &r.reload else {
        return Vec::new();
    };
    let deadline_ms = r.requests.iter().map(|q| q.deadline_ms).fold(0.0, f64::max);
    vec![
        no_failures(r, rl),
        keeps_state(rl),
        new_order(r, rl, deadline_ms),
    ]
}

fn no_failures(r: &Records, rl: &ReloadRec) -> Check {
    let mut offenders = Vec::new();
    if let Some(e) = &rl.error {
        offenders.push(format!("reload: {e}"));
    }
    let around: Vec<_> = r
        .requests
        .iter()
        .filter(|q| q.end_ms.is_none_or(|end| end >= rl.at_ms))
        .collect();
    for q in &around {
        let why = match &q.outcome {
            Outcome::Answered {
                static_reply: false,
                ..
            } => continue,
            Outcome::Answered { .. } => "fell to the static reply".to_owned(),
            Outcome::Failed { kind } => format!("failed ({kind:?})"),
            Outcome::Lost { why } => format!("was lost: {why}"),
            Outcome::Unfinished => "was still running when the run gave up waiting".to_owned(),
        };
        offenders.push(format!("{}: {why}", q.id));
    }
    Check::new(
        "reload-no-failures",
        "no request fails because of the reload",
        format!(
            "reload at {:.0} ms, swapped in at {:.0} ms; {} requests in flight then or sent after",
            rl.at_ms,
            rl.done_ms,
            around.len()
        ),
        offenders,
    )
}

fn keeps_state(rl: &ReloadRec) -> Check {
    let mut offenders = Vec::new();
    let mut seen = Vec::new();
    for name in &rl.keeps {
        if !rl.reused.contains(name) {
            offenders.push(format!("{name}: unchanged, but its link was built afresh"));
        }
        match rl.breakers.iter().find(|(n, _, _)| n == name) {
            Some((_, Some(before), Some(after))) => {
                seen.push(format!("{name}: {before} → {after}"));
                if before == "closed" {
                    offenders.push(format!(
                        "{name}: its breaker was closed at the swap; the scenario means it open"
                    ));
                }
                if before != after {
                    offenders.push(format!(
                        "{name}: its breaker was {before} before the swap and {after} after"
                    ));
                }
            }
            _ => offenders.push(format!(
                "{name}: no breaker state on both sides of the swap"
            )),
        }
    }
    for name in &rl.rotated {
        if rl.reused.contains(name) {
            offenders.push(format!(
                "{name}: its key was rotated, but the old link was kept"
            ));
        }
    }
    Check::new(
        "reload-keeps-state",
        "unchanged providers keep their link and breaker state; rotated ones are rebuilt",
        format!(
            "kept links: {}; breakers: {}",
            rl.reused.join(", "),
            seen.join("; ")
        ),
        offenders,
    )
}

fn new_order(r: &Records, rl: &ReloadRec, deadline_ms: f64) -> Check {
    let mut offenders = Vec::new();
    let first = rl.new_order.first().map_or("", String::as_str);
    let after: Vec<_> = r
        .requests
        .iter()
        .filter(|q| rl.error.is_none() && q.start_ms >= rl.done_ms)
        .collect();
    if rl.error.is_none() && after.is_empty() {
        offenders.push("no request was sent after the swap".to_owned());
    }
    for q in &after {
        let skipped = r.skips.get(&q.id).map(Vec::as_slice).unwrap_or(&[]);
        let started = q.attempts.first().map(|a| a.provider.as_str());
        let ok = started == Some(first) || skipped.iter().any(|s| s.provider == first);
        if !ok {
            offenders.push(format!(
                "{}: sent after the swap, started on {} instead of {first}",
                q.id,
                started.unwrap_or("no link")
            ));
        }
    }
    // Calls of the old chain may still reach a vendor until their deadline is over; after
    // that, only the new key.
    let settled = rl.done_ms + deadline_ms;
    let mut keyed = Vec::new();
    for name in &rl.rotated {
        let seen = rl.keyed.get(name).map(Vec::as_slice).unwrap_or(&[]);
        let new = seen.iter().filter(|(_, k)| *k).count();
        keyed.push(format!("{name}: {new} of {} with the new key", seen.len()));
        if new == 0 {
            offenders.push(format!("{name}: never received the rotated key"));
        }
        if let Some((ms, _)) = seen.iter().find(|(ms, k)| *k && *ms < rl.at_ms) {
            offenders.push(format!(
                "{name}: received the rotated key at {ms:.0} ms, before the reload"
            ));
        }
        if let Some((ms, _)) = seen.iter().find(|(ms, k)| !*k && *ms > settled) {
            offenders.push(format!(
                "{name}: received the old key at {ms:.0} ms, after the old chain's last deadline"
            ));
        }
    }
    Check::new(
        "reload-new-order",
        "the new order and the rotated key are in effect after the swap",
        format!(
            "new order {}; {} requests sent after the swap; {}",
            rl.new_order.join(" → "),
            after.len(),
            keyed.join("; ")
        ),
        offenders,
    )
}

#[cfg(test)]
mod tests {
    use super::super::record::{AttemptRec, RequestRec};
    use super::*;

    fn req(id: &str, start_ms: f64, tried: &[&str], outcome: Outcome) -> RequestRec {
        let attempts = AttemptRec::answered(tried, 1.0);
        RequestRec::sample(id, start_ms, Some(start_ms + 50.0), outcome, attempts)
    }

    fn by(who: &str) -> Outcome {
        Outcome::Answered {
            served_by: who.to_owned(),
            static_reply: false,
        }
    }

    /// A reload at 1000 ms that put backup first, rotated its key and kept primary open.
    /// [`records`] with `q` added.
    fn with_request(q: RequestRec) -> Records {
        let mut r = records();
        r.requests.push(q);
        r
    }

    /// The check `id` on `r`, which must have failed.
    fn failing(r: &Records, id: &str) -> Check {
        let c = check(&check_reload(r), id).clone();
        assert!(!c.passed, "{c:?}");
        c
    }

    fn records() -> Records {
        Records {
            requests: vec![
                req("before", 100.0, &["backup"], by("backup")),
                req("after", 1500.0, &["backup"], by("backup")),
            ],
            reload: Some(ReloadRec {
                at_ms: 1000.0,
                done_ms: 1010.0,
                old_order: vec!["primary".into(), "backup".into()],
                new_order: vec!["backup".into(), "primary".into()],
                rotated: vec!["backup".into()],
                keeps: vec!["primary".into()],
                reused: vec!["primary".into()],
                breakers: vec![
                    ("primary".into(), Some("open".into()), Some("open".into())),
                    (
                        "backup".into(),
                        Some("closed".into()),
                        Some("closed".into()),
                    ),
                ],
                keyed: [(
                    "backup".to_owned(),
                    vec![(100.0, false), (1500.0, true), (2500.0, true)],
                )]
                .into(),
                error: None,
            }),
            ..Records::default()
        }
    }

    fn check<'a>(checks: &'a [Check], id: &str) -> &'a Check {
        checks.iter().find(|c| c.id == id).unwrap()
    }

    #[test]
    fn a_sound_reload_passes_and_no_reload_adds_no_checks() {
        let checks = check_reload(&records());
        assert_eq!(checks.len(), 3);
        for c in &checks {
            assert!(c.passed, "{c:?}");
        }
        assert!(check_reload(&Records::default()).is_empty());
        // The window check judges each request by the order it started on.
        let r = records();
        assert_eq!(r.order_at(100.0), Vec::<&str>::new());
        assert_eq!(r.order_at(1500.0), ["backup", "primary"]);
    }

    #[test]
    fn a_failed_request_or_a_refused_reload_fails_no_failures() {
        let r = with_request(req(
            "lost",
            1200.0,
            &["backup"],
            Outcome::Failed {
                kind: ripcord_core::ErrorKind::Timeout,
            },
        ));
        let c = failing(&r, "reload-no-failures");
        assert!(c.offenders[0].starts_with("lost: failed"), "{c:?}");
        let mut r = records();
        if let Some(rl) = &mut r.reload {
            rl.error = Some("the new config was refused: bad".into());
        }
        assert!(!check(&check_reload(&r), "reload-no-failures").passed);
    }

    #[test]
    fn a_fresh_breaker_or_a_kept_rotated_link_fails_keeps_state() {
        let mut r = records();
        if let Some(rl) = &mut r.reload {
            rl.breakers[0].2 = Some("closed".into());
        }
        let c = failing(&r, "reload-keeps-state");
        assert!(
            c.offenders[0].contains("open before the swap and closed after"),
            "{c:?}"
        );
        let mut r = records();
        if let Some(rl) = &mut r.reload {
            rl.reused.push("backup".into());
            rl.reused.retain(|n| n != "primary");
        }
        let c = check(&check_reload(&r), "reload-keeps-state").clone();
        assert_eq!(c.offender_count, 2, "{c:?}");
    }

    #[test]
    fn the_old_order_or_the_old_key_after_the_swap_fails_new_order() {
        let r = with_request(req(
            "old-order",
            1600.0,
            &["primary", "backup"],
            by("backup"),
        ));
        let c = failing(&r, "reload-new-order");
        assert!(c.offenders[0].contains("started on primary"), "{c:?}");
        let mut r = records();
        if let Some(rl) = &mut r.reload {
            rl.keyed
                .insert("backup".into(), vec![(500.0, true), (2500.0, false)]);
        }
        let c = check(&check_reload(&r), "reload-new-order").clone();
        assert_eq!(c.offender_count, 2, "{c:?}");
    }

    #[test]
    fn the_reloaded_config_reorders_every_route_and_rotates_only_the_named_key() {
        let t =
            super::super::chain::Template::builtin(Duration::from_millis(2000), false, 7).unwrap();
        let plan = Reload {
            at: 0.5,
            order: vec!["backup".into()],
            rotate: vec!["backup".into()],
            keeps: vec!["primary".into()],
        };
        let next = changed(&t.config, &plan);
        let names: Vec<&str> = next.chain.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["backup", "primary"]);
        assert_eq!(next.routes[0].spec.order, ["backup", "primary"]);
        let key = |c: &Config, n: &str| {
            c.chain
                .iter()
                .find(|p| p.name == n)
                .and_then(|p| p.api_key.as_ref())
                .map(|k| k.expose_secret().to_owned())
                .unwrap()
        };
        assert_eq!(key(&next, "primary"), key(&t.config, "primary"));
        assert_eq!(
            key(&next, "backup"),
            format!("{}-rotated", key(&t.config, "backup"))
        );
    }
}
