//! Reading the ledger: what a tenant or key spent over a time range, in total or grouped.

use serde::Serialize;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::db::Store;
use crate::error::StoreError;

/// How [`Store::spend`] groups calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupBy {
    /// One group for everything that matched.
    Total,
    /// By the model that served (or was last asked).
    Model,
    /// By route.
    Route,
    /// By the link that served.
    Link,
    /// By UTC day (`YYYY-MM-DD`).
    Day,
}

impl GroupBy {
    /// Reads `model`, `route`, `link`, `day` or `total`.
    ///
    /// # Errors
    ///
    /// A message naming the value and the ones accepted.
    pub fn parse(s: &str) -> Result<GroupBy, String> {
        match s {
            "total" | "" => Ok(GroupBy::Total),
            "model" => Ok(GroupBy::Model),
            "route" => Ok(GroupBy::Route),
            "link" => Ok(GroupBy::Link),
            "day" => Ok(GroupBy::Day),
            other => Err(format!(
                "group_by {other:?} is not one of model, route, link, day, total"
            )),
        }
    }
}

/// Which calls [`Store::spend`] sums.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpendFilter {
    /// Only this tenant's calls.
    pub tenant: Option<String>,
    /// Only this key's calls.
    pub key_id: Option<String>,
    /// Calls at or after this time (Unix ms, UTC).
    pub from_ms: Option<i64>,
    /// Calls before this time (Unix ms, UTC).
    pub to_ms: Option<i64>,
}

/// One group of a spend report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendGroup {
    /// The group's value (`None`: the column was empty, or [`GroupBy::Total`]).
    pub group: Option<String>,
    /// Calls.
    pub calls: i64,
    /// Calls a fallback or the static reply answered.
    pub degraded: i64,
    /// Prompt tokens.
    pub tokens_in: i64,
    /// Generated tokens.
    pub tokens_out: i64,
    /// Cached prompt tokens.
    pub tokens_cached: i64,
    /// Estimated cost in USD (calls without a price count 0).
    pub cost_usd: f64,
}

/// The token sum `t` of a spend row (a negative sum, which cannot happen, reads as 0).
fn tokens(r: &AnyRow) -> Result<u64, StoreError> {
    let t: i64 = r.try_get("t").map_err(StoreError::Query)?;
    Ok(u64::try_from(t).unwrap_or(0))
}

