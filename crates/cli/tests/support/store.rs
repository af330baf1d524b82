//! Databases for the `[store]` tests: a temp directory for a SQLite file, and a fresh database
//! on the Postgres server `RIPCORD_TEST_POSTGRES_URL` names (`cargo xtask test` starts one).

#![allow(dead_code, clippy::unwrap_used, clippy::print_stderr)]

use std::path::{Path, PathBuf};

/// A temp directory removed on drop.
pub(crate) struct Dir(pub(crate) PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A config of one OpenAI-wire link `vendor` (one attempt) with the gateway key
/// `RIPCORD_TEST_<env>_KEY` (tenant `acme`), the admin key `RIPCORD_TEST_<env>_ADMIN`, and a
/// `[store]` at `url` spooling to `spool`, flushing every `flush_ms`; `store_extra` ends the
/// `[store]` section.
pub(crate) fn store_config(
    vendor: &str,
    env: &str,
    url: &str,
    spool: &Path,
    flush_ms: u64,
    store_extra: &str,
) -> String {
    format!(
        r#"
[chain]
order = ["vendor"]
deadline_ms = 5000
{}{}{}
[server.admin]
key_env = "RIPCORD_TEST_{env}_ADMIN"

[store]
url = "{url}"
spool = "{}"
flush_interval_ms = {flush_ms}
{store_extra}"#,
        crate::support::openai_link("vendor", "gpt-4o", vendor, "sk-test"),
        crate::support::ONE_ATTEMPT,
        crate::support::tenant_key("acme", &format!("RIPCORD_TEST_{env}_KEY")),
        spool.display(),
    )
}

pub(crate) fn temp_dir(test: &str) -> Dir {
    let d = std::env::temp_dir().join(format!(
        "ripcord-ledger-{test}-{}-{}",
        std::process::id(),
        ripcord_store::new_row_id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

/// The URL of the SQLite database file in `dir`.
pub(crate) fn sqlite_url(dir: &Dir) -> String {
    format!("sqlite://{}", dir.0.join("ripcord.db").display())
}

/// A fresh database on the test Postgres, or `None` with the reason printed.
pub(crate) async fn postgres_db() -> Option<String> {
    let Ok(base) = std::env::var("RIPCORD_TEST_POSTGRES_URL") else {
        eprintln!(
            "skipped: RIPCORD_TEST_POSTGRES_URL is not set (cargo xtask test starts a Postgres)"
        );
        return None;
    };
    let name = format!("l{}", &ripcord_store::new_row_id()[..16]);
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(&base).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut c)
        .await
        .unwrap();
    let (root, _) = base.rsplit_once('/').unwrap();
    Some(format!("{root}/{name}"))
}
