//! The access-token invariants of a chain with Vertex AI links, read from what the fake token
//! endpoint minted and what the fake Vertex refused.
//!
//! | id | invariant | read from |
//! | --- | --- | --- |
//! | `token-refresh` | when the tokens live shorter than the run, at least one was refreshed (more than one minted), and the refreshes stayed about one per lifetime — not one per call | the token endpoint's counts |
//! | `token-expiry` | no request reached Vertex with an expired, missing or unknown token, and no attempt on a Vertex link failed as `auth` | the Vertex fakes' refusals, wire attempts |
//!
//! The adapter refreshes ahead of expiry (a quarter of the token's life early), so a refusal
//! for an expired token means a refresh came too late; the adapter does not retry a 401, so
//! any such refusal would also show as a failed attempt.

use ripcord_core::ErrorKind;

use super::invariants::Check;
use super::record::Records;

/// The link kinds whose calls carry Vertex access tokens.
const VERTEX_KINDS: &[&str] = &["vertex", "vertex-anthropic"];

/// The two checks, or none when the chain has no Vertex link.
pub(crate) fn check_tokens(r: &Records) -> Vec<Check> {
    let Some(t) = &r.tokens else {
        return Vec::new();
    };
    vec![refresh(r, t), expiry(r, t)]
}

fn refresh(r: &Records, t: &super::record::TokenRec) -> Check {
    let title = "access tokens are refreshed, once per lifetime";
    let vertex_calls = r.wires.iter().filter(|c| is_vertex(r, &c.link)).count();
    let detail = format!(
        "{} exchanges, {} tokens minted for {vertex_calls} Vertex calls; tokens live {:.0} ms, the run {:.0} ms",
        t.exchanges, t.minted, t.lifetime_ms, r.run_ms
    );
    let mut offenders = Vec::new();
    if t.exchanges > t.minted {
        offenders.push(format!(
            "{} exchanges were refused by the token endpoint",
            t.exchanges - t.minted
        ));
    }
    // Refreshes happen a quarter of a lifetime early: a run of `n` lifetimes needs about
    // `4n/3` tokens. More than twice that (plus the first) is a refresh per call, not per
    // lifetime.
    let lifetimes = if t.lifetime_ms > 0.0 {
        r.run_ms / t.lifetime_ms
    } else {
        0.0
    };
    if vertex_calls > 0 && lifetimes > 1.0 && t.minted < 2 {
        offenders.push(format!(
            "the run lasted {lifetimes:.1} token lifetimes but only {} token was minted: no refresh happened",
            t.minted
        ));
    }
    let ceiling = 2.0 * (lifetimes * 4.0 / 3.0).ceil() + 1.0;
    if t.minted as f64 > ceiling {
        offenders.push(format!(
            "{} tokens minted in {lifetimes:.1} lifetimes (at most {ceiling:.0} expected): tokens are not reused",
            t.minted
        ));
    }
    Check::new("token-refresh", title, detail, offenders)
}

fn expiry(r: &Records, t: &super::record::TokenRec) -> Check {
    let title = "no expired or unknown token reaches Vertex";
    let mut offenders = Vec::new();
    if t.expired_rejections > 0 {
        offenders.push(format!(
            "Vertex refused {} requests whose token had expired (401 ACCESS_TOKEN_EXPIRED)",
            t.expired_rejections
        ));
    }
    if t.unknown_rejections > 0 {
        offenders.push(format!(
            "Vertex refused {} requests whose token it never minted",
            t.unknown_rejections
        ));
    }
    let auth_failures: Vec<String> = r
        .wires
        .iter()
        .filter(|c| is_vertex(r, &c.link) && c.error_kind() == Some(ErrorKind::Auth))
        .map(|c| {
            format!(
                "{}: {} failed as auth",
                c.request.as_deref().unwrap_or("?"),
                c.link
            )
        })
        .collect();
    let detail = format!(
        "{} expired-token and {} unknown-token refusals; {} Vertex attempts failed as auth",
        t.expired_rejections,
        t.unknown_rejections,
        auth_failures.len()
    );
    offenders.extend(auth_failures);
    Check::new("token-expiry", title, detail, offenders)
}

fn is_vertex(r: &Records, link: &str) -> bool {
    r.link(link)
        .is_some_and(|l| VERTEX_KINDS.contains(&l.kind.as_str()))
}

#[cfg(test)]
mod tests {
    use super::super::record::{CallEnd, CallRec, LinkInfo, TokenRec};
    use super::*;