impl Store {
    /// What the calls matching `filter` spent, grouped by `group_by`, largest cost first
    /// (by day: in day order).
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database fails.
    pub async fn spend(
        &self,
        filter: &SpendFilter,
        group_by: GroupBy,
    ) -> Result<Vec<SpendGroup>, StoreError> {
        let day = match self.backend() {
            crate::Backend::Sqlite => "strftime('%Y-%m-%d', at_ms / 1000, 'unixepoch')",
            crate::Backend::Postgres => {
                "to_char(to_timestamp(at_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
            }
        };
        let (group, order) = match group_by {
            GroupBy::Total => ("CAST(NULL AS TEXT)", "cost_usd DESC"),
            GroupBy::Model => ("model", "cost_usd DESC, g"),
            GroupBy::Route => ("route", "cost_usd DESC, g"),
            GroupBy::Link => ("link", "cost_usd DESC, g"),
            GroupBy::Day => (day, "g"),
        };
        let mut sql = format!(
            "SELECT {group} AS g, COUNT(*) AS calls, \
             CAST(COALESCE(SUM(CASE WHEN degraded THEN 1 ELSE 0 END), 0) AS BIGINT) AS degraded, \
             CAST(COALESCE(SUM(tokens_in), 0) AS BIGINT) AS tokens_in, \
             CAST(COALESCE(SUM(tokens_out), 0) AS BIGINT) AS tokens_out, \
             CAST(COALESCE(SUM(tokens_cached), 0) AS BIGINT) AS tokens_cached, \
             CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION) AS cost_usd \
             FROM ledger_calls WHERE 1 = 1"
        );
        let mut n = 0;
        let mut next = || {
            n += 1;
            n
        };
        if filter.tenant.is_some() {
            sql.push_str(&format!(" AND tenant = ${}", next()));
        }
        if filter.key_id.is_some() {
            sql.push_str(&format!(" AND key_id = ${}", next()));
        }
        if filter.from_ms.is_some() {
            sql.push_str(&format!(" AND at_ms >= ${}", next()));
        }
        if filter.to_ms.is_some() {
            sql.push_str(&format!(" AND at_ms < ${}", next()));
        }
        if group_by != GroupBy::Total {
            sql.push_str(" GROUP BY g");
        }
        sql.push_str(&format!(" ORDER BY {order}"));
        let mut q = sqlx::query(&sql);
        if let Some(t) = &filter.tenant {
            q = q.bind(t.as_str());
        }
        if let Some(k) = &filter.key_id {
            q = q.bind(k.as_str());
        }
        if let Some(f) = filter.from_ms {
            q = q.bind(f);
        }
        if let Some(t) = filter.to_ms {
            q = q.bind(t);
        }
        let rows = q.fetch_all(self.pool()).await.map_err(StoreError::Query)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let calls: i64 = r.try_get("calls").map_err(StoreError::Query)?;
            if group_by == GroupBy::Total && calls == 0 {
                continue;
            }
            out.push(SpendGroup {
                group: r.try_get("g").map_err(StoreError::Query)?,
                calls,
                degraded: r.try_get("degraded").map_err(StoreError::Query)?,
                tokens_in: r.try_get("tokens_in").map_err(StoreError::Query)?,
                tokens_out: r.try_get("tokens_out").map_err(StoreError::Query)?,
                tokens_cached: r.try_get("tokens_cached").map_err(StoreError::Query)?,
                cost_usd: r.try_get("cost_usd").map_err(StoreError::Query)?,
            });
        }
        Ok(out)
    }

    /// Tokens (in plus out) the calls of `tenant` (`None`: calls without a tenant) used at or
    /// after `from_ms`: what a budget's period already spent, read at start.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database fails.
    pub async fn tokens_since(
        &self,
        tenant: Option<&str>,
        from_ms: i64,
    ) -> Result<u64, StoreError> {
        let sql = match tenant {
            Some(_) => {
                "SELECT CAST(COALESCE(SUM(tokens_in + tokens_out), 0) AS BIGINT) AS t \
                 FROM ledger_calls WHERE tenant = $1 AND at_ms >= $2"
            }
            None => {
                "SELECT CAST(COALESCE(SUM(tokens_in + tokens_out), 0) AS BIGINT) AS t \
                 FROM ledger_calls WHERE tenant IS NULL AND at_ms >= $1"
            }
        };
        let mut q = sqlx::query(sql);
        if let Some(t) = tenant {
            q = q.bind(t);
        }
        let row = q
            .bind(from_ms)
            .fetch_one(self.pool())
            .await
            .map_err(StoreError::Query)?;
        let t: i64 = row.try_get("t").map_err(StoreError::Query)?;
        Ok(u64::try_from(t).unwrap_or(0))
    }

    /// Tokens (in plus out) per tenant and sub-tenant of the calls at or after `from_ms`: what
    /// every budget account spent in its window, read at start. `None` is a call without one.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database fails.
    pub async fn tokens_by_tenant_since(
        &self,
        from_ms: i64,
    ) -> Result<Vec<(Option<String>, Option<String>, u64)>, StoreError> {
        let rows = self
            .rows_since(
                "SELECT tenant, sub_tenant, \
                 CAST(COALESCE(SUM(tokens_in + tokens_out), 0) AS BIGINT) AS t \
                 FROM ledger_calls WHERE at_ms >= $1 GROUP BY tenant, sub_tenant",
                from_ms,
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("tenant").map_err(StoreError::Query)?,
                    r.try_get("sub_tenant").map_err(StoreError::Query)?,
                    tokens(r)?,
                ))
            })
            .collect()
    }

    /// Tokens (in plus out) per key id of the calls at or after `from_ms` (calls made with a
    /// key): what each key's own budget spent in its window, read at start.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database fails.
    pub async fn tokens_by_key_since(
        &self,
        from_ms: i64,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = self
            .rows_since(
                "SELECT key_id, CAST(COALESCE(SUM(tokens_in + tokens_out), 0) AS BIGINT) AS t \
                 FROM ledger_calls WHERE at_ms >= $1 AND key_id IS NOT NULL GROUP BY key_id",
                from_ms,
            )
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("key_id").map_err(StoreError::Query)?, tokens(r)?)))
            .collect()
    }

    /// The rows of `sql`, a query whose one parameter is `from_ms`.
    async fn rows_since(&self, sql: &str, from_ms: i64) -> Result<Vec<AnyRow>, StoreError> {
        sqlx::query(sql)
            .bind(from_ms)
            .fetch_all(self.pool())
            .await
            .map_err(StoreError::Query)
    }

    /// Rows in `ledger_calls` and `ledger_attempts` (for tests and checks).
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database fails.
    pub async fn row_counts(&self) -> Result<(i64, i64), StoreError> {
        let c: i64 = sqlx::query("SELECT COUNT(*) AS n FROM ledger_calls")
            .fetch_one(self.pool())
            .await
            .and_then(|r| r.try_get("n"))
            .map_err(StoreError::Query)?;
        let a: i64 = sqlx::query("SELECT COUNT(*) AS n FROM ledger_attempts")
            .fetch_one(self.pool())
            .await
            .and_then(|r| r.try_get("n"))
            .map_err(StoreError::Query)?;
        Ok((c, a))
    }
}
