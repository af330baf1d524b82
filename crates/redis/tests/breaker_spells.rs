//! The shared breaker's open spell grows with trips in a row, as the in-process breaker's does:
//! the same sequence against both stores, then two replicas lengthening one streak kept in a
//! REAL `redis-server` child on loopback, capped at the longest spell and reset by a close.
//!
//! Without `redis-server` the Redis runs skip loudly (an error under `CI`).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{both, breaker_on};
use ripcord_core::testing::ScriptedModel;
use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
use ripcord_redis::server::RedisServer as Server;
use ripcord_redis::{RedisBreakerStore, SharedBreakerConfig};
use ripcord_resilience::{Breaker, BreakerState, OpenBackoff};

const BASE: Duration = Duration::from_millis(250);
const MAX: Duration = Duration::from_millis(1000);

/// Two failures trip; spells of 250 ms doubling up to 1 s.
fn config() -> SharedBreakerConfig {
    SharedBreakerConfig::default()
        .consecutive_failures(2)
        .open(OpenBackoff::Exponential {
            base: BASE,
            max: MAX,
        })
        .probe_timeout(Duration::from_secs(5))
}

/// One replica's breaker and, on Redis, its store (synced around every call, so each step
/// sees the shared state without the cache's lag).
struct Replica {
    breaker: Breaker<Arc<ScriptedModel>>,
    store: Option<Arc<RedisBreakerStore>>,
}

impl Replica {
    async fn new(model: ScriptedModel, redis: Option<&Server>) -> Replica {
        let (breaker, store) = breaker_on(model, redis, &config()).await;
        Replica { breaker, store }
    }

    async fn settle(&self) {
        if let Some(s) = &self.store {
            assert!(s.sync().await, "redis did not answer");
        }
    }

    /// One call; the error's kind, or `None` for an answer.
    async fn call(&self) -> Option<ErrorKind> {
        self.settle().await;
        let r = self
            .breaker
            .chat(&ChatRequest::user("hi"), &Context::new())
            .await;
        self.settle().await;
        r.err().map(|e| e.kind())
    }

    /// The time left of the open spell, from a call the breaker refuses.
    async fn open_left(&self) -> Duration {
        self.settle().await;
        let e = self
            .breaker
            .chat(&ChatRequest::user("hi"), &Context::new())
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::CircuitOpen, "{e}");
        assert_eq!(self.breaker.handle().state(), BreakerState::Open);
        e.retry_after().unwrap()
    }
}

/// `left` was read just after a trip whose spell is `spell`: at most the spell, and more than
/// half of it (so more than the spell before it, which was half as long).
fn assert_spell(left: Duration, spell: Duration, what: &str) {
    assert!(
        left <= spell && left > spell / 2,
        "{what}: {left:?} left of the open spell, expected a spell of {spell:?}"
    );
}

