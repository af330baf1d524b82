//! Spend reports from the ledger (issue 38), one implementation for `GET /admin/spend` and
//! `ripcord spend`: the query's times, the grouping, and the JSON / CSV renderings.

use ripcord_store::{GroupBy, SpendFilter, SpendGroup, Store};
use serde_json::{Value, json};

/// Unix milliseconds of `s`: an RFC 3339 time, a `YYYY-MM-DD` UTC day (with `end`: the next
/// midnight, so a day `to` covers the whole day), or Unix milliseconds.
///
/// # Errors
///
/// A message naming `what` and the value.
pub fn parse_time(s: &str, what: &str, end: bool) -> Result<i64, String> {
    let s = s.trim();
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    if let Ok(t) = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339) {
        return Ok(i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX));
    }
    let day = || -> Option<time::Date> {
        let mut parts = s.splitn(3, '-');
        let y = parts.next()?.parse::<i32>().ok()?;
        let m = parts.next()?.parse::<u8>().ok()?;
        let d = parts.next()?.parse::<u8>().ok()?;
        time::Date::from_calendar_date(y, time::Month::try_from(m).ok()?, d).ok()
    };
    match day() {
        Some(d) => {
            let d = if end { d.next_day().unwrap_or(d) } else { d };
            Ok(d.midnight().assume_utc().unix_timestamp() * 1000)
        }
        None => Err(format!(
            "`{what}` = {s:?} is not an RFC 3339 time, a YYYY-MM-DD day or Unix milliseconds"
        )),
    }
}

/// A report's question, as written by its caller.
#[derive(Debug, Clone, Default)]
pub struct SpendQuestion {
    /// Only this tenant.
    pub tenant: Option<String>,
    /// Only this key (its ledger id, `tenant@source`).
    pub key: Option<String>,
    /// From (see [`parse_time`]).
    pub from: Option<String>,
    /// To, exclusive (see [`parse_time`]).
    pub to: Option<String>,
    /// `model`, `route`, `link`, `day` or `total` (the default).
    pub group_by: Option<String>,
}

/// Where a question went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadQuestion {
    /// The parameter.
    pub param: &'static str,
    /// What is wrong with it.
    pub message: String,
}

/// A report: the question as understood and its groups.
#[derive(Debug, Clone)]
pub struct SpendReport {
    /// The grouping's name.
    pub group_by: String,
    /// The filter applied.
    pub filter: SpendFilter,
    /// The groups.
    pub groups: Vec<SpendGroup>,
}

impl SpendQuestion {
    /// The filter and grouping.
    ///
    /// # Errors
    ///
    /// The first parameter that does not parse.
    pub fn parse(&self) -> Result<(SpendFilter, GroupBy, String), BadQuestion> {
        let name = self.group_by.clone().unwrap_or_else(|| "total".to_owned());
        let group_by = GroupBy::parse(&name).map_err(|message| BadQuestion {
            param: "group_by",
            message,
        })?;
        let time = |v: &Option<String>, param: &'static str, end: bool| {
            v.as_deref()
                .map(|s| parse_time(s, param, end))
                .transpose()
                .map_err(|message| BadQuestion { param, message })
        };
        let filter = SpendFilter {
            tenant: self.tenant.clone(),
            key_id: self.key.clone(),
            from_ms: time(&self.from, "from", false)?,
            to_ms: time(&self.to, "to", true)?,
        };
        Ok((filter, group_by, name))
    }
}

/// Asks `store`.
///
/// # Errors
///
/// The store's error, with its cause.
pub async fn ask(
    store: &Store,
    filter: SpendFilter,
    group_by: GroupBy,
    name: String,
) -> Result<SpendReport, String> {
    let groups = store.spend(&filter, group_by).await.map_err(|e| {
        let cause = std::error::Error::source(&e).map_or(String::new(), |c| format!(": {c}"));
        format!("{e}{cause}")
    })?;
    Ok(SpendReport {
        group_by: name,
        filter,
        groups,
    })
}

impl SpendReport {
    /// As JSON.
    pub fn json(&self) -> Value {
        json!({
            "group_by": self.group_by,
            "tenant": self.filter.tenant,
            "key": self.filter.key_id,
            "from_ms": self.filter.from_ms,
            "to_ms": self.filter.to_ms,
            "groups": self.groups,
        })
    }

    /// As CSV: a header row, then one row per group.
    ///
    /// # Errors
    ///
    /// The CSV writer's error.
    pub fn csv(&self) -> Result<Vec<u8>, String> {
        let fail = |e: csv::Error| format!("the CSV could not be written: {e}");
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            self.group_by.as_str(),
            "calls",
            "degraded",
            "tokens_in",
            "tokens_out",
            "tokens_cached",
            "cost_usd",
        ])
        .map_err(fail)?;
        for g in &self.groups {
            w.write_record([
                g.group.clone().unwrap_or_default(),
                g.calls.to_string(),
                g.degraded.to_string(),
                g.tokens_in.to_string(),
                g.tokens_out.to_string(),
                g.tokens_cached.to_string(),
                g.cost_usd.to_string(),
            ])
            .map_err(fail)?;
        }
        w.into_inner()
            .map_err(|e| format!("the CSV could not be written: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_three_ways_and_bad_ones_are_named() {
        assert_eq!(
            parse_time("1700000000000", "from", false),
            Ok(1_700_000_000_000)
        );
        assert_eq!(parse_time("1970-01-02", "from", false), Ok(86_400_000));
        assert_eq!(parse_time("1970-01-02", "to", true), Ok(2 * 86_400_000));
        assert_eq!(parse_time("1970-01-01T00:00:01Z", "from", false), Ok(1000));
        let e = parse_time("yesterday", "from", false).unwrap_err();
        assert!(e.contains("`from`") && e.contains("yesterday"), "{e}");
        let bad = SpendQuestion {
            group_by: Some("tenant".into()),
            ..SpendQuestion::default()
        };
        assert_eq!(bad.parse().unwrap_err().param, "group_by");
    }

    #[test]
    fn csv_quotes_what_needs_quoting() {
        let r = SpendReport {
            group_by: "model".into(),
            filter: SpendFilter::default(),
            groups: vec![SpendGroup {
                group: Some("a,\"b\"".into()),
                calls: 2,
                degraded: 1,
                tokens_in: 3,
                tokens_out: 4,
                tokens_cached: 0,
                cost_usd: 0.5,
            }],
        };
        let text = String::from_utf8(r.csv().unwrap()).unwrap();
        assert_eq!(
            text,
            "model,calls,degraded,tokens_in,tokens_out,tokens_cached,cost_usd\n\"a,\"\"b\"\"\",2,1,3,4,0,0.5\n"
        );
    }
}
