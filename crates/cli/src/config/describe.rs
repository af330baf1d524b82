//! What `check-config` prints, and what `serve` refuses to run.

use super::model::{ChainSpec, Config, Provider, StateBackend};

impl Config {
    /// Why `serve` cannot run this config, if it cannot: `stream_policy = "restart"` asks the
    /// chain to restart a failed stream on the next link and tell its consumer to discard what
    /// it showed — but a gateway's client already has the response headers and part of the
    /// first answer, and the OpenAI wire has no way to say "discard". Serving it would call the
    /// backup and throw its answer away. `stream_holdback_ms` is the gateway's way to fall over
    /// mid-stream without the client seeing it, and `stream_policy = "continue"` its way to go
    /// on after the client saw part of the answer (the next link continues it; nothing is
    /// un-shown), so `serve` allows that one.
    pub fn serve_refusal(&self) -> Option<String> {
        let restart: Vec<&str> = self
            .routes
            .iter()
            .filter(|r| r.spec.stream_restart)
            .map(|r| r.name.as_str())
            .collect();
        if restart.is_empty() {
            return None;
        }
        Some(format!(
            "{}: stream_policy = \"restart\" cannot be served: a client of `serve` already has the headers and part of the first answer, so the restarted answer would be thrown away; use stream_policy = \"continue\" (the next link continues the answer the client has) or \"end_with_error\" with stream_holdback_ms to fall over mid-stream before the client sees anything",
            if self.any_model {
                "[chain]".to_owned()
            } else {
                format!(
                    "route {}",
                    restart
                        .iter()
                        .map(|r| format!("{r:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ))
    }

    /// The resolved routes, providers and keys, printable (secrets redacted).
    pub fn describe(&self) -> String {
        let mut s = format!("config: {}\n", self.source);
        let numbered = |s: &mut String, spec: &ChainSpec| {
            for (i, name) in spec.order.iter().enumerate() {
                let line = self
                    .provider(name)
                    .map_or_else(|| name.clone(), Provider::redacted);
                s.push_str(&format!("  {}. {line}\n", i + 1));
                if let Some(p) = self.provider(name) {
                    for l in p.effective().lines() {
                        s.push_str(&format!("       {l}\n"));
                    }
                    for l in p.policies.describe() {
                        s.push_str(&format!("       {l}\n"));
                    }
                    if let Some(sp) = &p.status_page {
                        s.push_str(&format!(
                            "       status page: {} ({}) components [{}], every {} ms (timeout {} ms), on major outage: {}\n",
                            sp.url,
                            sp.format.as_str(),
                            sp.components.join(", "),
                            sp.interval.as_millis(),
                            sp.timeout.as_millis(),
                            sp.on_major_outage.as_str()
                        ));
                    }
                }
            }
            s.push_str(&format!(
                "  streams: first content within the deadline ({} ms), then bounded by stream_max {} ms; hold-back {} ms; after commit: {}\n",
                spec.deadline_ms,
                spec.stream_max_ms,
                spec.stream_holdback_ms,
                if spec.stream_restart {
                    "restart on the next link (library and `chat` only: `serve` refuses it)"
                } else if spec.stream_continue {
                    "continue on the next link from the delivered text (never for tool calls or requests that are not retry-safe)"
                } else {
                    "end with the error"
                },
            ));
            match &spec.static_reply {
                Some(r) => s.push_str(&format!("  then static reply: {r:?}\n")),
                None => s.push_str("  then: no static reply (the call fails)\n"),
            }
            for (k, t) in &spec.routes {
                s.push_str(&format!("  on {k}: fall back to {t}\n"));
            }
            if let Some(n) = &spec.fallback_notice {
                s.push_str(&format!(
                    "  fallback notice: {n:?} (x-ripcord-notice header, `ripcord.notice` field{})\n",
                    if spec.fallback_notice_in_text { ", and in the text" } else { "" }
                ));
            }
            for (intent, n) in &spec.intent_notices {
                s.push_str(&format!("  fallback notice for intent {intent}: {n:?}\n"));
            }
        };
        if self.any_model {
            for r in &self.routes {
                s.push_str(&format!(
                    "chain (deadline {} ms; answers any model):\n",
                    r.spec.deadline_ms
                ));
                numbered(&mut s, &r.spec);
            }
        } else {
            for r in &self.routes {
                s.push_str(&format!("route {:?}", r.name));
                if !r.aliases.is_empty() {
                    s.push_str(&format!(" (aliases: {})", r.aliases.join(", ")));
                }
                s.push_str(&format!(" (deadline {} ms):\n", r.spec.deadline_ms));
                numbered(&mut s, &r.spec);
            }
            let shared: Vec<String> = self
                .chain
                .iter()
                .filter_map(|p| {
                    let users: Vec<&str> = self
                        .routes
                        .iter()
                        .filter(|r| r.spec.order.contains(&p.name))
                        .map(|r| r.name.as_str())
                        .collect();
                    (users.len() > 1).then(|| format!("{} ({})", p.name, users.join(", ")))
                })
                .collect();
            if !shared.is_empty() {
                s.push_str(&format!(
                    "shared providers (one breaker, limiter and health record each): {}\n",
                    shared.join("; ")
                ));
            }
        }
        if let Some((providers, model)) = &self.embeddings {
            let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
            s.push_str(&format!("embeddings: {model} via {}\n", names.join(" -> ")));
        }
        if !self.gateway_keys.is_empty() {
            s.push_str(&format!("gateway keys: {}\n", self.gateway_keys.len()));
            for k in &self.gateway_keys {
                s.push_str(&format!(
                    "  key=[redacted] from {} tenant={}",
                    k.source,
                    k.tenant.as_deref().unwrap_or("none")
                ));
                if let Some(list) = &k.routes {
                    let names: Vec<&str> = list
                        .iter()
                        .filter_map(|&i| self.routes.get(i).map(|r| r.name.as_str()))
                        .collect();
                    s.push_str(&format!(" routes={}", names.join(",")));
                }
                if k.sub_tenants {
                    s.push_str(" sub_tenants");
                }
                if let Some(n) = k.rpm {
                    s.push_str(&format!(" rpm={n}"));
                }
                if let Some(n) = k.tpm {
                    s.push_str(&format!(" tpm={n}"));
                }
                s.push_str(&format!(" {}", k.controls.describe()));
                s.push('\n');
            }
        }
        if let Some(a) = &self.admin {
            s.push_str(&format!(
                "admin endpoints: POST /admin/breakers/{{provider}}/reset, /admin/providers/{{provider}}/disable and /enable, key=[redacted] from {}, on {}\n",
                a.source,
                a.listen.map_or_else(|| "the gateway's port".to_owned(), |l| l.to_string())
            ));
        }
        if let Some(b) = &self.budget {
            let per = match b.period {
                None => format!("{} s", b.window_s),
                Some(ripcord_resilience::BudgetPeriod::Day) => "UTC day".to_owned(),
                Some(ripcord_resilience::BudgetPeriod::Month) => "UTC month".to_owned(),
            };
            s.push_str(&format!(
                "budget: {} tokens per tenant per {per} ({} override(s){})\n",
                b.tokens_per_window,
                b.tenants.len(),
                if b.anonymous {
                    ", anonymous calls too"
                } else {
                    ""
                }
            ));
        }
        if let Some(a) = &self.alerts {
            s.push_str(&a.describe());
        }
        match &self.state {
            StateBackend::Local => s.push_str("state: local (per process)\n"),
            StateBackend::Redis(r) => s.push_str(&format!(
                "state: redis {} (op timeout {} ms, {} replica(s))\n",
                r.redacted_url, r.op_timeout_ms, r.replicas
            )),
        }
        s
    }
}
