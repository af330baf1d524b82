//! The scenario file: TOML with errors that name the file, the line and the key.

use std::ops::{Range, RangeInclusive};

use serde::Deserialize;
use toml::Spanned;

use super::{At, Expect, FAULT_NAMES, Fault, FaultParams, MaxTrips, Phase, Scenario};

/// A scenario file mistake, located in its file: the same shape as a `ripcord.toml` mistake.
pub(crate) type ScenarioError = ripcord_cli::config::ConfigError;

/// A number written as an integer or a float.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(untagged)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn get(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRaw {
    scenario: Vec<ScenarioRaw>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioRaw {
    name: Spanned<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    expect: Option<ExpectRaw>,
    #[serde(default)]
    phase: Vec<Spanned<PhaseRaw>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ExpectRaw {
    must_serve: Vec<Spanned<String>>,
    max_trips: Option<Spanned<i64>>,
    min_answered_pct: Option<Spanned<Num>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseRaw {
    vendor: Spanned<String>,
    #[serde(default)]
    at: Option<Spanned<Num>>,
    #[serde(default)]
    at_s: Option<Spanned<Num>>,
    fault: Spanned<String>,
    #[serde(default)]
    p: Option<Spanned<Num>>,
    #[serde(default)]
    otherwise: Option<Spanned<String>>,
    #[serde(default)]
    retry_after_ms: Option<Spanned<i64>>,
    #[serde(default)]
    delay_ms: Option<Spanned<i64>>,
    #[serde(default)]
    after_chunks: Option<Spanned<i64>>,
}

struct Cx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Cx<'_> {
    fn err(&self, span: &Range<usize>, key: String, message: impl Into<String>) -> ScenarioError {
        ScenarioError::at(self.file, self.text, Some(span), Some(key), message)
    }

    /// `v`'s number, or the error at `key` that it lies outside `range` (`what` says what a
    /// number in it is: "a probability", "a percentage").
    fn within(
        &self,
        v: &Spanned<Num>,
        range: RangeInclusive<f64>,
        key: String,
        what: &str,
    ) -> Result<f64, ScenarioError> {
        let x = v.get_ref().get();
        if range.contains(&x) {
            Ok(x)
        } else {
            Err(self.err(
                &v.span(),
                key,
                format!("{what} in [{}, {}], got {x}", range.start(), range.end()),
            ))
        }
    }
}

/// The key written on the line containing byte `offset`, if the line is `key = value`.
fn non_negative(
    cx: &Cx<'_>,
    v: &Option<Spanned<i64>>,
    key: impl Fn() -> String,
) -> Result<Option<u64>, ScenarioError> {
    match v {
        None => Ok(None),
        Some(s) => u64::try_from(*s.get_ref()).map(Some).map_err(|_| {
            cx.err(
                &s.span(),
                key(),
                format!("must be zero or more, got {}", s.get_ref()),
            )
        }),
    }
}

/// Parses a scenario file. `builtin_names` are the names user scenarios must not reuse.
pub(crate) fn parse(
    file: &str,
    text: &str,
    builtin_names: &[&str],
) -> Result<Vec<Scenario>, ScenarioError> {
    let raw: FileRaw = toml::from_str(text).map_err(|e| ScenarioError::toml(file, text, &e))?;
    let cx = Cx { file, text };
    if raw.scenario.is_empty() {
        return Err(ScenarioError {
            file: file.to_owned(),
            line: None,
            key: Some("scenario".to_owned()),
            message: "the file defines no [[scenario]]".to_owned(),
        });
    }
    let mut out: Vec<Scenario> = Vec::new();
    for (si, s) in raw.scenario.into_iter().enumerate() {
        let at = |k: &str| format!("scenario[{si}].{k}");
        let name = s.name.get_ref().trim().to_owned();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(cx.err(
                &s.name.span(),
                at("name"),
                format!("names use letters, digits, '-' and '_' only, got {name:?}"),
            ));
        }
        if builtin_names.contains(&name.as_str()) || out.iter().any(|o| o.name == name) {
            return Err(cx.err(
                &s.name.span(),
                at("name"),
                format!("scenario {name:?} is already defined (names must be unique, built-ins included)"),
            ));
        }
        if s.phase.is_empty() {
            return Err(cx.err(
                &s.name.span(),
                at("phase"),
                format!("scenario {name:?} has no [[scenario.phase]]"),
            ));
        }
        let mut phases = Vec::new();
        for (pi, ph) in s.phase.iter().enumerate() {
            let key = |k: &str| format!("scenario[{si}].phase[{pi}].{k}");
            let p = ph.get_ref();
            let vendor = p.vendor.get_ref().trim().to_owned();
            if vendor.is_empty() {
                return Err(cx.err(&p.vendor.span(), key("vendor"), "must not be empty"));
            }
            let when = match (&p.at, &p.at_s) {
                (Some(f), None) => {
                    let v = f.get_ref().get();
                    if !(0.0..1.0).contains(&v) {
                        return Err(cx.err(
                            &f.span(),
                            key("at"),
                            format!("a fraction of the run in [0, 1), got {v}"),
                        ));
                    }
                    At::Fraction(v)
                }
                (None, Some(sec)) => {
                    let v = sec.get_ref().get();
                    if !(v.is_finite() && (0.0..=86_400.0).contains(&v)) {
                        return Err(cx.err(
                            &sec.span(),
                            key("at_s"),
                            format!("seconds from the start, 0 to 86400, got {v}"),
                        ));
                    }
                    At::Seconds(v)
                }
                _ => {
                    return Err(cx.err(
                        &ph.span(),
                        key("at"),
                        "give exactly one of `at` (fraction of the run) and `at_s` (seconds)",
                    ));
                }
            };
            let params = FaultParams {
                retry_after_ms: non_negative(&cx, &p.retry_after_ms, || key("retry_after_ms"))?,
                delay_ms: non_negative(&cx, &p.delay_ms, || key("delay_ms"))?,
                after_chunks: non_negative(&cx, &p.after_chunks, || key("after_chunks"))?
                    .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            };
            let fault_of = |s: &Spanned<String>, k: &str| {
                Fault::parse(s.get_ref().trim(), params).ok_or_else(|| {
                    cx.err(
                        &s.span(),
                        key(k),
                        format!(
                            "unknown fault {:?} (one of: {})",
                            s.get_ref(),
                            FAULT_NAMES.join(", ")
                        ),
                    )
                })
            };
            let fault = fault_of(&p.fault, "fault")?;
            let otherwise = match &p.otherwise {
                Some(o) => fault_of(o, "otherwise")?,
                None => Fault::Ok,
            };
            let prob = match &p.p {
                None => 1.0,
                Some(v) => cx.within(v, 0.0..=1.0, key("p"), "a probability")?,
            };
            for (f, k, span) in [
                (fault, "fault", p.fault.span()),
                (
                    otherwise,
                    "otherwise",
                    p.otherwise.as_ref().map_or(p.fault.span(), Spanned::span),
                ),
            ] {
                let local = vendor == "local";
                if local && !f.fits_local() {
                    return Err(cx.err(
                        &span,
                        key(k),
                        format!(
                            "the local model takes only \"ok\" and \"fail\", got {:?}",
                            f.name()
                        ),
                    ));
                }
                if !local && f == Fault::Fail {
                    return Err(cx.err(
                        &span,
                        key(k),
                        format!("\"fail\" is for the local model; vendor {vendor:?} is a fake server: use an HTTP fault such as \"overloaded\""),
                    ));
                }
            }
            phases.push(Phase {
                vendor,
                at: when,
                fault,
                p: prob,
                otherwise,
            });
        }
        let mut expect = Expect::default();
        if let Some(e) = &s.expect {
            for m in &e.must_serve {
                let v = m.get_ref().trim();
                if v.is_empty() {
                    return Err(cx.err(&m.span(), at("expect.must_serve"), "empty name"));
                }
                expect.must_serve.push(v.to_owned());
            }
            if let Some(t) = &e.max_trips {
                let n = u32::try_from(*t.get_ref()).map_err(|_| {
                    cx.err(
                        &t.span(),
                        at("expect.max_trips"),
                        format!("must be 0 or more, got {}", t.get_ref()),
                    )
                })?;
                expect.max_trips = Some(MaxTrips::Fixed(n));
            }
            if let Some(pct) = &e.min_answered_pct {
                expect.min_answered_pct = Some(cx.within(
                    pct,
                    0.0..=100.0,
                    at("expect.min_answered_pct"),
                    "a percentage",
                )?);
            }
        }
        out.push(Scenario {
            name,
            description: s.description.unwrap_or_default(),
            source: file.to_owned(),
            phases,
            expect,
            load: super::Load::default(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ripcord_chaos::{Behavior, Script, VendorError};

    use super::*;

    const GOOD: &str = r#"
[[scenario]]
name = "backup-browns-out"
description = "primary is down; backup fails half its calls"
[scenario.expect]
must_serve = ["backup", "static"]
max_trips = 6
min_answered_pct = 95

[[scenario.phase]]
vendor = "primary"
at = 0
fault = "overloaded"

[[scenario.phase]]
vendor = "backup"
at_s = 1.5
fault = "server_error"
p = 0.5
otherwise = "slow_first_token"
delay_ms = 400

[[scenario.phase]]
vendor = "local"
at = 0.5
fault = "fail"
"#;

    fn parse_err(text: &str) -> ScenarioError {
        match parse("my.toml", text, &["flapping"]) {
            Ok(s) => panic!("expected an error, parsed {s:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn parses_a_full_scenario() {
        let s = parse("my.toml", GOOD, &[]).unwrap();
        assert_eq!(s.len(), 1);
        let s = &s[0];
        assert_eq!(s.name, "backup-browns-out");
        assert_eq!(s.source, "my.toml");
        assert_eq!(s.expect.must_serve, ["backup", "static"]);
        assert_eq!(s.expect.max_trips, Some(MaxTrips::Fixed(6)));
        assert_eq!(s.expect.min_answered_pct, Some(95.0));
        assert_eq!(s.phases.len(), 3);
        assert_eq!(s.phases[0].at, At::Fraction(0.0));
        assert_eq!(s.phases[0].fault, Fault::Overloaded);
        assert_eq!(s.phases[1].at, At::Seconds(1.5));
        assert_eq!(s.phases[1].p, 0.5);
        assert_eq!(
            s.phases[1].otherwise,
            Fault::SlowFirstToken { delay_ms: 400 }
        );
        assert_eq!(s.phases[2].fault, Fault::Fail);
        assert_eq!(
            s.vendors().into_iter().collect::<Vec<_>>(),
            ["backup", "local", "primary"]
        );
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = parse_err(&GOOD.replace("fault = \"server_error\"", "fault = \"melted\""));
        assert_eq!(e.file, "my.toml");
        assert_eq!(e.line, Some(18));
        assert_eq!(e.key.as_deref(), Some("scenario[0].phase[1].fault"));
        assert!(e.message.contains("unknown fault \"melted\""), "{e}");
        assert!(
            e.to_string()
                .starts_with("my.toml:18: key `scenario[0].phase[1].fault`")
        );

        let e = parse_err(&GOOD.replace("p = 0.5", "p = 1.5"));
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(19), Some("scenario[0].phase[1].p"))
        );

        let e = parse_err(&GOOD.replace("at = 0.5", "at = 1.0"));
        assert_eq!(e.key.as_deref(), Some("scenario[0].phase[2].at"));
        assert!(e.message.contains("[0, 1)"), "{e}");

        let e = parse_err(&GOOD.replace("at_s = 1.5\n", ""));
        assert_eq!(e.key.as_deref(), Some("scenario[0].phase[1].at"));
        assert!(e.message.contains("exactly one"), "{e}");

        let e = parse_err(&GOOD.replace("delay_ms = 400", "delay_ms = -4"));
        assert_eq!(e.key.as_deref(), Some("scenario[0].phase[1].delay_ms"));

        let e = parse_err(&GOOD.replace("fault = \"fail\"", "fault = \"overloaded\""));
        assert!(e.message.contains("only \"ok\" and \"fail\""), "{e}");
        assert_eq!(e.line, Some(26));

        let e = parse_err(&GOOD.replace("fault = \"overloaded\"", "fault = \"fail\""));
        assert!(e.message.contains("is for the local model"), "{e}");

        let e = parse_err(&GOOD.replace("min_answered_pct = 95", "min_answered_pct = 101"));
        assert_eq!(
            e.key.as_deref(),
            Some("scenario[0].expect.min_answered_pct")
        );
        assert_eq!(e.line, Some(8));
    }

    #[test]
    fn toml_and_shape_errors_are_located() {
        // An unknown key: toml's own error, located by its span.
        let e = parse_err(&GOOD.replace("p = 0.5", "probability = 0.5"));
        assert_eq!(e.line, Some(19));
        assert_eq!(e.key.as_deref(), Some("probability"));
        assert!(e.message.contains("unknown field"), "{e}");
        // A syntax error.
        let e = parse_err("[[scenario]\nname = 1");
        assert_eq!(e.line, Some(1));
        // A wrong type.
        let e = parse_err(&GOOD.replace("vendor = \"primary\"", "vendor = 3"));
        assert_eq!(e.line, Some(11));
        assert_eq!(e.key.as_deref(), Some("vendor"));
        // Names: unique, also against the built-ins.
        let e = parse_err(&GOOD.replace("backup-browns-out", "flapping"));
        assert!(e.message.contains("already defined"), "{e}");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("scenario[0].name"))
        );
        let twice = format!("{GOOD}\n{GOOD}");
        assert!(parse_err(&twice).message.contains("already defined"));
        let e = parse_err("scenario = []");
        assert!(e.message.contains("no [[scenario]]"), "{e}");
        let e = parse_err("[[scenario]]\nname = \"x\"\n");
        assert!(e.message.contains("no [[scenario.phase]]"), "{e}");
    }

    #[test]
    fn scripts_follow_the_phases() {
        let s = &parse("my.toml", GOOD, &[]).unwrap()[0];
        let run = Duration::from_secs(10);
        let Script::Timeline(segs) = s.script("backup", run, 7) else {
            panic!("a timeline");
        };
        assert_eq!(segs.len(), 2);
        assert_eq!(segs[0].0, Duration::ZERO);
        assert_eq!(segs[1].0, Duration::from_millis(1500));
        assert!(matches!(
            &segs[1].1,
            Script::Probability { p, fault: Behavior::Error(VendorError::ServerError), otherwise: Behavior::SlowFirstToken(d), .. }
                if *p == 0.5 && *d == Duration::from_millis(400)
        ));
        // Same seed, same script; the phase offsets scale with fractions of the run.
        assert_eq!(s.script("backup", run, 7), s.script("backup", run, 7));
        assert_ne!(s.script("backup", run, 7), s.script("backup", run, 8));
        let Script::Timeline(local) = s.script("local", run, 7) else {
            panic!("a timeline");
        };
        assert_eq!(local[1].0, Duration::from_secs(5));
    }
}
