//! `--only`: which rows a run measures.

/// The rows `--only gateway` stands for: the gateway rows and the rows they are compared with.
const GATEWAY_ROWS: [&str; 9] = [
    "sdk_direct",
    "gateway",
    "gateway_messages",
    "gateway_responses",
    "bare_proxy",
    "upstream_ceiling",
    "gateway_keepalive",
    "gateway_ledger_sqlite",
    "gateway_ledger_postgres",
];

/// Rows built only when what they go through runs: the gateway ones (not with `--no-gateway`;
/// `gateway_ledger_postgres` only with a Postgres URL) and the Redis ones (only with
/// `redis-server` on PATH). The report's notes say why one was not built.
fn may_be_absent(key: &str) -> bool {
    GATEWAY_ROWS.contains(&key) || matches!(key, "chain_redis" | "failover_redis")
}

/// The row keys `--only` names, with `gateway` standing for [`GATEWAY_ROWS`]; `None` without
/// `--only`.
pub(crate) fn keys(only: &[String]) -> Option<Vec<String>> {
    if only.is_empty() {
        return None;
    }
    let mut keys = Vec::new();
    for k in only.iter().map(|k| k.trim()).filter(|k| !k.is_empty()) {
        if k == "gateway" {
            keys.extend(GATEWAY_ROWS.iter().map(|g| (*g).to_owned()));
        } else {
            keys.push(k.to_owned());
        }
    }
    keys.dedup();
    Some(keys)
}

/// Checks `keys` against the rows this run built (`built`): a key no run builds is refused, a
/// row this run could not build is left out, and at least one named row must have been built.
pub(crate) fn check(keys: &[String], built: &[&str]) -> Result<(), String> {
    let unknown = |k: &&String| !built.contains(&k.as_str()) && !may_be_absent(k);
    if let Some(unknown) = keys.iter().find(unknown) {
        return Err(format!(
            "--only {unknown:?}: the rows are {built:?} (or `gateway`)"
        ));
    }
    if !keys.iter().any(|k| built.contains(&k.as_str())) {
        return Err(format!(
            "--only {}: none of these rows was built in this run (see the notes above)",
            keys.join(",")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(keys: &[&str]) -> Vec<String> {
        keys.iter().map(|k| (*k).to_owned()).collect()
    }

    #[test]
    fn gateway_stands_for_the_gateway_rows() {
        assert_eq!(keys(&[]), None);
        let k = keys(&owned(&["chain", " gateway ", ""])).unwrap();
        assert_eq!(k[0], "chain");
        assert_eq!(k[1..], GATEWAY_ROWS);
    }

    #[test]
    fn a_row_this_run_did_not_build_is_left_out_not_refused() {
        // No Postgres URL: every gateway row but the Postgres ledger's was built.
        let built: Vec<&str> = ["floor", "chain"]
            .into_iter()
            .chain(GATEWAY_ROWS)
            .filter(|k| *k != "gateway_ledger_postgres")
            .collect();
        let k = keys(&owned(&["chain", "gateway"])).unwrap();
        assert_eq!(check(&k, &built), Ok(()));
        let k = owned(&["gateway_ledger_sqlite", "gateway_ledger_postgres"]);
        assert_eq!(check(&k, &built), Ok(()));
        // No Redis either.
        assert_eq!(check(&owned(&["chain", "chain_redis"]), &built), Ok(()));
    }

    #[test]
    fn an_unknown_row_or_none_built_is_refused() {
        let built = ["floor", "chain"];
        let e = check(&owned(&["chain", "nope"]), &built).unwrap_err();
        assert!(e.starts_with("--only \"nope\": the rows are"), "{e}");
        let e = check(&owned(&["gateway_ledger_postgres"]), &built).unwrap_err();
        assert!(e.contains("none of these rows was built"), "{e}");
    }
}