/// Waits out an open spell that has `left` to run (real time: the spell is on the server's
/// clock for the shared store).
async fn wait_out(left: Duration) {
    tokio::time::sleep(left + Duration::from_millis(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_re_trips_double_the_spell_up_to_the_cap_and_a_close_starts_again() {
    both(|redis| async move {
        let model = ScriptedModel::new("spells")
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            // Three probes fail, the fourth answers.
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .reply("back")
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError);
        let r = Replica::new(model, redis.as_deref()).await;
        let on = if redis.is_some() { "redis" } else { "local" };
        assert_eq!(r.call().await, Some(ErrorKind::ServerError));
        assert_eq!(r.call().await, Some(ErrorKind::ServerError));
        let mut left = r.open_left().await;
        assert_spell(left, BASE, &format!("{on}: the first trip"));
        for (n, spell) in [(2, BASE * 2), (3, MAX), (4, MAX)] {
            wait_out(left).await;
            assert_eq!(
                r.call().await,
                Some(ErrorKind::ServerError),
                "{on}: probe before trip {n}"
            );
            left = r.open_left().await;
            assert_spell(left, spell, &format!("{on}: trip {n} in a row"));
        }
        wait_out(left).await;
        assert_eq!(r.call().await, None, "{on}: the probe that closes");
        assert_eq!(r.breaker.handle().state(), BreakerState::Closed);
        assert_eq!(r.call().await, Some(ErrorKind::ServerError));
        assert_eq!(r.call().await, Some(ErrorKind::ServerError));
        let left = r.open_left().await;
        assert_spell(left, BASE, &format!("{on}: the first trip after a close"));
        assert_eq!(r.breaker.get_ref().calls(), 8);
    })
    .await;
}

/// Reads the streak and the open key of link `vendor` straight from Redis, in one script (so
/// both TTLs are read at the same server time): the streak's value and its TTL, and the open
/// key's TTL (ms; -2 when the key does not exist).
async fn keys(server: &Server) -> (Option<u64>, i64, i64) {
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    // The streak's TTL is taken at the instant the open state's is read: two PTTLs read one
    // after the other may be a millisecond apart (Redis 7.0's clock moves inside a script),
    // so the streak's is derived from both keys' absolute expiry times (PEXPIRETIME).
    let (streak, streak_at, open_at, open_ttl): (Option<u64>, i64, i64, i64) = redis::Script::new(
        "return {redis.call('GET', KEYS[1]), redis.call('PEXPIRETIME', KEYS[1]), \
         redis.call('PEXPIRETIME', KEYS[2]), redis.call('PTTL', KEYS[2])}",
    )
    .key("ripcord:v1:{vendor}:breaker:streak")
    .key("ripcord:v1:{vendor}:breaker:open")
    .invoke_async(&mut con)
    .await
    .unwrap();
    // -1 (no expiry) and -2 (no key) are kept as they are.
    let streak_ttl = if streak_at < 0 || open_at < 0 {
        streak_at
    } else {
        open_ttl - (open_at - streak_at)
    };
    (streak, streak_ttl, open_ttl)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trips_in_a_row_on_two_replicas_lengthen_one_shared_spell_capped_and_a_close_resets_it() {
    let Some(server) = common::start("the shared breaker spell tests").await else {
        return;
    };
    // A trips it and later closes it; B's probes fail in between. Both call link `vendor`.
    let a = Replica::new(
        ScriptedModel::new("vendor")
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .reply("back"),
        Some(&server),
    )
    .await;
    let b = Replica::new(
        ScriptedModel::new("vendor")
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError)
            .fail(ErrorKind::ServerError),
        Some(&server),
    )
    .await;
    let state_ttl = Duration::from_secs(600);
    assert_eq!(a.call().await, Some(ErrorKind::ServerError));
    assert_eq!(a.call().await, Some(ErrorKind::ServerError));
    // Trip 1 on A: B, which never called, is refused for the same first spell.
    let mut left = b.open_left().await;
    assert_spell(left, BASE, "trip 1 (A), seen by B");
    let (streak, streak_ttl, open_ttl) = keys(&server).await;
    assert_eq!(streak, Some(1));
    // The streak lives as long as the open state: never without a TTL, never past it.
    assert!(
        streak_ttl > 0
            && streak_ttl <= open_ttl
            && open_ttl as u128 <= (BASE + state_ttl).as_millis(),
        "streak TTL {streak_ttl} ms, open TTL {open_ttl} ms"
    );
    // Probes that fail alternate between the replicas; each re-trip doubles the shared spell,
    // up to the cap, whichever replica's probe failed.
    let steps = [(&b, &a, 2, BASE * 2), (&a, &b, 3, MAX), (&b, &a, 4, MAX)];
    for (prober, other, n, spell) in steps {
        wait_out(left).await;
        assert_eq!(
            prober.call().await,
            Some(ErrorKind::ServerError),
            "probe {n}"
        );
        left = other.open_left().await;
        assert_spell(left, spell, &format!("trip {n}, seen by the other replica"));
        let (streak, streak_ttl, open_ttl) = keys(&server).await;
        assert_eq!(streak, Some(n), "trip {n}");
        assert!(
            streak_ttl > 0 && streak_ttl <= open_ttl,
            "trip {n}: streak TTL {streak_ttl} ms, open TTL {open_ttl} ms"
        );
        assert!(
            open_ttl as u128 <= (spell + state_ttl).as_millis(),
            "trip {n}: open TTL {open_ttl} ms"
        );
    }
    // A's probe answers: closed for both, and the streak is gone.
    wait_out(left).await;
    assert_eq!(a.call().await, None);
    b.settle().await;
    assert_eq!(b.breaker.handle().state(), BreakerState::Closed);
    assert_eq!(keys(&server).await, (None, -2, -2));
    // B's next two failures trip it again: the first spell of a new streak.
    assert_eq!(b.call().await, Some(ErrorKind::ServerError));
    assert_eq!(b.call().await, Some(ErrorKind::ServerError));
    let left = a.open_left().await;
    assert_spell(left, BASE, "the first trip after the close, seen by A");
    assert_eq!(keys(&server).await.0, Some(1));
    // Every call that reached the vendor: A's two failures, the probe behind trip 3 and the
    // one that closed; B's probes behind trips 2 and 4, and its two failures after the close.
    assert_eq!(a.breaker.get_ref().calls(), 4);
    assert_eq!(b.breaker.get_ref().calls(), 4);
}

#[tokio::test]
async fn a_longest_spell_below_the_first_is_refused_naming_it() {
    let e = SharedBreakerConfig::default()
        .open(OpenBackoff::Exponential {
            base: Duration::from_secs(10),
            max: Duration::from_secs(5),
        })
        .policy()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidRequest);
    assert!(e.message().contains("shared_breaker.open"), "{e}");
}
