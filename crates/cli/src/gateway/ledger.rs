//! The gateway's side of the ledger (issue 38): one call row and one row per attempt for every
//! chat call, handed to `ripcord_store::Ledger` without waiting (the writer task batches them;
//! a full buffer is a counted drop, never a slower answer).
//!
//! A [`CallLog`] is opened when a call is admitted and recorded once: when the JSON answer or
//! the error is known, or at the end of a stream. A stream whose client leaves early is
//! recorded when its body is dropped, as `cancelled`, with what it had reported so far.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ripcord_core::{Provenance, Usage};
use ripcord_store::{AttemptRow, CallRow, CallScope, Ledger, LedgerRow, Tokens, new_row_id};

/// Who a call is for and where it goes, and when it began.
#[derive(Debug)]
pub(super) struct CallLog {
    ledger: Option<Ledger>,
    scope: CallScope,
    at_ms: i64,
    started: Instant,
    /// What a stream reported so far (recorded on drop).
    usage: Option<Usage>,
    provenance: Option<Provenance>,
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl CallLog {
    /// A log for one call; with `ledger` `None` it records nothing.
    pub(super) fn open(
        ledger: Option<&Ledger>,
        request_id: &Arc<str>,
        key_id: Option<&Arc<str>>,
        tenant: Option<&Arc<str>>,
        sub_tenant: Option<&str>,
        route: &str,
    ) -> CallLog {
        CallLog {
            ledger: ledger.cloned(),
            scope: CallScope {
                request_id: request_id.to_string(),
                key_id: key_id.map(ToString::to_string),
                tenant: tenant.map(ToString::to_string),
                sub_tenant: sub_tenant.map(str::to_owned),
                route: route.to_owned(),
            },
            at_ms: unix_ms(),
            started: Instant::now(),
            usage: None,
            provenance: None,
        }
    }

    /// Remembers what a stream reported so far.
    pub(super) fn saw(&mut self, usage: Option<&Usage>, provenance: Option<&Provenance>) {
        if let Some(u) = usage {
            self.usage = Some(*u);
        }
        if let Some(p) = provenance {
            self.provenance = Some(p.clone());
        }
    }

    /// Records the call (once; later calls do nothing): `outcome` is `ok` or an error kind's
    /// name.
    pub(super) fn record(&mut self, outcome: &str, usage: Option<&Usage>, p: Option<&Provenance>) {
        self.saw(usage, p);
        self.write(outcome);
    }

    fn write(&mut self, outcome: &str) {
        let Some(ledger) = self.ledger.take() else {
            return;
        };
        let usage = self.usage.unwrap_or_default();
        let p = self.provenance.take().unwrap_or_default();
        let tokens = Tokens {
            input: usage.input_tokens,
            output: usage.output_tokens,
            cached: usage.cached_input_tokens,
            cost_usd: usage.cost_usd,
        };
        let outcome = if outcome == "ok" && p.static_reply {
            "static_reply"
        } else {
            outcome
        };
        let served = p.served_by.as_ref().map(ToString::to_string);
        let last = p.attempts.last();
        let call_id = new_row_id();
        let latency_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let mut rows = Vec::with_capacity(1 + p.attempts.len());
        rows.push(LedgerRow::Call(CallRow {
            id: call_id.clone(),
            at_ms: self.at_ms,
            scope: self.scope.clone(),
            link: last.map(|a| a.provider.to_string()),
            deployment: last.and_then(|a| a.deployment.as_ref().map(ToString::to_string)),
            model: last.map(|a| a.model.to_string()),
            tokens,
            outcome: outcome.to_owned(),
            latency_ms,
            degraded: p.degraded || outcome != "ok",
            served_by: served.clone(),
            attempts: u32::try_from(p.attempts.len()).unwrap_or(u32::MAX),
        }));
        let serving = p
            .attempts
            .iter()
            .rposition(|a| a.succeeded())
            .filter(|_| served.is_some());
        for (i, a) in p.attempts.iter().enumerate() {
            rows.push(LedgerRow::Attempt(AttemptRow {
                id: new_row_id(),
                call_id: call_id.clone(),
                seq: u32::try_from(i).unwrap_or(u32::MAX),
                at_ms: self.at_ms,
                scope: self.scope.clone(),
                link: a.provider.to_string(),
                deployment: a.deployment.as_ref().map(ToString::to_string),
                model: a.model.to_string(),
                tokens: if serving == Some(i) {
                    tokens
                } else {
                    Tokens::default()
                },
                outcome: a.error_kind.map_or("ok", |k| k.as_str()).to_owned(),
                status: a.status,
                latency_ms: u64::try_from(a.latency.as_millis()).unwrap_or(u64::MAX),
                degraded: p.degraded,
                served_by: served.clone(),
            }));
        }
        ledger.record(rows);
    }
}

impl Drop for CallLog {
    fn drop(&mut self) {
        // Still open: the stream's client left before its end.
        self.write("cancelled");
    }
}
