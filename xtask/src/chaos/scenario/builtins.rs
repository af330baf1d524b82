//! The built-in scenarios: one entry per scenario, in the order they run.

use super::*;

/// The built-in scenarios, in the order they run.
pub(crate) fn builtins() -> Vec<Scenario> {
    let s = |name: &str, description: &str, phases: Vec<Phase>, must_serve: &[&str]| Scenario {
        name: name.to_owned(),
        description: description.to_owned(),
        source: BUILT_IN.to_owned(),
        phases,
        expect: Expect {
            must_serve: must_serve.iter().map(|s| (*s).to_owned()).collect(),
            max_trips: Some(MaxTrips::Auto),
            min_answered_pct: Some(99.0),
        },
        load: Load::default(),
    };
    // Healthy vendors under load: no breaker may trip, every request must be answered.
    let healthy = |mut sc: Scenario| {
        sc.expect.max_trips = Some(MaxTrips::Fixed(0));
        sc.expect.min_answered_pct = Some(100.0);
        sc
    };
    // The flapping vendor: down for 0.3 s, up for 0.3 s, all run long (fractions of a 6 s run
    // at the default --quick length; proportionally longer in longer runs).
    let flaps: Vec<Phase> = (0..20)
        .map(|i| {
            let fault = if i % 2 == 0 {
                Fault::Overloaded
            } else {
                Fault::Ok
            };
            Phase::new("primary", f64::from(i) * 0.05, fault)
        })
        .collect();
    vec![
        s(
            "primary-outage",
            "primary answers 503 for the first 45% of the run, then recovers",
            vec![
                Phase::new("primary", 0.0, Fault::Overloaded),
                Phase::new("primary", 0.45, Fault::Ok),
            ],
            &["primary", "backup"],
        ),
        s(
            "brownout",
            "primary fails 30% of calls with 500 and answers the rest with a slow first token",
            vec![
                Phase::new("primary", 0.1, Fault::ServerError)
                    .sometimes(0.3, Fault::SlowFirstToken { delay_ms: 450 }),
                Phase::new("primary", 0.8, Fault::Ok),
            ],
            // Retries absorb most 500s: falling back to backup is possible, not expected.
            &["primary"],
        ),
        s(
            "rate-limit-storm",
            "primary answers 429 with retry-after to 80% of calls; backup to 20%",
            vec![
                Phase::new(
                    "primary",
                    0.1,
                    Fault::RateLimited {
                        retry_after_ms: Some(1000),
                    },
                )
                .sometimes(0.8, Fault::Ok),
                Phase::new(
                    "backup",
                    0.1,
                    Fault::RateLimited {
                        retry_after_ms: Some(200),
                    },
                )
                .sometimes(0.2, Fault::Ok),
                Phase::new("primary", 0.75, Fault::Ok),
                Phase::new("backup", 0.75, Fault::Ok),
            ],
            &["primary", "backup"],
        ),
        s(
            "quota-exhausted",
            "primary runs out of quota (429 insufficient_quota) a fifth into the run: never retried",
            vec![Phase::new("primary", 0.2, Fault::QuotaExhausted)],
            &["primary", "backup"],
        ),
        {
            let mut too_large = s(
                "request-too-large",
                "primary answers half the calls with a 429 'Request too large … tokens per min': never retried, never charged to its breaker",
                vec![
                    Phase::new("primary", 0.1, Fault::RequestTooLarge).sometimes(0.5, Fault::Ok),
                    Phase::new("primary", 0.8, Fault::Ok),
                ],
                &["primary", "backup"],
            );
            // The verdict is about the request, not the vendor: however often it comes, it
            // must never open a breaker.
            too_large.expect.max_trips = Some(MaxTrips::Fixed(0));
            too_large
        },
        s(
            "auth-revoked",
            "primary's key is revoked (401) mid-run",
            vec![Phase::new("primary", 0.4, Fault::Auth)],
            &["primary", "backup"],
        ),
        s(
            "region-blocked",
            "primary refuses this region (403) from 15% of the run on",
            vec![Phase::new("primary", 0.15, Fault::RegionBlocked)],
            &["primary", "backup"],
        ),
        s(
            "stalls",
            "40% of primary's answers stall after the first chunk (streams restart on backup)",
            vec![
                Phase::new("primary", 0.1, Fault::StallMidStream { after_chunks: 1 })
                    .sometimes(0.4, Fault::Ok),
                Phase::new("primary", 0.85, Fault::Ok),
            ],
            &["primary", "backup"],
        ),
        s(
            "flapping",
            "primary flips between 503 and healthy every 5% of the run: the breaker must not thrash",
            flaps,
            &["primary", "backup"],
        ),
        s(
            "all-cloud-down",
            "both cloud vendors fail (503, resets): the local model answers, then it fails too and the static reply answers",
            vec![
                Phase::new("primary", 0.0, Fault::Overloaded),
                Phase::new("backup", 0.0, Fault::Reset),
                Phase::new("local", 0.6, Fault::Fail),
            ],
            &["local", STATIC],
        ),
        s(
            "hostile-streams",
            "streams that misbehave: primary ends answers without [DONE], then slips an unparseable event into them, goes silent (accepts, never answers), then cuts half its streams after the first chunk; backup does the same two stream faults: every stream with a stop reason completes, a silent primary is never retried, a cut inside the hold-back falls over unseen, no answer mixes two models",
            vec![
                Phase::new("primary", 0.0, Fault::StopWithoutDone),
                Phase::new("primary", 0.25, Fault::MalformedEvent),
                Phase::new("primary", 0.45, Fault::Silent),
                Phase::new("primary", 0.65, Fault::ResetMidStream { after_chunks: 1 })
                    .sometimes(0.5, Fault::Ok),
                Phase::new("backup", 0.0, Fault::MalformedEvent)
                    .sometimes(0.5, Fault::StopWithoutDone),
            ],
            &["primary", "backup"],
        ),
        healthy(s(
            "long-streams",
            "primary streams every answer for longer than the deadline (16 chunks, 300 ms apart): each completes, and no breaker trips on a healthy vendor",
            vec![Phase::new(
                "primary",
                0.0,
                Fault::LongStream { between_ms: 300 },
            )],
            &["primary"],
        )),
        {
            let mut sc = healthy(s(
                "saturation",
                "three times more users than primary's bulkhead slots, past its RPM, and primary answers 10% of calls 429 without retry-after: refusals stay local, the chain falls past them",
                vec![
                    Phase::new(
                        "primary",
                        0.0,
                        Fault::RateLimited {
                            retry_after_ms: None,
                        },
                    )
                    .sometimes(0.1, Fault::Ok),
                ],
                &["primary", "backup"],
            ));
            sc.load = Load {
                min_users: Some(12),
                limits: vec![(
                    "primary".to_owned(),
                    LinkLimits {
                        slots: 4,
                        queue_wait_ms: 200,
                        rpm: 120,
                    },
                )],
                ..Load::default()
            };
            sc
        },
        s(
            CLAUDE_THREE_WAYS,
            "on the Bedrock chain (--bedrock): Anthropic's API answers 529 all run; Claude on Bedrock answers until 40% of the run, then throttles (429 ThrottlingException); Claude on Vertex answers the rest, the local model behind it",
            vec![
                Phase::new("claude", 0.0, Fault::Overloaded),
                Phase::new(
                    "claude-bedrock",
                    0.4,
                    Fault::RateLimited {
                        retry_after_ms: None,
                    },
                ),
            ],
            &["claude-bedrock", "claude-vertex"],
        ),
        {
            let mut sc = s(
                CLAUDE_VIA_VERTEX,
                "on the Vertex chain (--vertex): Anthropic's API answers 529 all run; Claude on Vertex keeps answering with service-account tokens that live 2 s, so they expire and are refreshed during the run, and no expired token ever reaches Vertex",
                vec![Phase::new("claude", 0.0, Fault::Overloaded)],
                &["claude-vertex"],
            );
            sc.load.token_lifetime_ms = Some(2_000);
            sc
        },
        {
            let mut sc = s(
                "unknown-windows",
                "both cloud links ask for models no table knows; primary refuses every prompt as too long and states its window: the backup is tried (not judged by a guess) and no link is passed over without a record",
                vec![Phase::new("primary", 0.0, Fault::ContextTooLong)],
                &["backup"],
            );
            // The verdict is about the request: it must never open a breaker.
            sc.expect.max_trips = Some(MaxTrips::Fixed(0));
            sc.load.unknown_models = true;
            sc
        },
        {
            let mut sc = s(
                "breaker-recovers",
                "primary is down (503) for the first half of the run, long enough for its spells to grow; it is back at 50% and its breaker lets traffic back within one background probe, not at the end of a grown spell",
                vec![
                    Phase::new("primary", 0.0, Fault::Overloaded),
                    Phase::new("primary", 0.5, Fault::Ok),
                ],
                &["primary", "backup"],
            );
            sc.load.spells = vec![(
                "primary".to_owned(),
                Spells {
                    open_ms: 250,
                    open_max_ms: 4_000,
                    background_probe_ms: Some(400),
                },
            )];
            sc
        },
        {
            let mut sc = s(
                "stream-continue",
                "primary streams a 64-token answer one token per chunk and cuts it (a clean end after 40 tokens), then stalls it after 20 tokens, then sends an in-band error after 30: each is continued on backup, once, with a record, and every continued answer is exactly the whole answer (nothing delivered repeated or dropped)",
                vec![
                    Phase::new("primary", 0.0, Fault::Truncated { after_chunks: 40 }),
                    Phase::new("primary", 0.33, Fault::StallMidStream { after_chunks: 20 }),
                    Phase::new(
                        "primary",
                        0.66,
                        Fault::InBandOverloaded { after_chunks: 30 },
                    ),
                ],
                &["primary"],
            );
            sc.load.stream_continue = true;
            // Short spells, so the breaker that trips on the cuts lets primary start most
            // streams anyway (every cut is the vendor's failure).
            sc.load.spells = vec![(
                "primary".to_owned(),
                Spells {
                    open_ms: 100,
                    open_max_ms: 200,
                    background_probe_ms: None,
                },
            )];
            // Every cut counts against primary, and its spells are 100-200 ms: it trips often
            // by design (the bound of a 1 s spell does not apply).
            sc.expect.max_trips = Some(MaxTrips::Fixed(80));
            // A request not marked retry-safe is never continued: its stream ends with the
            // error (one request in four is such a request).
            sc.expect.min_answered_pct = Some(60.0);
            sc
        },
        {
            let mut sc = s(
                "reload-during-outage",
                "primary answers 503 all run and its breaker opens; at 40% the config is reloaded with backup first and backup's key rotated: no request fails, primary keeps its link and its open breaker, and every request after the swap starts on backup with the new key",
                vec![Phase::new("primary", 0.0, Fault::Overloaded)],
                &["backup"],
            );
            sc.load.reload = Some(Reload {
                at: 0.4,
                order: vec!["backup".to_owned(), "primary".to_owned()],
                rotate: vec!["backup".to_owned()],
                keeps: vec!["primary".to_owned()],
            });
            // Backup is healthy all run: every request gets a model's answer.
            sc.expect.min_answered_pct = Some(100.0);
            sc
        },
        {
            let mut sc = s(
                REGIONS,
                "on the pooled chain (asked for alone): link regions pools three deployments of gpt-4o; north is down (503) all run, west answers 429 with retry-after 500 ms from 15% to 60% of the run, east stays healthy: traffic spreads over east and west, no call reaches west before its retry-after elapsed, and nothing falls to backup",
                vec![
                    Phase::new("regions/north", 0.0, Fault::Overloaded),
                    Phase::new(
                        "regions/west",
                        0.15,
                        Fault::RateLimited {
                            retry_after_ms: Some(500),
                        },
                    ),
                    Phase::new("regions/west", 0.6, Fault::Ok),
                ],
                &["regions"],
            );
            sc.load.healthy_baseline = true;
            sc
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_continue_cuts_inside_its_answer_at_the_issue_s_token_counts() {
        let b = builtins();
        let sc = b.iter().find(|s| s.name == "stream-continue").unwrap();
        assert!(sc.load.stream_continue);
        let words = ripcord_chaos::Reply::words(CONTINUED_ANSWER).chunks;
        assert_eq!(words, 64);
        let cuts: Vec<Fault> = sc.phases.iter().map(|p| p.fault).collect();
        assert_eq!(
            cuts,
            vec![
                Fault::Truncated { after_chunks: 40 },
                Fault::StallMidStream { after_chunks: 20 },
                Fault::InBandOverloaded { after_chunks: 30 },
            ]
        );
        // Every fault falls inside the answer: something is delivered, something is left.
        for f in cuts {
            if let Fault::Truncated { after_chunks }
            | Fault::StallMidStream { after_chunks }
            | Fault::InBandOverloaded { after_chunks } = f
            {
                assert!((1..words).contains(&after_chunks), "{f:?}");
            }
        }
    }

    #[test]
    fn builtins_are_valid_and_cover_the_issue() {
        let b = builtins();
        let names: Vec<&str> = b.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), 20);
        let unique: BTreeSet<&&str> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        for s in &b {
            for p in &s.phases {
                assert_eq!(p.vendor == "local", p.fault == Fault::Fail, "{}", s.name);
                assert!(matches!(p.at, At::Fraction(f) if (0.0..1.0).contains(&f)));
            }
            assert!(!s.expect.must_serve.is_empty());
        }
        for name in ["long-streams", "saturation"] {
            let sc = b.iter().find(|s| s.name == name).unwrap();
            assert_eq!(sc.expect.max_trips, Some(MaxTrips::Fixed(0)), "{name}");
        }
        assert!(b.iter().any(Scenario::long_streams));
        let faults: BTreeSet<&str> = b
            .iter()
            .flat_map(|s| s.phases.iter().map(|p| p.fault.name()))
            .collect();
        for f in [
            "overloaded",
            "server_error",
            "rate_limited",
            "quota_exhausted",
            "request_too_large",
            "auth",
            "region_blocked",
            "stall_mid_stream",
            "fail",
        ] {
            assert!(faults.contains(f), "no built-in scenario uses {f}");
        }
    }
}
