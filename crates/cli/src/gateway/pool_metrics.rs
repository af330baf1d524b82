//! The per-deployment series of pooled links on `GET /metrics`, rendered from the same pool
//! snapshots `/readyz` shows (so a scrape and the readiness page agree), in the Prometheus text
//! format after the OpenTelemetry series. Labels: `ripcord_link` and `ripcord_deployment` (the
//! deployment's configured name: never a key or a URL).

use std::fmt::Write as _;

use serde_json::Value;

/// A deployment's state as a number: 0 available, 1 cooling down, 2 ejected, 3 out of service.
fn state_code(state: &str) -> Option<u8> {
    match state {
        "available" => Some(0),
        "cooling_down" => Some(1),
        "ejected" => Some(2),
        "out_of_service" => Some(3),
        _ => None,
    }
}

/// A label value escaped as the text format asks (backslash, double quote, newline).
fn escape(v: &str) -> String {
    crate::gateway::escaped(v, |c| match c {
        '\\' => Some("\\\\"),
        '"' => Some("\\\""),
        '\n' => Some("\\n"),
        _ => None,
    })
}

/// One family: its help and type lines, then one sample per deployment that has a value.
fn family(
    out: &mut String,
    pools: &[Value],
    name: &str,
    kind: &str,
    help: &str,
    value: impl Fn(&Value) -> Vec<(Option<(&'static str, &'static str)>, f64)>,
) {
    let mut lines = String::new();
    for pool in pools {
        let link = escape(pool.get("link").and_then(Value::as_str).unwrap_or_default());
        let deployments = pool.get("deployments").and_then(Value::as_array);
        for d in deployments.into_iter().flatten() {
            let dep = escape(d.get("name").and_then(Value::as_str).unwrap_or_default());
            for (extra, v) in value(d) {
                let extra = extra.map_or(String::new(), |(k, val)| format!(",{k}=\"{val}\""));
                let _ = writeln!(
                    lines,
                    "{name}{{ripcord_link=\"{link}\",ripcord_deployment=\"{dep}\"{extra}}} {v}"
                );
            }
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        out.push_str(&lines);
    }
}

/// A gauge's value for a deployment, when its snapshot has one.
type Gauge = fn(&Value) -> Option<f64>;

fn num(d: &Value, key: &str) -> Option<f64> {
    d.get(key).and_then(Value::as_f64)
}

/// Appends the per-deployment families for `pools` (the `pools` array of the readiness view).
pub(super) fn append(out: &mut String, pools: &Value) {
    let Some(pools) = pools.as_array().filter(|p| !p.is_empty()) else {
        return;
    };
    // The gauges: one value per deployment, absent where the snapshot has none.
    let gauges: [(&str, &str, Gauge); 4] = [
        (
            "ripcord_pool_deployment_state",
            "Where a deployment of a pool link stands: 0 available, 1 cooling down, 2 ejected, 3 out of service.",
            |d| {
                d.get("state")
                    .and_then(Value::as_str)
                    .and_then(state_code)
                    .map(f64::from)
            },
        ),
        (
            "ripcord_pool_deployment_in_flight",
            "Calls in flight on a deployment of a pool link.",
            |d| num(d, "in_flight"),
        ),
        (
            "ripcord_pool_deployment_latency_ewma_seconds",
            "A deployment's peak-EWMA latency estimate (absent before its first answer).",
            |d| num(d, "latency_ewma_ms").map(|v| v / 1000.0),
        ),
        (
            "ripcord_pool_deployment_cooldown_seconds",
            "Time left of a deployment's cooldown or ejection (0 when none).",
            |d| num(d, "cooldown_left_ms").map(|v| v / 1000.0),
        ),
    ];
    for (name, help, value) in gauges {
        family(out, pools, name, "gauge", help, |d| {
            value(d).map(|v| (None, v)).into_iter().collect()
        });
    }
    family(
        out,
        pools,
        "ripcord_pool_deployment_calls_total",
        "counter",
        "Attempts a deployment of a pool link answered (outcome success) or failed (outcome failure).",
        |d| {
            [("success", "successes"), ("failure", "failures")]
                .into_iter()
                .filter_map(|(outcome, key)| num(d, key).map(|v| (Some(("outcome", outcome)), v)))
                .collect()
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_deployment_gets_its_series_with_escaped_labels() {
        let pools = serde_json::json!([{
            "link": "gpt",
            "deployments": [
                {"name": "east", "state": "cooling_down", "in_flight": 0, "cooldown_left_ms": 2500,
                 "successes": 3, "failures": 1},
                {"name": "we\"st", "state": "available", "in_flight": 2, "latency_ewma_ms": 12.5,
                 "cooldown_left_ms": 0, "successes": 7, "failures": 0}
            ]
        }]);
        let mut out = String::new();
        append(&mut out, &pools);
        for line in [
            "# TYPE ripcord_pool_deployment_state gauge",
            "ripcord_pool_deployment_state{ripcord_link=\"gpt\",ripcord_deployment=\"east\"} 1",
            "ripcord_pool_deployment_state{ripcord_link=\"gpt\",ripcord_deployment=\"we\\\"st\"} 0",
            "ripcord_pool_deployment_in_flight{ripcord_link=\"gpt\",ripcord_deployment=\"we\\\"st\"} 2",
            "ripcord_pool_deployment_latency_ewma_seconds{ripcord_link=\"gpt\",ripcord_deployment=\"we\\\"st\"} 0.0125",
            "ripcord_pool_deployment_cooldown_seconds{ripcord_link=\"gpt\",ripcord_deployment=\"east\"} 2.5",
            "ripcord_pool_deployment_calls_total{ripcord_link=\"gpt\",ripcord_deployment=\"east\",outcome=\"failure\"} 1",
            "# TYPE ripcord_pool_deployment_calls_total counter",
        ] {
            assert!(out.contains(line), "missing {line:?} in\n{out}");
        }
        // No latency sample for a deployment that never answered.
        assert!(
            !out.contains("latency_ewma_seconds{ripcord_link=\"gpt\",ripcord_deployment=\"east\"}")
        );
    }

    #[test]
    fn no_pools_no_series() {
        let mut out = String::new();
        append(&mut out, &serde_json::json!([]));
        append(&mut out, &Value::Null);
        assert!(out.is_empty());
    }
}
