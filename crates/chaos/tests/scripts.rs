//! Script selection over real HTTP: sequences, seeded probabilities, time windows, timelines,
//! and restarting a script.
// Helpers of test code (outside `#[test]` fns): failing loudly is their job.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Script, VendorError, Wire};
use support::*;
use tokio::time::Instant;

async fn statuses(fake: &FakeVendor, n: usize) -> Vec<u16> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(chat(fake, false).await.unwrap().status().as_u16());
    }
    out
}

#[tokio::test]
async fn sequence_plays_in_order_then_repeats_the_last_step() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    fake.set_script(Script::Sequence(vec![
        Behavior::Error(VendorError::RateLimited { retry_after: None }),
        Behavior::Error(VendorError::Overloaded),
        Behavior::Ok,
    ]));
    assert_eq!(statuses(&fake, 5).await, [429, 503, 200, 200, 200]);
    // Installing a script restarts it.
    fake.set_script(Script::Sequence(vec![
        Behavior::Error(VendorError::ServerError),
        Behavior::Ok,
    ]));
    assert_eq!(statuses(&fake, 2).await, [500, 200]);
}

#[tokio::test]
async fn probability_is_repeatable_by_seed() {
    let script = |seed| Script::Probability {
        p: 0.5,
        fault: Behavior::Error(VendorError::ServerError),
        otherwise: Behavior::Ok,
        seed,
    };
    let a = FakeVendor::start_with(
        Wire::Anthropic,
        FakeOptions::default().with_script(script(2024)),
    )
    .await
    .unwrap();
    let b = FakeVendor::start(Wire::Anthropic).await.unwrap();
    b.set_script(script(2024));
    let c = FakeVendor::start(Wire::Anthropic).await.unwrap();
    c.set_script(script(9));
    let (sa, sb, sc) = (
        statuses(&a, 40).await,
        statuses(&b, 40).await,
        statuses(&c, 40).await,
    );
    assert_eq!(sa, sb, "same seed, same outcomes");
    assert_ne!(sa, sc, "another seed, other outcomes");
    assert!(sa.contains(&500) && sa.contains(&200), "{sa:?}");
    // Re-installing the script replays the same draws.
    a.set_script(script(2024));
    assert_eq!(statuses(&a, 40).await, sa);
}

#[tokio::test]
async fn window_by_script_time() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let window = || Script::Window {
        from: Duration::from_secs(10),
        until: Duration::from_secs(20),
        fault: Behavior::Error(VendorError::Overloaded),
        otherwise: Behavior::Ok,
    };
    // Script time is set through the script's start instant, so no test waits ten seconds.
    let now = Instant::now();
    // (seconds of script time, the statuses then)
    for (at, want, when) in [
        (0, vec![200], "before the window"),
        (15, vec![503, 503], "inside the window"),
        (25, vec![200], "after the window"),
    ] {
        let since = now.checked_sub(Duration::from_secs(at)).expect("uptime");
        fake.set_script_since(window(), since);
        assert_eq!(statuses(&fake, want.len()).await, want, "{when}");
    }

    // And in real time: a window opening 250 ms after set_script.
    fake.set_script(Script::Window {
        from: Duration::from_millis(250),
        until: Duration::from_secs(3600),
        fault: Behavior::Error(VendorError::Auth),
        otherwise: Behavior::Ok,
    });
    assert_eq!(statuses(&fake, 1).await, [200]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(statuses(&fake, 1).await, [401]);
}

#[tokio::test]
async fn timeline_switches_scripts_at_offsets() {
    let fake = FakeVendor::start(Wire::Anthropic).await.unwrap();
    let timeline = || {
        Script::Timeline(vec![
            (
                Duration::ZERO,
                Script::Always(Behavior::Error(VendorError::Overloaded)),
            ),
            (
                Duration::from_secs(60),
                Script::Sequence(vec![Behavior::Error(VendorError::Auth), Behavior::Ok]),
            ),
            (
                Duration::from_secs(120),
                Script::Window {
                    // Segment-local time: 120 s + 5 s .. 120 s + 10 s.
                    from: Duration::from_secs(5),
                    until: Duration::from_secs(10),
                    fault: Behavior::Error(VendorError::ServerError),
                    otherwise: Behavior::Ok,
                },
            ),
        ])
    };
    let now = Instant::now();
    // (seconds of script time, the statuses then)
    for (at, want) in [
        (0, vec![529, 529]),
        (61, vec![401, 200, 200]),
        (121, vec![200]),
        (127, vec![500]),
    ] {
        let since = now.checked_sub(Duration::from_secs(at)).expect("uptime");
        fake.set_script_since(timeline(), since);
        assert_eq!(statuses(&fake, want.len()).await, want, "at {at} s");
    }
}

#[tokio::test]
async fn behaviours_apply_per_request_across_concurrent_connections() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    fake.set_script(Script::Sequence(
        std::iter::repeat_n(Behavior::Error(VendorError::ServerError), 10)
            .chain([Behavior::Ok])
            .collect(),
    ));
    let client = client();
    let url = chat_url(&fake);
    let body = chat_body(Wire::OpenAi, false);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..30 {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        tasks.spawn(async move {
            client
                .post(url)
                .json(&body)
                .send()
                .await
                .map(|r| r.status().as_u16())
        });
    }
    let mut codes = Vec::new();
    while let Some(done) = tasks.join_next().await {
        codes.push(done.unwrap().unwrap());
    }
    assert_eq!(codes.iter().filter(|c| **c == 500).count(), 10);
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 20);
    assert_eq!(fake.hits(), 30);
}