    fn records(tokens: TokenRec, failures: &[Option<ErrorKind>]) -> Records {
        Records {
            links: vec![LinkInfo {
                name: "claude-vertex".into(),
                kind: "vertex-anthropic".into(),
                permits: 1,
                open_ms: 1000,
                failure_threshold: 3,
            }],
            wires: failures
                .iter()
                .enumerate()
                .map(|(i, k)| CallRec {
                    request: Some(format!("r{i}")),
                    link: "claude-vertex".into(),
                    start_seq: i as u64,
                    start_ms: i as f64,
                    end_seq: Some(i as u64 + 1),
                    end_ms: Some(i as f64 + 1.0),
                    end: Some(k.map_or(CallEnd::Ok, CallEnd::Failed)),
                })
                .collect(),
            run_ms: 6000.0,
            tokens: Some(tokens),
            ..Records::default()
        }
    }

    fn healthy() -> TokenRec {
        TokenRec {
            lifetime_ms: 2000.0,
            exchanges: 4,
            minted: 4,
            expired_rejections: 0,
            unknown_rejections: 0,
        }
    }

    #[test]
    fn refreshed_tokens_and_no_refusals_pass() {
        let checks = check_tokens(&records(healthy(), &[None, None, None]));
        assert_eq!(checks.len(), 2);
        assert!(checks.iter().all(|c| c.passed), "{checks:?}");
        assert!(check_tokens(&Records::default()).is_empty());
    }

    #[test]
    fn no_refresh_too_many_tokens_and_refused_exchanges_fail() {
        let with = |exchanges, minted| TokenRec {
            exchanges,
            minted,
            ..healthy()
        };
        let cases = [
            ("no refresh", with(1, 1), Some("no refresh happened")),
            ("a token per call", with(40, 40), Some("not reused")),
            ("refused exchanges", with(6, healthy().minted), None),
        ];
        for (case, rec, says) in cases {
            let c = &check_tokens(&records(rec, &[None]))[0];
            assert!(!c.passed, "{case}: {c:?}");
            if let Some(says) = says {
                assert!(c.offenders[0].contains(says), "{case}: {c:?}");
            }
        }
    }

    #[test]
    fn an_expired_token_or_an_auth_attempt_fails_the_expiry_check() {
        let expired = TokenRec {
            expired_rejections: 1,
            ..healthy()
        };
        let c = &check_tokens(&records(expired, &[None]))[1];
        assert!(!c.passed);
        assert!(c.offenders[0].contains("ACCESS_TOKEN_EXPIRED"), "{c:?}");
        let c = &check_tokens(&records(healthy(), &[None, Some(ErrorKind::Auth)]))[1];
        assert!(!c.passed);
        assert_eq!(c.offenders, ["r1: claude-vertex failed as auth"]);
        // Other failures are the scenario's business, not the tokens'.
        let c = &check_tokens(&records(healthy(), &[Some(ErrorKind::Overloaded)]))[1];
        assert!(c.passed, "{c:?}");
    }
}

#[cfg(test)]
mod run_tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::super::chain::{Builtin, LocalCache, Template};
    use super::super::run::{Settings, run_scenario};
    use super::super::scenario::{CLAUDE_VIA_VERTEX, builtins};

    /// Claude via Vertex on one-second tokens over a 3.5 s run: the Anthropic API is down,
    /// Vertex answers, tokens expire and are refreshed, and every invariant holds.
    #[tokio::test]
    async fn claude_via_vertex_refreshes_tokens_and_keeps_every_invariant() {
        let s = Settings {
            users: 3,
            duration: Duration::from_millis(3500),
            deadline: Duration::from_millis(2500),
            seed: 5,
            stream_share: 0.5,
            max_tokens: 8,
            tolerance: Duration::from_millis(300),
            join_margin: Duration::from_secs(5),
            progress: false,
        };
        let t = Template::builtin_chain(Builtin::Vertex, s.deadline, false, s.seed).unwrap();
        assert_eq!(t.names(), ["claude", "claude-vertex"]);
        let mut sc = builtins()
            .into_iter()
            .find(|sc| sc.name == CLAUDE_VIA_VERTEX)
            .unwrap();
        sc.load.token_lifetime_ms = Some(1000);
        assert!(t.check(&sc).is_ok());
        let cache = Arc::new(LocalCache::default());
        let run = run_scenario(&sc, "test", &t, &s, &cache, None, None)
            .await
            .unwrap();
        for c in run.invariants.iter().chain(&run.expectations) {
            assert!(c.passed, "{c:?}");
        }
        let ids: Vec<&str> = run.invariants.iter().map(|c| c.id.as_str()).collect();
        assert!(
            ids.contains(&"token-refresh") && ids.contains(&"token-expiry"),
            "{ids:?}"
        );
        let tokens = run.records.tokens.as_ref().unwrap();
        assert!(tokens.minted >= 3, "{tokens:?}");
        assert_eq!(tokens.expired_rejections, 0);
        assert!(
            run.summary
                .served_by
                .iter()
                .any(|s| s.who == "claude-vertex" && s.count > 0),
            "{:?}",
            run.summary.served_by
        );
    }
}
